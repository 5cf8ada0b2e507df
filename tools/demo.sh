#!/bin/sh
# make demo: the main job end to end on a built-in sample dataset.
set -e
echo "dstage demo: the pack format is not built yet" >&2
exit 1
