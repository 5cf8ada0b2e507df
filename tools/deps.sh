#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Install the Debian packages named on the command line that are missing.
# As root: apt-get update + install.  Otherwise: print the exact command.
missing=
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" != 0 ]; then
	echo "dstage: deps: missing Debian packages; as root run:" >&2
	echo "  apt-get update && $cmd" >&2
	exit 1
fi
echo "dstage: deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null && $cmd -q >/dev/null || {
	echo "dstage: deps: apt-get failed for:$missing" >&2
	exit 1
}
