#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The node index through its accessors (ds_ix_*): long and deep paths,
# 255-byte components, UTF-8 names, many siblings, 40-bit file fields;
# every path found by lookup and by a component walk, near misses not;
# the cursors (ds_ix_paths, ds_ix_names, ds_ix_child_named) give what
# ds_ix_path, ds_ix_base and the per-entry checks give, for ids in any
# order, on the index and on damaged copies of it.
exec "$(dirname "$0")/../build/t/test-ixlayout"
