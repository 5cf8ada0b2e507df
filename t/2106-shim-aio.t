#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# POSIX AIO on staged descriptors (issue 25 item 3): glibc's AIO thread reads
# past the shim, so a request on a staged file used to end with EBADF, and
# ROMIO's MPI_File_iread/iread_at (aio_read, then aio_error until done)
# spun forever in MPI_Wait.  Each client here runs on the staged file and on
# its native copy and must give the same output; every wait is bounded (a
# hang is a failure, never a stuck suite).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_lazy_prereq FIO 'command -v fio' 'fio missing (Debian package fio)'

test_expect_success 'setup: files of 300 KB and 1 MiB, staged' '
	mkdir -p src/d &&
	head -c 300000 /dev/urandom >src/d/f &&
	head -c 1048576 /dev/urandom >src/d/m &&
	seq 1 2000 >other &&
	touch_root src &&
	stage_tree "$TRASH/src"
'

test_expect_success 'aio_read, aio_suspend, aio_error, aio_return, lio_listio, SIGEV_SIGNAL and SIGEV_THREAD, aio_write, aio_fsync, aio_cancel: as natively' '
	timeout 60 "$T/shim-aio" src/d/f other >native.out &&
	shim timeout 60 "$T/shim-aio" "$MOUNT/d/f" other >staged.out &&
	test_cmp native.out staged.out &&
	test_grep "aio_read whole: error 0 return 300000" staged.out &&
	test_grep "signal SIGRTMIN+1, value 4242" staged.out &&
	test_grep "thread value 99" staged.out &&
	test_grep "list signal value 17" staged.out &&
	test_grep "aio_write: error Bad file descriptor" staged.out &&
	test_grep "^aio_read64: error 0 return 1234" staged.out &&
	test_grep "^lio_listio64: 0 return 1234" staged.out
'

test_expect_success 'MPI_File_iread_at and MPI_File_iread through ROMIO on 2 ranks: the same bytes, no hang' '
	mpirun_n 2 "$T/mpi-iread" src/d/f 65536 >native.raw &&
	mpirun_n 2 -genv LD_PRELOAD "$PRELOAD" -genv DSTAGE_STORE "$JOBDIR" \
		-genv DSTAGE_MOUNT "$MOUNT" -genv DSTAGE_NODE "$NODE" \
		"$T/mpi-iread" "$MOUNT/d/f" 65536 >staged.raw &&
	sort native.raw >native.out && sort staged.raw >staged.out &&
	test_cmp native.out staged.out &&
	test $(grep -c iread_at staged.out) = 5
'

# fio's terse fields 5 and 6: the error number and the KiB read
fio_read() {
	timeout 60 fio --name=r --ioengine=posixaio --readonly --rw="$2" --bs=$3 \
		--iodepth=8 --filename="$1" --minimal | cut -d";" -f5-6
}

test_expect_success FIO 'fio --ioengine=posixaio reads the staged file as the native one' '
	for rw in read randread; do
		for bs in 4k 64k; do
			fio_read src/d/m $rw $bs >native.out &&
			shim fio_read "$MOUNT/d/m" $rw $bs >staged.out &&
			echo "0;1024" >expect &&
			test_cmp expect native.out && test_cmp expect staged.out || return 1
		done
	done
'

test_done
