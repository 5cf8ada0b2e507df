#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# jobs/epilog-dstage.sh: a Slurm Epilog snippet for admins: remove what
# dstage left of a job on this node, whatever way the job ended (scancel,
# time limit, node failure of a peer, a job script that did not clean).
#
# Install on every compute node, e.g. as /etc/slurm/epilog.d/dstage.sh with
#   Epilog=/etc/slurm/epilog.d/*        (slurm.conf, Slurm >= 21.08)
# or call it from the site's existing Epilog script.  slurmd runs it as root
# at the end of every job on every node of the job, with SLURM_JOB_ID and
# SLURM_JOB_UID set.
#
# It removes ROOT/dstage.<uid>.<jobid> (the job's node stores, made by
# `dstage stage --to ROOT`, and their spill tiers, `--spill ROOT`: the same
# name) for each ROOT in DSTAGE_EPILOG_DIRS, a list of
# directories and globs separated by blanks: the node-local places users
# may stage into (RAM: /dev/shm; SSD: the node's local disk, where $TMPDIR
# of jobs points).  The default below suits a node whose TMPDIR is /tmp,
# /var/tmp or /local/scratch/*; edit it to fit (a job's TMPDIR that Slurm
# itself removes, e.g. with job_container/tmpfs, needs no entry).
#
# Only a real directory (not a symlink) owned by the job's user is removed,
# without crossing into other file systems; anything else is left alone with
# a note in syslog.  It always exits 0: a failing Epilog drains the node.
DSTAGE_EPILOG_DIRS=${DSTAGE_EPILOG_DIRS:-/dev/shm /tmp /var/tmp /local/scratch/*}

job=${SLURM_JOB_ID:-}
uid=${SLURM_JOB_UID:-}
note() {
	logger -t epilog-dstage -- "$*" 2>/dev/null || printf 'epilog-dstage: %s\n' "$*" >&2
}
case $job in '' | *[!0-9]*) exit 0 ;; esac
case $uid in '' | *[!0-9]*) exit 0 ;; esac

set -f # the list's globs are expanded below, one at a time
for pattern in $DSTAGE_EPILOG_DIRS; do
	set +f
	# shellcheck disable=SC2086 # the glob is wanted
	for root in $pattern; do
		d=$root/dstage.$uid.$job
		[ -e "$d" ] || [ -L "$d" ] || continue
		if [ -L "$d" ] || [ ! -d "$d" ]; then
			note "job $job: '$d' is not a directory: left alone"
			continue
		fi
		owner=$(stat -c %u "$d" 2>/dev/null)
		if [ "$owner" != "$uid" ]; then
			note "job $job: '$d' belongs to uid $owner, not $uid: left alone"
			continue
		fi
		# (a `dstage serve` still running has been killed by slurmd by now)
		if rm -rf --one-file-system -- "$d" 2>/dev/null && [ ! -e "$d" ]; then
			note "job $job: removed '$d'"
		else
			note "job $job: could not remove '$d'"
		fi
	done
	set -f
done
exit 0
