#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The node index through its accessors (ds_ix_*): long and deep paths,
# 255-byte components, UTF-8 names, many siblings, 40-bit file fields;
# every path found by lookup and by a component walk, near misses not.
exec "$(dirname "$0")/../build/t/test-ixlayout"
