# SPDX-License-Identifier: BSD-3-Clause
# t/lib-s3.sh: a real S3 server for the s3:// tests, sourced after test-lib.sh.
#
#   s3_start              start s3rver (npm, pinned in the Makefile) on
#                         127.0.0.1 on a free port, with the buckets of
#                         $S3_BUCKETS (default "data"); skip the whole script
#                         when s3rver is missing (the S3RVER prerequisite),
#                         fail it when s3rver does not start
#   s3_stop               stop it (the end of the script does it too)
# After s3_start: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
# and AWS_REGION point dstage at it; S3_PORT, S3_DIR; $S3TOOL is the helper.
#
# s3rver checks SigV4 signatures against its one account (S3RVER/S3RVER), so
# wrong credentials are refused as on a real store.

S3RVER="$SRCDIR/build/npm/node_modules/.bin/s3rver"
S3TOOL="$T/s3-tool"
S3_PID=

s3_free_port() {
	"$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

s3_stop() {
	if [ -n "$S3_PID" ]; then
		kill "$S3_PID" 2>/dev/null
		wait "$S3_PID" 2>/dev/null
		S3_PID=
	fi
}

s3_start() {
	[ -x "$S3RVER" ] || make -C "$SRCDIR" --no-print-directory npm-s3 >/dev/null 2>&1
	test_require S3RVER
	[ -x "$S3TOOL" ] || skip_all "$S3TOOL not built"
	S3_DIR="$TRASH/s3rver"
	mkdir -p "$S3_DIR"
	set --
	for b in ${S3_BUCKETS:-data}; do
		set -- "$@" --configure-bucket "$b"
	done
	export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
	export AWS_SHARED_CREDENTIALS_FILE=/nonexistent AWS_CONFIG_FILE=/nonexistent
	# a proxy of the environment must not stand between us and loopback
	export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
	unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_REGION AWS_ENDPOINT_URL_S3
	# a free port can be taken before s3rver binds it (scripts run in
	# parallel): three tries on fresh ports, then the script fails.  An
	# s3rver that cannot bind exits (seen at once); 60 s is the bound of
	# one that hangs, not of node.js starting on 2 loaded cores
	for _s3_try in 1 2 3; do
		S3_PORT=$(s3_free_port) || continue
		# its continuation tokens use a cipher OpenSSL 3 keeps in the legacy provider
		NODE_OPTIONS=--openssl-legacy-provider "$S3RVER" -d "$S3_DIR" -a 127.0.0.1 -p "$S3_PORT" -s \
			--no-vhost-buckets "$@" >"$TRASH/s3rver.log" 2>&1 &
		S3_PID=$!
		test_bg "$S3_PID"
		export AWS_ENDPOINT_URL="http://127.0.0.1:$S3_PORT"
		i=0
		while ! "$S3TOOL" ls "s3://${S3_BUCKETS%% *}" >/dev/null 2>&1; do
			i=$((i + 1))
			if [ $i -gt 600 ] || ! proc_running "$S3_PID"; then
				echo "# s3rver did not start on 127.0.0.1:$S3_PORT ($(tail -n 3 "$TRASH/s3rver.log" | tr '\n' ' '))"
				s3_stop
				break
			fi
			sleep 0.1
		done
		[ -n "$S3_PID" ] && return 0
	done
	echo "# s3rver did not start in 3 tries"
	exit 1
}

# s3_proxy MODE EVERY [MAX]: the fault-injecting proxy (t/helpers/
# s3-fault-proxy.py) in front of the server; sets S3_PROXY_URL (use it as
# AWS_ENDPOINT_URL for one command) and logs faults to $TRASH/proxy.log.
S3_PROXY_PID=
s3_proxy() {
	s3_proxy_stop
	rm -f "$TRASH/proxy.port"
	"$PY" "$SRCDIR/t/helpers/s3-fault-proxy.py" "$S3_PORT" "$TRASH/proxy.port" "$@" \
		2>"$TRASH/proxy.log" &
	S3_PROXY_PID=$!
	test_bg "$S3_PROXY_PID"
	# its port file is written once it listens; a proxy that exits is
	# seen at once, 60 s is the bound of one that hangs (was 5 s: Python
	# starting on 2 loaded cores could reach it)
	i=0
	while [ ! -s "$TRASH/proxy.port" ]; do
		i=$((i + 1))
		if [ $i -gt 1200 ] || ! proc_running "$S3_PROXY_PID"; then
			echo "fault proxy did not start: $(cat "$TRASH/proxy.log")"
			return 1
		fi
		sleep 0.05
	done
	S3_PROXY_URL="http://127.0.0.1:$(cat "$TRASH/proxy.port")"
}

s3_proxy_stop() {
	if [ -n "$S3_PROXY_PID" ]; then
		kill "$S3_PROXY_PID" 2>/dev/null
		wait "$S3_PROXY_PID" 2>/dev/null
		S3_PROXY_PID=
	fi
}

# faults injected so far
s3_faults() { grep -c '^fault' "$TRASH/proxy.log" 2>/dev/null || echo 0; }

S3_BUCKETS=${S3_BUCKETS:-data}
test_atexit 's3_proxy_stop; s3_stop'
