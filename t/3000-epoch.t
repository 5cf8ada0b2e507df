#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Unit tests of the epoch shuffle (common/epoch.c): permutations, equal
# shares (pad and drop), seeds, epochs, locality, reader slices, epoch.conf.
exec "$(dirname "$0")/../build/t/test-epoch"
