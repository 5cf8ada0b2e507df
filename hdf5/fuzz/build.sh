#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Build the libFuzzer targets for the manifest reader and the tar scanner:
#   hdf5/fuzz/build.sh [OUTDIR]      (default build/fuzz)
# Needs clang with libFuzzer (Debian: clang, libclang-rt-14-dev).  HDF5 and
# MPICH come from pkg-config hdf5-mpich, as in the Makefile; HDF5 itself is
# not instrumented, so ASan sees our code's memory errors and crashes
# anywhere.
set -e
cd "$(dirname "$0")/../.."
out=${1:-build/fuzz}
mkdir -p "$out"
CC=${FUZZ_CC:-clang}
HDF5_CFLAGS=$(pkg-config --cflags hdf5-mpich)
HDF5_LIBS=$(pkg-config --libs hdf5-mpich)
$CC -g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer \
	-D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Icommon -Ihdf5 $HDF5_CFLAGS \
	hdf5/fuzz/fuzz-manifest.c hdf5/manifest.c hdf5/seal.c hdf5/h5util.c \
	common/common.c common/crc32c.c \
	-o "$out/fuzz-manifest" $HDF5_LIBS -lz -lpthread -lm
echo "$out/fuzz-manifest"
# the tar member scanner (--expand-tar): hostile tars (hdf5/fuzz/fuzz-tar.c)
$CC -g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer \
	-D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Icommon -Ihdf5 $HDF5_CFLAGS \
	hdf5/fuzz/fuzz-tar.c hdf5/tar.c hdf5/manifest.c hdf5/seal.c hdf5/h5util.c \
	common/common.c common/crc32c.c \
	-o "$out/fuzz-tar" $HDF5_LIBS -lz -lpthread -lm
echo "$out/fuzz-tar"
