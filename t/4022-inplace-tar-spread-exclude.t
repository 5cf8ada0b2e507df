#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dstage pack --in-place --expand-tar (issue 28): under mpiexec the tars
# are listed by all the ranks, not by rank 0 alone, and the manifest is the
# same whatever the number of ranks; --exclude applies to the members of a
# tar (X.tar/member, a member's name, a directory of the tar and its
# members) as to the files of the tree.
. "$(dirname "$0")/test-lib.sh"

command -v tar >/dev/null || skip_all "no GNU tar"
test_lazy_prereq STRACE 'strace -f -qq -o /dev/null true' 'strace -f works here (ptrace allowed)'

test_expect_success 'setup: six shards (GNU tar, pax, Python tarfile with long names)' '
	mkdir -p src/train ref/train &&
	for i in 0 1 2 3 4; do
		mkdir -p m$i/sub &&
		for j in 1 2 3 4 5 6; do
			head -c $((j * 200 + i)) /dev/urandom >m$i/00000$j.jpg &&
			echo $j >m$i/00000$j.cls || return 1
		done &&
		echo deep >m$i/sub/x.txt &&
		{ fmt=gnu && test $i -lt 2 || fmt=posix; } &&
		tar --format=$fmt -cf src/train/shard-$i.tar -C m$i . || return 1
	done &&
	"$PY" - src/train/shard-5.tar <<-\EOP &&
	import io, sys, tarfile
	with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
	    for k in range(4):
	        name = "long-" + "n" * 120 + "/%03d.jpg" % k
	        data = bytes((k * 7 + b) % 256 for b in range(1000 + k))
	        ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
	EOP
	for i in 0 1 2 3 4 5; do
		mkdir ref/train/shard-$i.tar &&
		tar -xf src/train/shard-$i.tar -C ref/train/shard-$i.tar || return 1
	done &&
	echo labels >src/classes.txt && cp src/classes.txt ref/ &&
	(cd ref && find . -mindepth 1 | sed "s|^\./||" | sort) >ref.paths
'

test_expect_success 'one process: the manifest lists every member' '
	"$DSTAGE" pack -q --in-place --expand-tar src p1 &&
	"$DSTAGE" ls p1 | sed "s|/$||" | sort >ls.1 && test_cmp ref.paths ls.1 &&
	"$DSTAGE" verify p1 >v.1
'

for n in 2 3; do
	test_expect_success "mpiexec -n $n: the same manifest, every member read right" '
		mpirun_n '$n' "$DSTAGE" pack -q --in-place --expand-tar src p'$n' &&
		"$DSTAGE" ls p'$n' | sed "s|/$||" | sort >ls.'$n' && test_cmp ls.1 ls.'$n' &&
		"$DSTAGE" verify p'$n' >v.'$n' && sed "s/^p1:/p'$n':/" v.1 >want &&
		test_cmp want v.'$n' &&
		"$DSTAGE" cat p'$n' "train/shard-5.tar/long-$(printf "n%.0s" $(seq 120))/002.jpg" >got &&
		test_cmp "ref/train/shard-5.tar/long-$(printf "n%.0s" $(seq 120))/002.jpg" got &&
		cmp p1/index.h5 p'$n'/index.h5
	'
done

test_expect_success STRACE 'mpiexec -n 3: the tars are listed by more than one rank' '
	strace -f -ff -qq -e trace=open,openat,openat2 -o trace \
		$ds_mpiexec -n 3 "$DSTAGE" pack -q --in-place --expand-tar src p3s &&
	for f in trace.*; do
		! grep -qE "shard-[0-9]\.tar\", (\{flags=)?O_RDONLY.*= [0-9]+$" $f || echo $f || exit 1
	done >listers &&
	cat listers && test "$(wc -l <listers)" -ge 2 &&
	for i in 0 1 2 3 4 5; do
		n=$(cat trace.* | grep -cE "shard-$i\.tar\", (\{flags=)?O_RDONLY.*= [0-9]+$") &&
		echo "shard-$i.tar: $n opens" && test "$n" -ge 1 || return 1
	done
'

test_expect_success 'mpiexec -n 3: a hostile tar listed by any rank fails the pack, named, no OUT' '
	mkdir -p bad/a bad/b && cp src/train/shard-*.tar bad/a/ &&
	"$PY" - bad/b/evil.tar <<-\EOP &&
	import io, sys, tarfile
	with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
	    ti = tarfile.TarInfo("../evil"); ti.size = 1; t.addfile(ti, io.BytesIO(b"x"))
	EOP
	test_status --show err 1 mpirun_n 3 "$DSTAGE" pack -q --in-place --expand-tar bad pbad 2>err &&
	grep "bad/b/evil.tar'"'"': member '"'"'../evil'"'"'" err && ! test -e pbad
'

test_expect_success '--exclude matches members: by name, by path, a directory of a tar' '
	mpirun_n 2 "$DSTAGE" pack -q --in-place --expand-tar --exclude "*.cls" \
		--exclude "train/shard-1.tar/000003.jpg" --exclude "sub" --exclude "long-n*" src px &&
	"$DSTAGE" ls px | sed "s|/$||" | sort >ls.x &&
	grep -v -e "\.cls$" -e "^train/shard-1\.tar/000003\.jpg$" -e "/sub$" -e "/sub/" \
		-e "/long-n" ref.paths >want.x &&
	test_cmp want.x ls.x &&
	grep "shard-0.tar/000003.jpg" ls.x && "$DSTAGE" verify px
'

test_expect_success '--exclude of a tar itself still drops the whole tar' '
	"$DSTAGE" pack -q --in-place --expand-tar --exclude "shard-[0-4].tar" src pt &&
	"$DSTAGE" ls pt | sed "s|/$||" | sort >ls.t &&
	grep -v "shard-[0-4]\.tar" ref.paths >want.t && test_cmp want.t ls.t
'

test_done
