# SPDX-License-Identifier: BSD-3-Clause
"""dstage: PyTorch helpers for datasets staged and shuffled by dstage.

The epoch shuffle happens in the node service: every epoch, each node reads
its own share of the training set, mostly from its own memory.  The share is
published by the preload shim (libdstage-preload.so) as virtual files:

    $DSTAGE_MOUNT/.dstage/epochs/<e>/all          this node's share of epoch e
    $DSTAGE_MOUNT/.dstage/epochs/<e>/<l>-of-<n>   local reader l of n's part

one path (relative to the mount) a line, in read order.  EpochSampler reads
them; DstageFiles maps the paths to samples.  Nothing here talks to the
service: the lists come from the shim, which must be preloaded
(eval "$(dstage env --to DIR)"); the dataset and the sampler ask the shim
(its ds_py_* functions, through ctypes) for the index's classes, runs and a
list's ids, so that a reader pays for its share, not for the dataset
(docs/shim.md, "The Python helper's entry points").
"""

from .sampler import DstageFiles, EpochSampler, epoch_list, mount_point

__all__ = ["DstageFiles", "EpochSampler", "epoch_list", "mount_point"]
