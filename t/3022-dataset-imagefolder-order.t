#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# DstageFiles is ImageFolder (issue 27): its classes, samples, targets and
# order are what torchvision's ImageFolder gives on the source tree, on
# tricky trees too (classes "a", "a b", "a.b"; a class with files and
# subdirectories named so that sorting directories as paths differs from a
# walk; UTF-8 names (pack refuses others); symlinks to a file and to a class; an
# empty class; a replicated subtree; extensions, a class whose files all
# have one being a run of the index too), whether a class comes
# from the shim's index (a run of its sample table) or is walked, and
# EpochSampler gives the shim's lists either way, from the list's ids.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_require PYTHON

test_expect_success 'a tricky tree, packed and staged on 2 nodes' '
	"$PY" - <<-\EOF &&
	import os
	def put(p, data=None):
	    p = os.fsencode(p) if isinstance(p, str) else p
	    os.makedirs(os.path.dirname(p), exist_ok=True)
	    with open(p, "wb") as f:
	        f.write(data if data is not None else p[::-1] * 3)
	for c in ("a", "a b", "a.b", "cat"):
	    for i in range(7):
	        put("src/train/%s/img%d.JPEG" % (c, 9 - i))
	put("src/train/a.b/x.jpg")
	# files and subdirectories: ImageFolder sorts directories as paths
	for d in ("", "m", "m/k", "m.n", "m-o", "m0"):
	    for f in ("f0.jpg", "z9.png", "K.JPG"):
	        put(os.path.join("src/train/nest", d, f))
	for f in ("ä.jpg", "z.jpg", "é1.jpg", "e.jpg", "\u4e2d.jpg"):
	    put("src/train/\u00e9t\u00e9/" + f)
	put("src/train/lnk/real.jpg")
	os.symlink("../a/img3.JPEG", "src/train/lnk/tofile.jpg")
	os.symlink("cat", "src/train/dlink")
	os.makedirs("src/train/empty")
	put("src/train/zz/only.txt")
	put("src/val/v1/one.jpg")
	put("src/val/v2/two.jpg")
	put("src/val/labels.txt")
	EOF
	pack_stage src 2
'
serve_start 2 --seed 5
test_expect_success 'served' 'serve_up 2'

cat >order.py <<'PYEOF'
import os, pickle, sys
sys.path.insert(0, os.environ["PYDIR"])
import dstage
from dstage import sampler as S
src, mount = sys.argv[1], os.environ["DSTAGE_MOUNT"]

def image_folder(root, exts=None):
    """torchvision's find_classes + make_dataset, without its refusal of
    empty classes (torchvision's own is compared below where installed)."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    out = []
    for i, c in enumerate(classes):
        for r, _, fs in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            for f in sorted(fs):
                if exts is None or f.lower().endswith(exts):
                    out.append((os.path.join(r, f), i))
    return classes, out

try:
    from torchvision.datasets.folder import make_dataset
    have_tv = True
except ImportError:
    have_tv = False

def rel(samples, base):
    return [(os.fsencode(os.path.relpath(p, base)), t) for p, t in samples]

def check(ds, sub, exts=None):
    classes, want = image_folder(os.path.join(src, sub), exts)
    assert ds.classes == classes, (ds.classes, classes)
    got = rel(ds.samples, mount)
    want = rel(want, src)
    assert got == want, "\n".join("%r %r" % x for x in zip(got, want) if x[0] != x[1])
    assert list(ds.targets) == [t for _, t in want]
    assert [os.fsencode(p) for p in ds.paths] == [p for p, _ in want]
    assert len(ds) == len(want)
    for i, p in enumerate(ds.paths):
        assert ds.index_of(p) == i, (p, ds.index_of(p), i)
    return want

fast = dstage.DstageFiles("train")
want = check(fast, "train")
# the classes that are one run of the index's sample table (no walk)
runs = sorted(c for i, c in enumerate(fast.classes) if fast._cls_id0[i] >= 0)
assert runs == ["a", "a b", "a.b", "cat", "empty", "zz", "\u00e9t\u00e9"], runs
if have_tv:
    cls = {c: i for i, c in enumerate(fast.classes) if c != "empty"}
    tv = make_dataset(os.path.join(src, "train"), cls, is_valid_file=lambda p: True)
    assert rel(tv, src) == want, "torchvision's make_dataset differs"
S._LIB[0] = None  # the walk (no shim entry points)
walk = dstage.DstageFiles("train")
S._LIB[0] = False
assert walk._lib is None and all(s < 0 for s in walk._cls_id0)
check(walk, "train")
# (names above ASCII are walked: str.lower() is Unicode's)
for exts, want_runs in (((".jpg",), ["empty"]),
                        ((".JPEG", ".png"), ["a", "a b", "cat", "empty"])):
    ds = dstage.DstageFiles("train", extensions=exts)
    check(ds, "train", tuple(e.lower() for e in exts))
    got_runs = sorted(c for i, c in enumerate(ds.classes) if ds._cls_id0[i] >= 0)
    assert got_runs == want_runs, (exts, got_runs)
check(dstage.DstageFiles("val"), "val")
# bytes, pickling (DataLoader workers under spawn)
for i in (0, len(fast) // 2, len(fast) - 1):
    with open(os.path.join(src, fast.paths[i]), "rb") as f:
        assert fast[i] == (f.read(), fast.targets[i])
again = pickle.loads(pickle.dumps(fast))
assert list(again.samples) == list(fast.samples) and again._lib is not None
# the sampler: the shim's lists, from ids (fast) or from the text (walk)
for e, l, n, start in ((0, 0, 1, 0), (1, 1, 3, 0), (2, 2, 3, 2)):
    want = dstage.epoch_list(e, l, n)[start:]
    for ds in (fast, walk):
        s = dstage.EpochSampler(ds, rank=l, num_replicas=n, epoch=e, start=start)
        assert (s._fast is not None) == (ds is fast)
        got = [ds.paths[i] for i in s]
        assert got == want, (e, l, n, got[:5], want[:5])
        assert len(s) == len(want)
print("ImageFolder's classes, samples and order: %d samples, %d classes from the index"
      % (len(fast), len(runs)))
PYEOF
test_expect_success 'DstageFiles == ImageFolder, from the index and walked; the sampler follows the lists' '
	shim_on 1 env PYDIR="$SRCDIR/io/python" "$PY" order.py src
'
serve_stop
test_expect_success 'stopped' 'test "$(cat serve.rc)" = 0'
test_done
