#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Threads, fork, signal handlers through the shim; PyTorch DataLoader with
# forked workers (torchvision ImageFolder) gets the same tensors as a
# native run.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup' '
	make_tree "$TRASH/src" &&
	stage_tree "$TRASH/src" -N 1 -p 4 -z &&
	(cd src && find . -type f ! -name "m000" | sed "s,^\./,," | sort) >files
'

test_expect_success '16 threads, a shared descriptor, fork, signal handlers' '
	shim "$T/shim-mt" "$MOUNT" "$TRASH/src" $(grep -v " " files) >tap &&
	cat tap && ! grep -q "^not ok" tap && grep -q "^1\.\.6" tap
'

test_expect_success 'without the shim the same program fails' '
	! "$T/shim-mt" "$MOUNT" "$TRASH/src" $(grep -v " " files) >tap2
'

test_expect_success TORCH,TORCHVISION,PIL,NUMPY 'torchvision ImageFolder + DataLoader(num_workers=4): tensors equal a native run' '
	"$PY" -c "
import sys, numpy as np
from PIL import Image
rng = np.random.default_rng(7)
for c in range(3):
    import os; os.makedirs(\"%s/cls%d\" % (sys.argv[1], c), exist_ok=True)
    for i in range(12):
        a = rng.integers(0, 255, (24, 20, 3), dtype=np.uint8)
        Image.fromarray(a).save(\"%s/cls%d/im%02d.%s\" % (sys.argv[1], c, i, \"png\" if i % 2 else \"jpg\"))
" "$TRASH/imgs" &&
	touch -d @0 "$TRASH/imgs" &&
	stage_tree "$TRASH/imgs" -N 1 -p 3 &&
	cat >dl.py <<-\EOF &&
	import sys, torch, torchvision
	from torchvision import transforms
	torch.manual_seed(0)
	ds = torchvision.datasets.ImageFolder(sys.argv[1], transform=transforms.ToTensor())
	dl = torch.utils.data.DataLoader(ds, batch_size=5, num_workers=4, shuffle=True,
	                                 multiprocessing_context="fork")
	out = []
	for x, y in dl:
	    out.append("%s %s %.6f" % (tuple(x.shape), y.tolist(), float(x.double().sum())))
	print(ds.classes, len(ds))
	print("\n".join(out))
	EOF
	"$PY" dl.py "$TRASH/imgs" >n 2>err-n &&
	shim "$PY" dl.py "$MOUNT" >s 2>err-s &&
	test_cmp n s && test $(wc -l <s) = 9
'

test_done
