#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A metadata broadcast of 200k entries: every node gets the whole index.
. "$(dirname "$0")/test-lib.sh"

uid=$(id -u)
test_expect_success 'a tree of 200k small files' '
	mkdir src && cd src &&
	seq 0 199 | sed "s/^/d/" | xargs mkdir &&
	seq 0 199999 | awk "{ printf \"d%d/f%06d\\n\", \$1 % 200, \$1 }" >../names &&
	xargs -a ../names -n 5000 touch &&
	echo payload >d7/f000007 && cd .. &&
	test $(find src -type f | wc -l) = 200000
'

test_expect_success 'pack and stage it on 2 nodes' '
	"$DSTAGE" pack -q -p 4 src pack &&
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job big --node-per-rank >out &&
	test_grep "staged 200000 files, 200 directories on 2 node" out
'

test_expect_success 'every node holds the whole index; files split between them' '
	"$DSTAGE" status --to "$SHM" --job big >st &&
	awk "/^[0-9]/ { n++; f += \$2 } END { exit !(n == 2 && f == 200000) }" st &&
	"$T/storecheck" "$SHM/dstage.$uid.big" src >holders &&
	test $(wc -l <holders) = 200000 && ! grep -v " 1$" holders
'
test_done
