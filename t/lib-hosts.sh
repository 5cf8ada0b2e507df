# SPDX-License-Identifier: BSD-3-Clause
# t/lib-hosts.sh: a multi-host test bed on this one machine, as root.
#
#   . ./test-lib.sh
#   . "$SRCDIR/t/lib-hosts.sh"
#   hosts_start || skip_all "$hosts_skip_reason"
#   hosts_exec 2 hostname           (runs "n2" in host 2's namespaces)
#   hosts_slurm_start || skip_all "$slurm_skip_reason"   (optional: Slurm on the hosts)
#   test_done                       (hosts_stop runs on exit, also on failure)
#
# hosts_start makes N hosts (DSTAGE_HOSTS, default 4), each separate in the
# ways a cluster's nodes are:
#   - its own network namespace, with one veth ("eth0" inside) into a bridge
#     of this run; addresses in a private 10.x.y.0/24 that no interface of
#     the machine uses yet; the bridge holds .254 (the "head node": slurmctld
#     and the test's own srun/sbatch run there), host I holds .I;
#   - its own mount namespace: a private tmpfs on /dev/shm and on /tmp, its
#     own sysfs (so /sys/class/net shows its own interfaces) and its own
#     /etc/hosts naming every host;
#   - its own hostname n1..nN (UTS namespace) and System V IPC (IPC namespace).
# Everything else stays shared: the checkout, $TRASH (bound at the same path
# into the private /tmp when it lives there), /run (the Slurm state and the
# munge socket), /var/tmp.  $SHM exists, empty, in every host's /dev/shm.
# Names carry this shell's pid (bridge dsb<pid>, veths dsv<pid>.I, netns
# dsh<pid>.I), so runs in parallel never collide; a bed left by a killed run
# (its owner pid gone) is removed by the next hosts_start.
#
# hosts_stop (registered for exit and INT/TERM/HUP/PIPE) stops Slurm when
# hosts_slurm_start started it, kills every process still inside a host's
# network or mount namespace, deletes the namespaces, links and bridge, and
# removes the state directory /run/dstage-hosts.<pid>.
#
# Set after hosts_start: hosts_n, hosts_net (e.g. 10.213.7), hosts_head
# (the bridge address), hosts_dir, hosts_bridge.
# Settings: DSTAGE_HOSTS (number of hosts), DSTAGE_HOSTS_SHM (size of each
# host's /dev/shm tmpfs, default 512m).
#
# Written for /bin/sh (dash) as well as bash.

hosts_skip_reason=
hosts_dir=
hosts_n=0

_hosts_say() { printf '# hosts: %s\n' "$*" >&2; }

# _hosts_pid I: the pid holding host I's namespaces
_hosts_pid() { cat "$hosts_dir/h$1.pid" 2>/dev/null; }

# hosts_exec I CMD...: run CMD in host I (its network, mount, UTS and IPC
# namespaces), in the current directory
hosts_exec() {
	_hi=$1
	shift
	nsenter -t "$(_hosts_pid "$_hi")" -n -m -u -i --wd="$(pwd)" -- "$@"
}

# _hosts_ns_pids DIR: pids of processes inside any host of the bed in DIR
# (same network or mount namespace as a holder), holders last
_hosts_ns_pids() {
	_d=$1
	_ids=
	_holders=
	for _pf in "$_d"/h*.pid; do
		[ -f "$_pf" ] || continue
		_p=$(cat "$_pf" 2>/dev/null)
		[ -n "$_p" ] && [ -e "/proc/$_p/ns/net" ] || continue
		_holders="$_holders $_p"
		_ids="$_ids $(readlink "/proc/$_p/ns/net") $(readlink "/proc/$_p/ns/mnt")"
	done
	[ -n "$_ids" ] || return 0
	for _n in /proc/[0-9]*/ns/net; do
		_p=${_n#/proc/}
		_p=${_p%/ns/net}
		case " $_holders " in *" $_p "*) continue ;; esac
		_a=$(readlink "$_n" 2>/dev/null) || continue
		_b=$(readlink "/proc/$_p/ns/mnt" 2>/dev/null)
		case " $_ids " in *" $_a "* | *" $_b "*) echo "$_p" ;; esac
	done
	for _p in $_holders; do echo "$_p"; done
}

# Remove the bed whose state directory is $1 (pid $2 in its names).
_hosts_stop_dir() {
	_d=$1
	_id=$2
	[ -n "$_d" ] || return 0
	if [ -d "$_d" ]; then
		_pids=$(_hosts_ns_pids "$_d")
		# shellcheck disable=SC2086
		[ -n "$_pids" ] && kill -TERM $_pids 2>/dev/null
		_i=0
		while [ $_i -lt 20 ] && [ -n "$(_hosts_ns_pids "$_d")" ]; do
			sleep 0.1
			_i=$((_i + 1))
		done
		_pids=$(_hosts_ns_pids "$_d")
		# shellcheck disable=SC2086
		[ -n "$_pids" ] && kill -KILL $_pids 2>/dev/null
	fi
	for _ns in /run/netns/dsh"$_id".*; do
		[ -e "$_ns" ] && ip netns delete "${_ns#/run/netns/}" 2>/dev/null
	done
	ip link show "dsb$_id" >/dev/null 2>&1 && ip link delete "dsb$_id" 2>/dev/null
	for _l in $(ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \(dsv$_id\.[0-9]*\)@.*/\1/p"); do
		ip link delete "$_l" 2>/dev/null
	done
	rm -rf "$_d"
}

# Beds of killed runs: their owner is gone.
_hosts_reap_stale() {
	for _o in /run/dstage-hosts.*/owner; do
		[ -f "$_o" ] || continue
		_sd=${_o%/owner}
		_op=$(cat "$_o" 2>/dev/null)
		[ -n "$_op" ] && kill -0 "$_op" 2>/dev/null && continue
		_hosts_say "removing a stale bed in $_sd (owner $_op gone)"
		_hosts_stop_dir "$_sd" "${_sd#/run/dstage-hosts.}"
	done
}

# A 10.x.y.0/24 no address or route of the machine touches.
_hosts_pick_net() {
	_used=$(ip -4 -o addr show 2>/dev/null; ip -4 route show 2>/dev/null)
	_t=0
	while [ $_t -lt 200 ]; do
		_t=$((_t + 1))
		_r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
		_net="10.$((100 + _r % 150)).$((_r / 150 % 250 + 1))"
		case $_used in *" $_net."*) continue ;; esac
		echo "$_net"
		return 0
	done
	return 1
}

_hosts_fail() {
	hosts_skip_reason="$*"
	_hosts_say "$hosts_skip_reason"
	hosts_stop
	return 1
}

# The holder of host I: enters a new mount and UTS namespace inside the
# host's netns, makes the private mounts, reports, and sleeps.  Shared
# directories that live under /tmp are bound back at the same path (the
# shell's cwd still reaches the directory the new tmpfs hides): the test's
# scratch directory and the checkout itself.
_hosts_holder() {
	_i=$1
	cat >"$hosts_dir/holder.sh" <<-\EOF
	set -e
	i=$1 dir=$2 shm=$3 shared=$4 size=$5
	mount --make-rprivate /
	hostname "n$i"
	# what the new mounts hide and must stay: held at a private mount point
	# (mount(8) resolves names afresh, so a cwd cannot carry them over)
	keep=$dir/keep.$i
	mkdir -p "$keep/cg"
	mountpoint -q /sys/fs/cgroup && mount --rbind /sys/fs/cgroup "$keep/cg"
	# shared: the test's scratch dir and the checkout (a CI clone may live
	# under /tmp too), separated by ':'
	n=0
	old_ifs=$IFS; IFS=:
	for d in $shared; do
		n=$((n + 1))
		case $d in /tmp/*) [ -d "$d" ] && mkdir -p "$keep/sh$n" &&
			mount --rbind "$d" "$keep/sh$n" ;; esac
	done
	IFS=$old_ifs
	# a sysfs of this netns; slurmd wants the cgroup tree it hides back
	mount -t sysfs sysfs /sys
	mountpoint -q "$keep/cg" && mount --move "$keep/cg" /sys/fs/cgroup
	mount -t tmpfs -o mode=1777,size="$size" "tmpfs-n$i" /dev/shm
	mkdir -p "$shm"
	mount -t tmpfs -o mode=1777 "tmp-n$i" /tmp
	n=0
	old_ifs=$IFS; IFS=:
	for d in $shared; do
		n=$((n + 1))
		if mountpoint -q "$keep/sh$n"; then
			mkdir -p "$d"
			mount --move "$keep/sh$n" "$d"
		fi
	done
	IFS=$old_ifs
	mount --bind "$dir/etc-hosts" /etc/hosts
	echo up >"$dir/h$i.up"
	exec sleep 2147483647
	EOF
	setsid nsenter --net="/run/netns/dsh$$.$_i" unshare --mount --uts --ipc --propagation private \
		sh "$hosts_dir/holder.sh" "$_i" "$hosts_dir" "$SHM" "$TRASH:$SRCDIR" "${DSTAGE_HOSTS_SHM:-512m}" \
		</dev/null >>"$hosts_dir/h$_i.log" 2>&1 &
	echo $! >"$hosts_dir/h$_i.pid"
}

hosts_start() {
	hosts_skip_reason=
	case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin:/sbin"; export PATH ;; esac
	if [ "$(id -u)" != 0 ]; then
		hosts_skip_reason="the multi-host bed needs root (network and mount namespaces)"
		return 1
	fi
	for _c in ip unshare nsenter setsid mountpoint; do
		command -v "$_c" >/dev/null 2>&1 || {
			hosts_skip_reason="no '$_c' (iproute2, util-linux)"
			return 1
		}
	done
	hosts_n=${DSTAGE_HOSTS:-4}
	hosts_bridge=dsb$$
	hosts_dir=/run/dstage-hosts.$$
	_hosts_reap_stale
	mkdir -p "$hosts_dir" || { hosts_skip_reason="cannot make $hosts_dir"; return 1; }
	echo $$ >"$hosts_dir/owner"
	_hosts_traps

	hosts_net=$(_hosts_pick_net) || { _hosts_fail "no free 10.x.y.0/24"; return 1; }
	hosts_head=$hosts_net.254
	ip link add "$hosts_bridge" type bridge 2>"$hosts_dir/err" ||
		{ _hosts_fail "cannot make a bridge: $(cat "$hosts_dir/err")"; return 1; }
	ip addr add "$hosts_head/24" dev "$hosts_bridge" && ip link set "$hosts_bridge" up ||
		{ _hosts_fail "cannot set up bridge $hosts_bridge"; return 1; }
	{
		printf '127.0.0.1\tlocalhost\n%s\thead\n' "$hosts_head"
		for _i in $(seq 1 "$hosts_n"); do printf '%s.%s\tn%s\n' "$hosts_net" "$_i" "$_i"; done
	} >"$hosts_dir/etc-hosts"
	for _i in $(seq 1 "$hosts_n"); do
		_ns=dsh$$.$_i
		ip netns add "$_ns" 2>"$hosts_dir/err" ||
			{ _hosts_fail "cannot make network namespace: $(cat "$hosts_dir/err")"; return 1; }
		ip link add "dsv$$.$_i" type veth peer name eth0 netns "$_ns" &&
			ip link set "dsv$$.$_i" master "$hosts_bridge" up &&
			ip -n "$_ns" addr add "$hosts_net.$_i/24" dev eth0 &&
			ip -n "$_ns" link set eth0 up &&
			ip -n "$_ns" link set lo up ||
			{ _hosts_fail "cannot wire host $_i"; return 1; }
		_hosts_holder "$_i"
	done
	_k=0
	for _i in $(seq 1 "$hosts_n"); do
		while [ ! -f "$hosts_dir/h$_i.up" ]; do
			kill -0 "$(_hosts_pid "$_i")" 2>/dev/null ||
				{ _hosts_fail "host $_i did not come up: $(tail -n 3 "$hosts_dir/h$_i.log")"; return 1; }
			_k=$((_k + 1))
			[ $_k -lt 200 ] || { _hosts_fail "host $_i did not come up in 20 s"; return 1; }
			sleep 0.1
		done
	done
	# the wire works: every host reaches the head (and so the bridge)
	for _i in $(seq 1 "$hosts_n"); do
		command -v ping >/dev/null 2>&1 || break
		hosts_exec "$_i" ping -c 1 -W 5 "$hosts_head" >/dev/null 2>&1 ||
			{ _hosts_fail "host $_i cannot reach $hosts_head"; return 1; }
	done
	return 0
}

# Slurm (t/lib-slurm.sh) with one slurmd inside each host: NodeAddr the
# host's address, slurmctld and munged on the head, the state (and the munge
# socket) under /run, shared by every host.
hosts_slurm_start() {
	# shellcheck source=t/lib-slurm.sh
	. "$SRCDIR/t/lib-slurm.sh"
	DSTAGE_SLURM_NODES=$hosts_n
	slurm_ctld_addr=$hosts_head
	slurm_node_addrs=
	for _i in $(seq 1 "$hosts_n"); do slurm_node_addrs="$slurm_node_addrs $hosts_net.$_i"; done
	slurm_node_hostnames=yes
	slurm_node_wrap=hosts_exec
	# each slurmd's spool on its own host, as on a cluster: one path, in the
	# host's private /tmp (a step's sockets are then on its host only)
	slurm_spool_dir=/tmp/dstage-slurmd
	hosts_slurm=1
	slurm_start "/run/dstage-slurm.$$"
	_rc=$?
	# our traps (slurm_start set its own), which stop Slurm first; with
	# test_atexit, slurm_stop was registered after hosts_stop and so runs
	# before it
	command -v test_atexit >/dev/null 2>&1 || _hosts_traps
	return $_rc
}

# The job scripts (jobs/*.sbatch) on the bed, in a test script:
#   hosts_job_env [VAR...]   their environment: JOBS (the scripts), DSTAGE_DIR
#                            ($SHM/stores), DSTAGE_MOUNT (/dstage-tNNNN-PID),
#                            MPI over TCP (UCX_TLS), this build's dstage first
#                            in PATH, and none of their settings (nor VAR...)
#                            inherited from the caller
#   hosts_job_start          hosts_start and hosts_slurm_start (a skip when
#                            either cannot), n=hosts_n, DSTAGE_DIR on every host
hosts_job_env() {
	JOBS=$SRCDIR/jobs
	DSTAGE_DIR=$SHM/stores
	DSTAGE_MOUNT=/dstage-t${test_name%%-*}-$$
	UCX_TLS=tcp,self
	PATH=$DSTAGE_TEST_BUILD/bin:$PATH
	export PATH DSTAGE_DIR DSTAGE_MOUNT UCX_TLS
	unset DSTAGE_PACK DSTAGE_REPLICAS DSTAGE_SEED DSTAGE_LOCALITY DSTAGE_DROP_LAST DSTAGE_BIN \
		DSTAGE_MPI DSTAGE_TASKS_PER_NODE DSTAGE_SRUN_OPTS DSTAGE_STAGE_OPTS DSTAGE_SERVE_OPTS \
		DSTAGE_SERVE_TIMEOUT "$@"
}
hosts_job_start() {
	hosts_start || skip_all "$hosts_skip_reason"
	hosts_slurm_start || skip_all "$slurm_skip_reason"
	n=$hosts_n
	for i in $(seq 1 $n); do hosts_exec $i mkdir -p "$DSTAGE_DIR"; done
}

# hosts_stop at exit: with t/test-lib.sh's test_atexit (its EXIT trap runs
# after INT/TERM/HUP too), else with traps of our own (bench/hosts.sh)
_hosts_atexit=
_hosts_traps() {
	if command -v test_atexit >/dev/null 2>&1; then
		[ -n "$_hosts_atexit" ] || test_atexit hosts_stop
		_hosts_atexit=1
	else
		trap '_hosts_on_exit' EXIT
		trap '_hosts_on_signal' INT TERM HUP PIPE
	fi
}

hosts_stop() {
	if [ -n "${hosts_slurm:-}" ]; then
		slurm_stop
		hosts_slurm=
	fi
	[ -n "$hosts_dir" ] || return 0
	_hosts_stop_dir "$hosts_dir" $$
	hosts_dir=
}

_hosts_on_exit() {
	_rc=$?
	hosts_stop
	exit $_rc
}

_hosts_on_signal() {
	trap - EXIT PIPE
	hosts_stop
	command -v cleanup_trash >/dev/null 2>&1 && cleanup_trash
	exit 1
}
