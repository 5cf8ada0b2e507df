#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Unit tests of the epoch cache (common/cache.c): the service writes, readers
# map read-only; entries become visible only once their bytes have landed.
exec "$(dirname "$0")/../build/t/test-cache"
