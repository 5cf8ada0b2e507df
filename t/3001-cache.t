#!/bin/sh
# Unit tests of the epoch cache (common/cache.c): the service writes, readers
# map read-only; entries become visible only once their bytes have landed.
exec "$(dirname "$0")/../build/t/test-cache"
