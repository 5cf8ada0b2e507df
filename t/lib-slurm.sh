# SPDX-License-Identifier: BSD-3-Clause
# t/lib-slurm.sh: a private, real 4-node Slurm cluster on 127.0.0.1 for tests.
#
#   . ./test-lib.sh
#   . "$SRCDIR/t/lib-slurm.sh"
#   slurm_start || skip_all "$slurm_skip_reason"
#   test_expect_success 'four nodes' 'srun -N4 hostname'
#   test_done                      (slurm_stop runs on exit, also on failure)
#
# slurm_start [STATE_DIR] installs slurm-wlm and munge when missing (as root,
# with apt-get), then starts, all under STATE_DIR (default
# /tmp/dstage-slurm.$$; not under $DSTAGE_TEST_TMP, as unix socket paths in it
# must stay short):
#   - its own munged (own key, socket, pid, log and seed files),
#   - one slurmctld and four `slurmd -N nN` (n1..n4), each on a free port of
#     127.0.0.1, from a private slurm.conf (t/helpers/slurm/slurm.conf.in),
# waits until sinfo shows n[1-4] idle, and exports SLURM_CONF so that srun,
# sbatch, sinfo, squeue and scancel talk to this cluster and no other.  It
# returns non-zero with the reason in $slurm_skip_reason when the cluster
# cannot start.  The system's own munged, slurmctld and slurmd (if any) are
# never used or touched.
#
# slurm_stop cancels the cluster's jobs, kills only the daemons named by its
# own pid files (checking that each pid really runs with this cluster's
# config), then any slurmstepd, task or srun/sbatch client left that runs with
# this cluster's SLURM_CONF, and removes STATE_DIR.
# slurm_start registers it to run at exit: with t/test-lib.sh's test_atexit
# (whose EXIT trap runs after INT/TERM/HUP too), else with its own traps on
# EXIT and INT/TERM/HUP/PIPE (a shell runs a trap once its foreground
# command, e.g. srun, has returned).
#
# Settings read by slurm_start:
#   DSTAGE_SLURM_NODES   number of nodes (default 4)
#   DSTAGE_SLURM_CPUS    CPUs per node (default: the machine's, from nproc)
#   DSTAGE_SLURM_TIMEOUT seconds to wait for the nodes to be idle (default 60)
#   DSTAGE_SLURM_DEBUG   slurmctld/slurmd log level (default info)
#   DSTAGE_SLURM_MPI     the cluster's MpiDefault, the PMI srun offers MPI
#                        steps (default: pmi2 for MPICH, pmix for Open MPI,
#                        DSTAGE_MPILIB; Debian's Open MPI 4.1 speaks PMIx
#                        only); the cluster does not start when
#                        `srun --mpi=list` lacks it
#   slurm_extra_conf     extra slurm.conf lines (e.g. "Epilog=/path/epilog.sh")
#   slurm_cgroup_conf    extra cgroup.conf lines (e.g. "ConstrainRAMSpace=yes")
#   slurm_ctld_addr      address slurmctld is reached at (default 127.0.0.1)
#   slurm_node_addrs     the nodes' NodeAddr, one per node (default 127.0.0.1 each)
#   slurm_node_hostnames "yes": NodeHostname=nN (each node on its own host)
#   slurm_spool_dir      SlurmdSpoolDir (default STATE_DIR/spool/%n)
#   slurm_node_wrap      a command run as `$slurm_node_wrap I slurmd ...` to
#                        start node I's slurmd (t/lib-hosts.sh: inside host I)
#   DSTAGE_TEST_KEEP     keep STATE_DIR (logs) after slurm_stop
# Set after slurm_start: SLURM_CONF (exported), slurm_dir, slurm_nodes
# ("n[1-4]"), slurm_hostname, slurm_ctld_port, slurm_node_ports, slurm_mpi.
#
# Helpers: slurm_log_tail [N] prints the last N lines of every daemon log;
# slurm_wait_idle waits until no job is left in the queue; submit and
# job_of run a batch job and find it (below).
#
# Written for /bin/sh (dash) as well as bash.

slurm_skip_reason=
slurm_dir=
slurm_mpi=
slurm_started=
_slurm_atexit=
slurm_lib_dir="${SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}/t/helpers/slurm"

_slurm_say() { printf '# slurm: %s\n' "$*" >&2; }

# --- packages --------------------------------------------------------------

_slurm_have_tools() {
	for _c in slurmctld slurmd slurmstepd munged sinfo srun sbatch squeue scancel scontrol; do
		command -v "$_c" >/dev/null 2>&1 || [ -x "/usr/sbin/$_c" ] || return 1
	done
	return 0
}

slurm_install() {
	case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin:/sbin"; export PATH ;; esac
	_slurm_have_tools && return 0
	if [ "$(id -u)" != 0 ]; then
		slurm_skip_reason="slurm-wlm/munge not installed and not root (apt-get install slurm-wlm munge)"
		return 1
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		slurm_skip_reason="slurm-wlm/munge not installed and no apt-get"
		return 1
	fi
	_slurm_say "installing slurm-wlm munge with apt-get"
	# (an update that fails, e.g. on a busy lists lock, may still leave lists
	# good enough; wait for a dpkg lock held by a parallel install)
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 \
		slurm-wlm munge >/dev/null 2>&1; then
		slurm_skip_reason="apt-get install slurm-wlm munge failed"
		return 1
	fi
	_slurm_have_tools || { slurm_skip_reason="slurm-wlm installed but daemons missing"; return 1; }
}

# --- ports -----------------------------------------------------------------

# Local TCP ports in use (any state), from /proc/net/tcp and tcp6.
_slurm_used_ports() {
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		awk '$2 ~ /:/ { n = split($2, a, ":"); print a[n] }' | sort -u |
		while read -r _h; do printf '%d\n' "0x$_h"; done
}

# Print N distinct free ports from 20000..31999 (below the ephemeral range,
# so that clients' outgoing connections do not take them while we start).
_slurm_free_ports() {
	_n=$1
	_used=$(_slurm_used_ports | sort -un | tr '\n' ' ')
	_got=
	_k=0
	_tries=0
	while [ "$_k" -lt "$_n" ] && [ "$_tries" -lt 1000 ]; do
		_tries=$((_tries + 1))
		_r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
		_p=$((20000 + _r % 12000))
		case " $_used $_got " in *" $_p "*) continue ;; esac
		# a port whose neighbour is taken is fine; only the port itself matters
		_got="$_got $_p"
		_k=$((_k + 1))
	done
	[ "$_k" = "$_n" ] || return 1
	# Where python is there, confirm each port binds on all addresses.
	if [ -x /usr/bin/python3 ]; then
		# shellcheck disable=SC2086
		/usr/bin/python3 - $_got <<-'EOF' || return 1
		import socket, sys
		for p in sys.argv[1:]:
		    s = socket.socket()
		    try:
		        s.bind(("0.0.0.0", int(p)))
		    except OSError:
		        sys.exit(1)
		    finally:
		        s.close()
		EOF
	fi
	# shellcheck disable=SC2086
	echo $_got
}

# --- process bookkeeping ----------------------------------------------------

# _slurm_pid_ok PID PATTERN: PID runs and its command line contains PATTERN
_slurm_pid_ok() {
	[ -n "$1" ] && [ -r "/proc/$1/cmdline" ] &&
		tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$2"
}

# _slurm_kill_pidfile FILE PATTERN: TERM, then KILL, the daemon named by FILE
_slurm_kill_pidfile() {
	[ -f "$1" ] || return 0
	_pid=$(cat "$1" 2>/dev/null)
	if _slurm_pid_ok "$_pid" "$2"; then
		kill -TERM "$_pid" 2>/dev/null
		_i=0
		while _slurm_pid_ok "$_pid" "$2" && [ $_i -lt 50 ]; do
			sleep 0.2
			_i=$((_i + 1))
		done
		_slurm_pid_ok "$_pid" "$2" && kill -KILL "$_pid" 2>/dev/null
	fi
	rm -f "$1"
}

# Kill what is left of this cluster's jobs and clients: slurmstepds, tasks
# and batch scripts (SLURM_JOB_ID set), and srun/sbatch/... clients (which
# would wait forever for a dead controller), all whose initial environment
# holds SLURM_CONF=<this cluster's slurm.conf>.  Never this shell, the
# subshell doing the scan, or any other process of the caller.
_slurm_env_kill() {
	_conf="$1/slurm.conf"
	_me=$(exec sh -c 'echo $PPID')
	for _e in /proc/[0-9]*/environ; do
		_p=${_e#/proc/}
		_p=${_p%/environ}
		[ "$_p" = "$$" ] || [ "$_p" = "$_me" ] && continue
		_env=$({ tr '\0' '\n' <"$_e"; } 2>/dev/null) || continue
		case "
$_env
" in
		*"
SLURM_CONF=$_conf
"*) ;;
		*) continue ;;
		esac
		case "
$_env" in
		*"
SLURM_JOB_ID="*) ;;
		*)
			case $(cat "/proc/$_p/comm" 2>/dev/null) in
			slurmstepd | srun | sbatch | salloc | sattach | squeue | scontrol | scancel | sinfo) ;;
			*) continue ;;
			esac
			;;
		esac
		kill -KILL "$_p" 2>/dev/null
	done
}

# Stop the cluster whose state directory is $1.
_slurm_stop_dir() {
	_d=$1
	[ -n "$_d" ] && [ -d "$_d" ] || return 0
	if [ -f "$_d/slurm.conf" ] && [ -f "$_d/run/slurmctld.pid" ] &&
		_slurm_pid_ok "$(cat "$_d/run/slurmctld.pid" 2>/dev/null)" "$_d/slurm.conf"; then
		# let jobs end the Slurm way (epilogs run), briefly
		_jobs=$(SLURM_CONF="$_d/slurm.conf" timeout 5 squeue -h -o %i 2>/dev/null)
		# shellcheck disable=SC2086
		[ -n "$_jobs" ] && SLURM_CONF="$_d/slurm.conf" timeout 10 scancel $_jobs >/dev/null 2>&1
		_i=0
		while [ $_i -lt 30 ] && [ -n "$(SLURM_CONF="$_d/slurm.conf" timeout 5 squeue -h -o %i 2>/dev/null)" ]; do
			sleep 0.3
			_i=$((_i + 1))
		done
	fi
	for _f in "$_d"/run/slurmd.*.pid; do
		_slurm_kill_pidfile "$_f" "$_d/slurm.conf"
	done
	_slurm_kill_pidfile "$_d/run/slurmctld.pid" "$_d/slurm.conf"
	# slurmstepds and tasks of our jobs left behind (scanned with SLURM_CONF
	# unset, so that the scan's own tr and cat do not match)
	(
		unset SLURM_CONF
		_slurm_env_kill "$_d"
	)
	_slurm_kill_pidfile "$_d/run/munged.pid" "$_d/munge"
}

# Clusters of this harness left by a test that died without slurm_stop
# (kill -9, a crash): their owner pid is gone.  Stop them; never touch one
# whose owner still runs (another test running in parallel).
_slurm_reap_stale() {
	for _o in /tmp/dstage-slurm.*/owner /run/dstage-slurm.*/owner; do
		[ -f "$_o" ] || continue
		_sd=${_o%/owner}
		[ "$_sd" = "$slurm_dir" ] && continue
		_op=$(cat "$_o" 2>/dev/null)
		if [ -n "$_op" ] && kill -0 "$_op" 2>/dev/null; then
			continue
		fi
		_slurm_say "stopping a stale cluster in $_sd (owner $_op gone)"
		_slurm_stop_dir "$_sd"
		rm -rf "$_sd"
	done
}

# --- logs ------------------------------------------------------------------

slurm_log_tail() {
	[ -n "$slurm_dir" ] || return 0
	for _l in "$slurm_dir"/log/*.log; do
		[ -f "$_l" ] || continue
		echo "--- $_l"
		tail -n "${1:-20}" "$_l"
	done
}

# --- start / stop ----------------------------------------------------------

_slurm_fail() {
	slurm_skip_reason="$*"
	_slurm_say "$slurm_skip_reason"
	slurm_log_tail 15 | sed 's/^/# /' >&2
	slurm_stop
	return 1
}

# _slurm_nodes_idle: number of our nodes sinfo reports idle
_slurm_nodes_idle() {
	timeout 10 sinfo -h -N -p debug -o '%N %t' 2>/dev/null | awk '$2 == "idle" { n++ } END { print n + 0 }'
}

# _slurm_write_conf CTLD_PORT NODE_PORTS...
_slurm_write_conf() {
	_cport=$1
	shift
	_nodelines=
	_i=1
	for _np in "$@"; do
		# shellcheck disable=SC2086
		_addr=$(echo ${slurm_node_addrs:-} | cut -d' ' -f"$_i")
		_host=$slurm_hostname
		[ "${slurm_node_hostnames:-}" = yes ] && _host=n$_i
		_nodelines="${_nodelines}NodeName=n$_i NodeAddr=${_addr:-127.0.0.1} NodeHostname=$_host Port=$_np CPUs=$_slurm_cpus RealMemory=$_slurm_mem State=UNKNOWN
"
		_i=$((_i + 1))
	done
	sed -e "s|@DIR@|$slurm_dir|g" \
		-e "s|@CTLD_PORT@|$_cport|g" \
		-e "s|@CTLD_ADDR@|${slurm_ctld_addr:-127.0.0.1}|g" \
		-e "s|^SlurmdSpoolDir=.*|SlurmdSpoolDir=${slurm_spool_dir:-$slurm_dir/spool/%n}|" \
		-e "s|@DEBUG@|${DSTAGE_SLURM_DEBUG:-info}|g" \
		-e "s|@NODES@|$slurm_nodes|g" \
		-e "s|^MpiDefault=.*|MpiDefault=$slurm_mpi|" \
		"$slurm_lib_dir/slurm.conf.in" >"$slurm_dir/slurm.conf" || return 1
	printf '%s' "$_nodelines" >>"$slurm_dir/slurm.conf"
	echo "PartitionName=debug Nodes=$slurm_nodes Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES" \
		>>"$slurm_dir/slurm.conf"
	# mpi/pmix makes its clients' directory (spmix_appdir_UID_JOB.STEP) under
	# TmpFS: one per node, or the second node's step fails on EEXIST
	case $slurm_mpi in pmix*)
		echo "TmpFS=$slurm_dir/tmp/%n" >>"$slurm_dir/slurm.conf"
		for _i in $(seq 1 "$_slurm_n"); do mkdir -p "$slurm_dir/tmp/n$_i" || return 1; done
	esac
	if [ -n "$slurm_extra_conf" ]; then
		printf '%s\n' "# slurm_extra_conf" "$slurm_extra_conf" >>"$slurm_dir/slurm.conf"
	fi
	# An empty plugstack so that /etc/slurm/plugstack.conf(.d) is not read.
	: >"$slurm_dir/plugstack.conf"
	# cgroup.conf next to slurm.conf: nothing here uses cgroups, unless a
	# test asks (slurm_cgroup_conf: task/cgroup's ConstrainRAMSpace, t/4006)
	cp "$slurm_lib_dir/cgroup.conf" "$slurm_dir/cgroup.conf"
	if [ -n "${slurm_cgroup_conf:-}" ]; then
		printf '%s\n' "# slurm_cgroup_conf" "$slurm_cgroup_conf" >>"$slurm_dir/cgroup.conf"
	fi
}

_slurm_start_munged() {
	_m="$slurm_dir/munge"
	# 0755: any user's job must reach the socket; the key itself is 0400
	mkdir -p "$_m" && chmod 0755 "$_m" || return 1
	dd if=/dev/urandom of="$_m/munge.key" bs=1024 count=1 2>/dev/null &&
		chmod 0400 "$_m/munge.key" || return 1
	munged --force --socket="$_m/munge.socket" --key-file="$_m/munge.key" \
		--pid-file="$slurm_dir/run/munged.pid" --log-file="$slurm_dir/log/munged.log" \
		--seed-file="$_m/munged.seed" --num-threads=4 >>"$slurm_dir/log/munged.log" 2>&1 ||
		return 1
	_i=0
	while [ ! -S "$_m/munge.socket" ] && [ $_i -lt 50 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	[ -S "$_m/munge.socket" ] &&
		munge --socket="$_m/munge.socket" -n 2>/dev/null | unmunge --socket="$_m/munge.socket" >/dev/null 2>&1
}

# One attempt at starting slurmctld and the slurmds on fresh ports; the
# reason for a failure in $_slurm_why.
_slurm_start_daemons() {
	_ports=$(_slurm_free_ports $((_slurm_n + 1))) || { _slurm_why="no free ports"; return 1; }
	# shellcheck disable=SC2086
	set -- $_ports
	slurm_ctld_port=$1
	shift
	# shellcheck disable=SC2034
	slurm_node_ports="$*"
	_slurm_write_conf "$slurm_ctld_port" "$@" || { _slurm_why="cannot write slurm.conf"; return 1; }
	rm -rf "$slurm_dir/ctld" "$slurm_dir/spool" && mkdir -p "$slurm_dir/ctld" "$slurm_dir/spool"
	for _i in $(seq 1 "$_slurm_n"); do mkdir -p "$slurm_dir/spool/n$_i"; done

	slurmctld -f "$slurm_dir/slurm.conf" -i >>"$slurm_dir/log/slurmctld.out" 2>&1 ||
		{ _slurm_why="slurmctld did not start"; return 1; }
	_deadline=$(($(date +%s) + 15))
	until timeout 3 scontrol ping 2>/dev/null | grep -q 'UP'; do
		if ! _slurm_pid_ok "$(cat "$slurm_dir/run/slurmctld.pid" 2>/dev/null)" "$slurm_dir/slurm.conf"; then
			sleep 0.3	# the pid file may not be written yet
			_slurm_pid_ok "$(cat "$slurm_dir/run/slurmctld.pid" 2>/dev/null)" "$slurm_dir/slurm.conf" ||
				{ _slurm_why="slurmctld exited: $(tail -n 1 "$slurm_dir/log/slurmctld.log" 2>/dev/null)"; return 1; }
		fi
		[ "$(date +%s)" -lt "$_deadline" ] || { _slurm_why="slurmctld does not answer"; return 1; }
		sleep 0.2
	done
	for _i in $(seq 1 "$_slurm_n"); do
		# shellcheck disable=SC2086
		${slurm_node_wrap:+$slurm_node_wrap $_i} slurmd -f "$slurm_dir/slurm.conf" -N "n$_i" \
			>>"$slurm_dir/log/slurmd.out" 2>&1 ||
			{ _slurm_why="slurmd -N n$_i did not start"; return 1; }
	done
	_i=0
	_deadline=$(($(date +%s) + ${DSTAGE_SLURM_TIMEOUT:-60}))
	_grace=$(($(date +%s) + 3))
	while [ "$(_slurm_nodes_idle)" != "$_slurm_n" ]; do
		if [ "$(date +%s)" -ge "$_deadline" ]; then
			_slurm_why="nodes not idle after ${DSTAGE_SLURM_TIMEOUT:-60}s: $(timeout 5 sinfo -h -N -o '%N=%t' 2>&1 | tr '\n' ' ')"
			return 1
		fi
		# a slurmd that exited (its port taken, a bad config) never comes up
		if [ "$(date +%s)" -ge "$_grace" ]; then
			for _i in $(seq 1 "$_slurm_n"); do
				_slurm_pid_ok "$(cat "$slurm_dir/run/slurmd.n$_i.pid" 2>/dev/null)" "$slurm_dir/slurm.conf" ||
					{ _slurm_why="slurmd -N n$_i exited: $(tail -n 1 "$slurm_dir/log/slurmd.n$_i.log" 2>/dev/null)"; return 1; }
			done
		fi
		# a node that registered as down/drained (e.g. after a restart) is resumed
		_bad=$(timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 ~ /^(down|drain|drng|fail)/ { print $1 }' |
			tr '\n' ',' | sed 's/,$//')
		[ -n "$_bad" ] && timeout 5 scontrol update NodeName="$_bad" State=RESUME >/dev/null 2>&1
		sleep 0.5
	done
	return 0
}

slurm_start() {
	slurm_skip_reason=
	if [ -n "$slurm_started" ]; then
		return 0
	fi
	slurm_install || return 1
	if [ "$(id -u)" != 0 ]; then
		slurm_skip_reason="a private Slurm cluster needs root (slurmd runs jobs as their user)"
		return 1
	fi
	_slurm_n=${DSTAGE_SLURM_NODES:-4}
	_slurm_cpus=${DSTAGE_SLURM_CPUS:-$(nproc 2>/dev/null || echo 1)}
	_slurm_mem=1024
	slurm_nodes="n[1-$_slurm_n]"
	[ "$_slurm_n" = 1 ] && slurm_nodes=n1
	slurm_hostname=$(hostname -s 2>/dev/null || hostname)
	case ${DSTAGE_MPILIB:-mpich} in
	openmpi) slurm_mpi=${DSTAGE_SLURM_MPI:-pmix} ;;
	*) slurm_mpi=${DSTAGE_SLURM_MPI:-pmi2} ;;
	esac
	slurm_dir=${1:-/tmp/dstage-slurm.$$}
	case $slurm_dir in /*) ;; *) slurm_dir="$(pwd)/$slurm_dir" ;; esac
	# unix socket paths (munge, slurmd spool) must stay short
	if [ ${#slurm_dir} -gt 60 ]; then
		slurm_skip_reason="slurm state dir path too long for unix sockets: $slurm_dir"
		return 1
	fi

	_slurm_reap_stale
	# a leftover of a crashed run that had our pid: stop it, start afresh
	_slurm_stop_dir "$slurm_dir"
	rm -rf "$slurm_dir"
	mkdir -p "$slurm_dir/run" "$slurm_dir/log" || {
		slurm_skip_reason="cannot make $slurm_dir"
		return 1
	}
	chmod 0755 "$slurm_dir"
	echo $$ >"$slurm_dir/owner"
	slurm_started=1
	if command -v test_atexit >/dev/null 2>&1; then
		# t/test-lib.sh: its EXIT trap runs slurm_stop, also after INT/TERM
		[ -n "$_slurm_atexit" ] || test_atexit slurm_stop
		_slurm_atexit=1
	else
		trap '_slurm_on_exit' EXIT
		trap '_slurm_on_signal' INT TERM HUP PIPE
	fi

	SLURM_CONF="$slurm_dir/slurm.conf"
	export SLURM_CONF
	# Open MPI under srun takes the bed's "nodes" for separate hosts and
	# talks TCP over every interface it finds at MPI_Init, also the bridges
	# other scripts' beds (t/lib-hosts.sh) make and delete meanwhile: a
	# rank then fails its connect (btl_tcp "bind on local address
	# (10.x.y.254:0) failed: Cannot assign requested address", t/2206 under
	# a parallel run).  Every node of this bed is on loopback unless
	# slurm_node_addrs says otherwise: its MPI stays there.
	if [ -z "${slurm_node_addrs:-}" ] && [ -z "${OMPI_MCA_btl_tcp_if_include:-}" ] &&
		[ -z "${OMPI_MCA_btl_tcp_if_exclude:-}" ]; then
		OMPI_MCA_btl_tcp_if_include=lo
		export OMPI_MCA_btl_tcp_if_include
	fi
	# nothing of a surrounding allocation may leak into ours
	unset SLURM_JOB_ID SLURM_JOBID SLURM_NODEID SLURM_PROCID SLURM_STEP_ID SLURM_NODELIST \
		SLURM_JOB_NODELIST SLURM_NNODES SLURM_NTASKS SLURM_CLUSTER_NAME

	_slurm_start_munged || { _slurm_fail "private munged did not start"; return 1; }

	_try=1
	while :; do
		_slurm_start_daemons && break
		if [ $_try -ge 2 ]; then
			_slurm_fail "cluster did not start: $_slurm_why"
			return 1
		fi
		_slurm_say "start failed ($_slurm_why), retrying on other ports"
		for _f in "$slurm_dir"/run/slurmd.*.pid; do
			_slurm_kill_pidfile "$_f" "$slurm_dir/slurm.conf"
		done
		_slurm_kill_pidfile "$slurm_dir/run/slurmctld.pid" "$slurm_dir/slurm.conf"
		_try=$((_try + 1))
	done
	# srun's plugin for MpiDefault (pmix needs libpmix2, which Open MPI pulls in)
	if ! srun --mpi=list 2>&1 | grep -qw "$slurm_mpi"; then
		_slurm_fail "srun --mpi=list has no $slurm_mpi (DSTAGE_SLURM_MPI)"
		return 1
	fi
	return 0
}

slurm_stop() {
	[ -n "$slurm_dir" ] || return 0
	_slurm_stop_dir "$slurm_dir"
	# a failed test keeps its $TRASH: keep the daemon logs there too
	if [ "${test_failed:-0}" != 0 ] && [ -n "$TRASH" ] && [ -d "$TRASH" ]; then
		mkdir -p "$TRASH/slurm" && cp -r "$slurm_dir/log" "$slurm_dir/slurm.conf" "$TRASH/slurm/" 2>/dev/null
	fi
	if [ -z "$DSTAGE_TEST_KEEP" ]; then
		rm -rf "$slurm_dir"
	else
		rm -f "$slurm_dir/owner"
	fi
	slurm_dir=
	slurm_started=
	unset SLURM_CONF
}

# Wait (at most $1 s, default 30) until no job is left in the queue.
# A squeue that fails (slurmctld busy, the 5 s timeout) is asked again: its
# empty output is no answer, never "idle".  What is left at the end is shown.
slurm_wait_idle() {
	_i=0
	while :; do
		_q=$(timeout 5 squeue -h -o "%i %T %R" 2>&1) && [ -z "$_q" ] && return 0
		_i=$((_i + 1))
		if [ $_i -ge $((${1:-30} * 2)) ]; then
			echo "slurm_wait_idle: after ${1:-30} s: ${_q:-no answer from squeue}"
			return 1
		fi
		sleep 0.5
	done
}

# sbatch_wait SECS SBATCH-ARGS...: `timeout SECS sbatch --wait ARGS`, without
# --wait's polls every 2 s (on average a second lost per job, ~50 jobs in
# the suite): sbatch, then scontrol every 0.2 s until the job has finished
# and its epilogs have run (COMPLETING ends too).  Prints what sbatch
# prints; returns what sbatch --wait returns: the batch script's exit code,
# 1 when a signal ended it (scancel, a time limit: ExitCode=0:SIG), 1 when
# its record is gone before it was seen finished (MinJobAge=5: a poll
# stalled longer than that), 124 after SECS (the job left running, as
# timeout leaves it).  t/8000 checks it against sbatch --wait.
sbatch_wait() {
	_sw_end=$(($(date +%s) + $1))
	shift
	_sw_out=$(timeout -k 5 30 sbatch "$@" 2>&1)
	_sw_rc=$?
	printf '%s\n' "$_sw_out"
	[ $_sw_rc = 0 ] || return $_sw_rc
	_sw_job=$(printf '%s\n' "$_sw_out" | sed -n 's/^Submitted batch job //p')
	[ -n "$_sw_job" ] || return 1
	while :; do
		_sw_s=$(timeout 10 scontrol -o show job "$_sw_job" 2>&1) ||
			{ echo "sbatch_wait: job $_sw_job: $_sw_s" >&2; return 1; }
		case $_sw_s in
		*" JobState=COMPLETED "* | *" JobState=FAILED "* | *" JobState=CANCELLED "* | \
			*" JobState=TIMEOUT "* | *" JobState=NODE_FAIL "* | *" JobState=OUT_OF_MEMORY "* | \
			*" JobState=PREEMPTED "* | *" JobState=BOOT_FAIL "* | *" JobState=DEADLINE "*) break ;;
		esac
		if [ "$(date +%s)" -ge "$_sw_end" ]; then
			echo "sbatch_wait: job $_sw_job not finished after the bound" >&2
			return 124
		fi
		sleep 0.2
	done
	_sw_ec=$(printf '%s\n' "$_sw_s" | sed -n 's/.* ExitCode=\([0-9]*\):\([0-9]*\).*/\1 \2/p')
	# shellcheck disable=SC2086 # two numbers
	set -- $_sw_ec
	[ "${2:-1}" = 0 ] || return 1
	return "${1:-1}"
}

# job_of FILE: the job id sbatch wrote into FILE ("Submitted batch job N").
job_of() { sed -n 's/^Submitted batch job //p' "$1"; }

# submit OUT SBATCH-ARGS...: sbatch --wait on $submit_nodes nodes (default
# 4) with the caller's environment (--export=ALL), bounded by
# $submit_timeout seconds (default 150); sbatch's own output goes to
# OUT.sb, the job's output (TRASH/job-<id>.out) is copied to OUT, both are
# shown.  Returns sbatch's status (the job's), also left in $rc; $job is
# the job's id.
submit() {
	out=$1
	shift
	sbatch_wait "${submit_timeout:-150}" -N"${submit_nodes:-4}" --export=ALL \
		-o "$TRASH/job-%j.out" "$@" >"$out.sb" 2>&1
	rc=$?
	job=$(job_of "$out.sb")
	cat "$out.sb"
	[ -n "$job" ] && cp "$TRASH/job-$job.out" "$out" && cat "$out"
	return $rc
}

_slurm_on_exit() {
	_rc=$?
	slurm_stop
	exit $_rc
}

_slurm_on_signal() {
	trap - EXIT PIPE
	slurm_stop
	command -v cleanup_trash >/dev/null 2>&1 && cleanup_trash
	exit 1
}
