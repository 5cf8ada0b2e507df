#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# make install and make uninstall (docs/HACKING.md, "Version, install and the module"): an
# installed prefix runs pack, stage, serve and reads through the shim with
# nothing from the source tree (hidden under an empty tmpfs in a private
# mount namespace), `dstage env` points at the installed shim and Python
# helper, the Lmod module file puts the command, the man page and the
# helper on the paths, and make uninstall leaves nothing behind.
. "$(dirname "$0")/test-lib.sh"

test_lazy_prereq HIDE '
	mkdir -p hide && unshare -m sh -c "mount -t tmpfs -o size=1m none hide" 2>/dev/null' \
	"cannot mount a tmpfs in a private mount namespace (unshare -m: root)"
test_lazy_prereq LMOD '[ -r /usr/share/lmod/lmod/init/bash ] && command -v bash' \
	"Lmod not installed (apt-get install lmod)"
test_lazy_prereq MAKE 'command -v make' "make not installed"
test_require MAKE

P="$TRASH/prefix"
DEST="$TRASH/destdir"

test_expect_success 'make install DESTDIR=... PREFIX=...: the files, the module, the manifest' '
	make -C "$SRCDIR" --no-print-directory install DESTDIR="$DEST" PREFIX="$P" >install.log 2>&1 ||
		{ cat install.log; exit 1; } &&
	V=$(sh "$SRCDIR/tools/version.sh") && echo "$V" >version &&
	for f in bin/dstage lib/libdstage-preload.so share/dstage/python/dstage/__init__.py \
		libexec/dstage/mksample share/dstage/demo.sh \
		share/man/man1/dstage.1 share/modulefiles/dstage/$V.lua share/doc/dstage/LICENSE \
		share/dstage/jobs/train.sbatch share/dstage/jobs/epilog-dstage.sh; do
		test -f "$DEST$P/$f" || { echo "$f: not installed"; exit 1; }
	done &&
	test -x "$DEST$P/bin/dstage" &&
	test_grep "^$P/bin/dstage\$" "$DEST$P/share/dstage/install-manifest" &&
	test_grep "local root = \[\[$P\]\]" "$DEST$P/share/modulefiles/dstage/$V.lua" &&
	! grep -rl "$DEST" "$DEST$P/share/modulefiles" &&
	# what a package manager does with DESTDIR: the tree lands at PREFIX
	mv "$DEST$P" "$P"
'

test_expect_success 'a relative PREFIX is refused, nothing installed' '
	! make -C "$SRCDIR" --no-print-directory install DESTDIR="$TRASH/d2" PREFIX=rel >log 2>&1 &&
	test_grep "PREFIX .rel.: must be an absolute path" log && ! test -e "$TRASH/d2"
'

test_expect_success 'setup: a small tree with a validation set' '
	mkdir -p src/train/a src/train/b src/val &&
	i=0 && while [ $i -lt 12 ]; do
		head -c $((100 + i * 37)) /dev/urandom >src/train/a/f$i &&
		head -c $((3000 + i * 11)) /dev/urandom >src/train/b/g$i && i=$((i + 1)) || exit 1
	done &&
	echo labels >src/val/labels.txt
'

# the job run by the installed binaries alone, PATH without the build tree
cat >job.sh <<'JOB'
set -eu
P=$1 SHM=$2
export PATH="$P/bin:/usr/bin:/bin"
unset LD_PRELOAD PYTHONPATH DSTAGE_BIN
test ! -e "$3/Makefile"             # the source tree is out of reach
dstage --version | head -1
dstage pack -q -p 4 --replicate val src pack
dstage verify -q pack --against src
timeout 120 mpiexec.mpich -n 2 dstage stage pack --to "$SHM" --job inst --node-per-rank -q
timeout 120 mpiexec.mpich -n 2 dstage serve --to "$SHM" --job inst --node-per-rank --seed 3 -q &
pid=$!
k=0
while [ "$(ls "$SHM/dstage.$(id -u).inst"/*/sock 2>/dev/null | wc -l)" -lt 2 ]; do
	k=$((k + 1)); [ $k -lt 300 ] || { echo "the service did not come up"; exit 1; }
	kill -0 $pid || { echo "the service ended"; exit 1; }
	sleep 0.1
done
for node in 0 1; do
	dstage env --to "$SHM" --job inst --node $node --mount /dstage-inst >env.$node
	( eval "$(cat env.$node)"
	  cd src && find . -type f | sed "s,^\./,," | sort >../files
	  while read -r f; do cmp "/dstage-inst/$f" "$f" || exit 1; done <../files
	  /usr/bin/python3 -c "import dstage, sys; print(dstage.__file__)" >../py.$node
	  cat /dstage-inst/.dstage/epochs/0/all >../list.$node ) || { echo "node $node: reads failed"; exit 1; }
done
dstage stop --to "$SHM" --job inst
wait $pid
dstage clean --to "$SHM" --job inst
echo job done
# the demo a site runs to check an install
DSTAGE_DEMO_NODES=2 TMPDIR="$PWD" timeout 120 sh "$P/share/dstage/demo.sh" >demo.out 2>&1 ||
	{ cat demo.out; exit 1; }
tail -1 demo.out
JOB

test_expect_success MPI,PYTHON,HIDE 'the installed prefix runs pack, stage, serve, reads and the demo with the source tree hidden' '
	unshare -m sh -c "mount -t tmpfs -o size=1m,mode=0755 none \"\$1\" && sh job.sh \"\$2\" \"\$3\" \"\$1\"" \
		sh "$SRCDIR" "$P" "$SHM" >job.out 2>&1 || { cat job.out; exit 1; } &&
	cat job.out &&
	test_grep "^dstage $(cat version)\$" job.out && test_grep "^job done" job.out &&
	test_grep "^demo: all bytes checked against the source: ok\$" job.out &&
	for node in 0 1; do
		test_grep "^export LD_PRELOAD=.$P/lib/libdstage-preload.so.\$" env.$node &&
		test_grep "^export PYTHONPATH=.$P/share/dstage/python.\$" env.$node &&
		test_grep "^$P/share/dstage/python/dstage/__init__.py\$" py.$node &&
		test -s list.$node || exit 1
	done
'

test_expect_success LMOD 'module use PREFIX/share/modulefiles; module load dstage' '
	env -i HOME="$TRASH" PATH=/usr/bin:/bin bash -c "
		. /usr/share/lmod/lmod/init/bash &&
		module use \"$P/share/modulefiles\" && module load dstage &&
		module list 2>&1 && command -v dstage && echo \"MANPATH=\$MANPATH\" &&
		echo \"PYTHONPATH=\$PYTHONPATH\" && echo \"DSTAGE_ROOT=\$DSTAGE_ROOT\" &&
		man -w dstage && man -w man && dstage --version | head -1 &&
		module unload dstage && echo \"after=\$(command -v dstage || echo none)\"
	" >mod.out 2>&1 || { cat mod.out; exit 1; } &&
	cat mod.out &&
	test_grep "dstage/$(cat version)" mod.out &&
	test_grep "^$P/bin/dstage\$" mod.out &&
	test_grep "^MANPATH=$P/share/man" mod.out &&
	test_grep "^PYTHONPATH=$P/share/dstage/python" mod.out &&
	test_grep "^DSTAGE_ROOT=$P\$" mod.out &&
	test_grep "^$P/share/man/man1/dstage.1" mod.out &&
	test_grep "^/usr/share/man/man1/man.1" mod.out &&
	test_grep "^dstage $(cat version)\$" mod.out &&
	test_grep "^after=none\$" mod.out
'

test_expect_success 'make uninstall leaves nothing (also after a newer version was built)' '
	echo "a file of another package" >keep && install -d "$P/share/man/man1" &&
	cp keep "$P/share/man/man1/other.1" &&
	make -C "$SRCDIR" --no-print-directory uninstall PREFIX="$P" DS_VERSION=9.9.9 >un.log 2>&1 ||
		{ cat un.log; exit 1; } &&
	rm "$P/share/man/man1/other.1" &&
	find "$P" -type f -o -type l >left && test_cmp /dev/null left &&
	! test -e "$P/share/dstage" && ! test -e "$P/share/modulefiles/dstage" &&
	! test -e "$P/share/doc/dstage"
'

test_done
