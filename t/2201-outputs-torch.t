#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Real checkpoint writers through the shim (2 simulated nodes): torch.save of
# a model's state on node 0, torch.load on node 1 (bytes fetched on demand)
# and from the drain directory after `dstage drain --wait`; h5py writing an
# HDF5 file (HDF5 locks it with flock, writes with pwrite, truncates) read
# back on the other node and after the drain.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_require TORCH,H5PY

test_expect_success 'two nodes staged' '
	make_samples src 2 &&
	pack_stage src 2
'
DR="$TRASH/drain"
serve_start 2 --outputs ckpt --drain-to "$DR" --drain-rate 0
test_expect_success 'served with outputs' 'serve_up 2'

cat >save.py <<'EOF2'
import sys, torch, os
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
tmp = sys.argv[1] + ".tmp"
torch.save({"epoch": 3, "model": m.state_dict()}, tmp)
os.replace(tmp, sys.argv[1])
torch.save(m.state_dict(), "ref.pt")
EOF2
cat >load.py <<'EOF2'
import sys, torch
a = torch.load(sys.argv[1])
b = torch.load("ref.pt")
assert a["epoch"] == 3
for k in b:
    assert torch.equal(a["model"][k], b[k]), k
print("same", len(b))
EOF2

test_expect_success 'torch.save on node 0 (write temp, os.replace)' '
	shim_on 0 $PY save.py "$MOUNT/ckpt/run1/epoch3.pt" &&
	shim_on 0 ls "$MOUNT/ckpt/run1" >ls && echo epoch3.pt >want && test_cmp want ls
'
test_expect_success 'torch.load on node 1: the bytes come from node 0' '
	shim_on 1 $PY load.py "$MOUNT/ckpt/run1/epoch3.pt" >out && cat out && grep -q "same 4" out &&
	test "$(shim_on 0 stat -c %s "$MOUNT/ckpt/run1/epoch3.pt")" = \
	     "$(shim_on 1 stat -c %s "$MOUNT/ckpt/run1/epoch3.pt")"
'
test_expect_success 'h5py writes an HDF5 file on node 1; node 0 reads it' '
	cat >h5w.py <<-\EOF2 &&
	import sys, h5py, numpy as np
	with h5py.File(sys.argv[1], "w") as f:
	    f["x"] = np.arange(100000, dtype="f8")
	    f.create_group("g").attrs["note"] = "samples"
	EOF2
	cat >h5r.py <<-\EOF2 &&
	import sys, h5py, numpy as np
	with h5py.File(sys.argv[1], "r") as f:
	    assert (f["x"][:] == np.arange(100000)).all()
	    print(f["g"].attrs["note"])
	EOF2
	shim_on 1 $PY h5w.py "$MOUNT/ckpt/samples.h5" &&
	test "$(shim_on 0 $PY h5r.py "$MOUNT/ckpt/samples.h5")" = samples
'
test_expect_success 'dstage drain --wait; torch.load and h5py from the drain directory' '
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	$PY load.py "$DR/run1/epoch3.pt" | grep -q "same 4" &&
	test "$($PY h5r.py "$DR/samples.h5")" = samples &&
	! test -e "$DR/run1/epoch3.pt.tmp"
'
serve_stop
test_expect_success 'stop: exit 0' 'test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0'
test_done
