#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Unit tests of common/: checksums, sizes, name checks, the node index.
exec "$(dirname "$0")/../build/t/test-common"
