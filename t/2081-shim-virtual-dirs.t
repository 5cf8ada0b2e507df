#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The virtual epoch directories ($MOUNT/.dstage, .dstage/epochs,
# .dstage/epochs/<e>) look like real directories to ls -la, stat and find:
# "." and ".." stat like real ones ("..'" of .dstage is the mount root), and
# the answers agree with a real tree of the same shape (issue 11.13).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup: a small tree on one node; a real tree of the same shape' '
	mkdir -p src/train && for i in 1 2 3 4; do echo $i >src/train/s$i || exit 1; done &&
	touch_root src &&
	stage_tree src -N 1 -p 2 &&
	shim cat "$MOUNT/.dstage/epochs/0/all" >all &&
	test $(wc -l <all) = 4 &&
	mkdir -p real/.dstage/epochs/0 && cp all real/.dstage/epochs/0/all &&
	chmod 444 real/.dstage/epochs/0/all &&
	chmod 555 real/.dstage/epochs/0 real/.dstage/epochs real/.dstage
'

V=".dstage .dstage/epochs .dstage/epochs/0"

test_expect_success 'ls -la: modes, links and names as in the real tree' '
	(cd real && ls -la $V) | awk "NF > 2 {print \$1, \$2, \$NF} NF <= 2" |
		grep -v "^total" >native.out &&
	(shim sh -c "cd $MOUNT && ls -la $V") | awk "NF > 2 {print \$1, \$2, \$NF} NF <= 2" |
		grep -v "^total" >staged.out &&
	sed "/^\.dstage:/,/^$/s/^\(d[^ ]*\) [0-9]* \.\.$/\1 N ../" native.out >n &&
	sed "/^\.dstage:/,/^$/s/^\(d[^ ]*\) [0-9]* \.\.$/\1 N ../" staged.out >s &&
	test_cmp n s &&
	! grep -q "?" staged.out
'
test_expect_success 'stat of . and .. of each virtual directory' '
	for d in $V; do
		for e in . ..; do
			shim stat -c "%F %a" "$MOUNT/$d/$e" || exit 1
			(cd real && stat -c "%F %a" "$d/$e") >>native || exit 1
		done
	done >staged &&
	sed -n 2p native | grep -q "^directory" &&
	sed 2d native >n && sed 2d staged >s && test_cmp n s
'
test_expect_success '.. climbs: inode numbers agree with the parents, .dstage/.. is the mount root' '
	for p in "" .dstage .dstage/epochs; do
		shim stat -c %i "$MOUNT/$p" >want &&
		case $p in
		"") shim stat -c %i "$MOUNT/.dstage/.." ;;
		.dstage) shim stat -c %i "$MOUNT/.dstage/epochs/.." ;;
		*) shim stat -c %i "$MOUNT/.dstage/epochs/0/.." ;;
		esac >got && test_cmp want got || exit 1
	done &&
	shim cat "$MOUNT/.dstage/epochs/../../train/s1" >s1 && test_cmp src/train/s1 s1 &&
	shim cat "$MOUNT/.dstage/epochs/0/../0/all" >a && test_cmp all a &&
	! shim cat "$MOUNT/.dstage/epochs/0/all/.." 2>err && test_grep "Not a directory" err
'
test_expect_success 'ls -ai: d_ino of . and .. are the st_ino stat gives' '
	for d in $V; do
		shim ls -ai "$MOUNT/$d" | awk "\$2 == \".\" || \$2 == \"..\" {print \$1}" >ls.out &&
		shim stat -c %i "$MOUNT/$d/." "$MOUNT/$d/.." >stat.out &&
		test_cmp stat.out ls.out || exit 1
	done
'
test_expect_success 'find lists the same tree as in the real one' '
	(cd real && find .dstage -printf "%p %y %m %n\n" | sort) >native.out &&
	(shim sh -c "cd $MOUNT && find .dstage -printf \"%p %y %m %n\n\"" | sort) >staged.out &&
	test_cmp native.out staged.out
'

test_done
