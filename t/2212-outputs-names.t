#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Write-once outputs (docs/outputs.md): a name the drain cannot hold whole
# is refused when it is made (ENAMETOOLONG: create, mkdir, rename of a file
# or of a directory whose files would get too long a name), never accepted
# and then drained under a name cut at PATH_MAX.  The drain directory here
# is 2500 bytes long, so its limit, not the node's, is the one that counts.
# 2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged' '
	make_samples src 4 &&
	pack_stage src 2
'
# DR: $TRASH/drain/ddd.../ddd... (2500 bytes)
DR=$($PY -c "
import sys
p = sys.argv[1] + '/drain'
while len(p) < 2300: p += '/' + 'd' * 199
print(p + '/' + 'e' * (2499 - len(p)))" "$TRASH")
mkdir -p "$DR"
serve_start 2 --outputs out --drain-to "$DR" --drain-rate 0
test_expect_success 'served with outputs, drain directory of 2500 bytes' '
	test ${#DR} = 2500 && serve_up 2
'

cat >names.py <<'EOF2'
import errno, os, sys
out = sys.argv[1]
def err(fn, *a):
    try:
        fn(*a)
    except OSError as e:
        return errno.errorcode[e.errno]
    return "ok"
def create(p, data=b"x"):
    with open(p, "wb") as f:
        f.write(data)

# a file name: 210 bytes is the most (the drain adds its suffix to it)
print("210:", err(create, out + "/" + "f" * 210, b"f210"))
print("211:", err(create, out + "/" + "g" * 211))
print("mkdir 256:", err(os.mkdir, out + "/" + "h" * 256))
print("rename to 211:", err(os.rename, out + "/" + "f" * 210, out + "/" + "f" * 211))

# a deep tree: directories of 200 bytes until one is refused
d, depth, res = out, 0, "ok"
while res == "ok":
    res = err(os.mkdir, d + "/" + "%03d" % depth + "D" * 197)
    if res == "ok":
        d += "/" + "%03d" % depth + "D" * 197
        depth += 1
print("deep mkdir:", res, depth >= 3)
# in the deepest one, the longest file name that is taken
for n in range(210, 0, -1):
    res = err(create, d + "/" + "L" * n, b"long")
    if res == "ok":
        break
    assert res == "ENAMETOOLONG", res
print("longest file in it:", n < 200)
sys.stdout.flush()
with open("deep.txt", "w") as f:
    f.write(os.path.relpath(d + "/" + "L" * n, out) + "\n")
# a directory rename that would give that file too long a name
top = out + "/000" + "D" * 197
print("dir rename longer:", err(os.rename, top, out + "/" + "T" * 255))
print("dir rename shorter:", err(os.rename, top, out + "/top"))
EOF2

test_expect_success 'too long: ENAMETOOLONG at create, mkdir, rename; what fits is taken' '
	shim_on 1 $PY names.py "$MOUNT/out" >got &&
	cat >want <<-\EOF2 &&
	210: ok
	211: ENAMETOOLONG
	mkdir 256: ENAMETOOLONG
	rename to 211: ENAMETOOLONG
	deep mkdir: ENAMETOOLONG True
	longest file in it: True
	dir rename longer: ENAMETOOLONG
	dir rename shorter: ok
	EOF2
	test_cmp want got
'

test_expect_success 'drain --wait: every file under its whole name, nothing cut' '
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	deep=$(sed "s|^000D*|top|" deep.txt) &&
	test "$(cat "$DR/$deep")" = long &&
	test "$(cat "$DR/$($PY -c "print(\"f\" * 210)")")" = f210 &&
	(cd "$DR" && find . -type f | sort) >files &&
	printf "./%s\n" "$deep" "$($PY -c "print(\"f\" * 210)")" | sort >want &&
	test_cmp want files
'
serve_stop
test_expect_success 'stop: exit 0' '
	test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0
'
test_done
