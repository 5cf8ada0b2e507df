#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/run.sh: every comparison of dstage against its peers in one run
# (`make bench`, `make bench QUICK=1`), written to bench/results/ (quick
# runs: bench/results/quick/): README.md (the table, the machine, the
# model, the method), PNG plots, and modelcheck.dat (bench/model's input).
#
#   sh bench/run.sh [--quick] [--only "SECTION..."] [--keep]
#
# Sections (bench/SECTION.sh, each interleaving dstage and its peers A B A B
# ..., medians of at least 5 rounds; see the head of each script):
#   fanstore   row 1  FanStore's read-once benchmark: shim / tmpfs / squashfuse
#   small      row 2  4 KiB files, open/stat/readdir, os.walk of 200k files
#   bystander  row 3  calls outside the prefix with and without the shim
#   packrate   row 4  dstage pack vs tar cf (bench/pack.sh, the pack
#                     module's own script, when present; else bench/packrate.sh)
#   stage      row 4  dstage stage vs cp of the partitions and tar -x
#                     (bench/stage.sh, the stage module's own script)
#   readonce   row 4  bytes read from the shared FS per staged byte
#   exchange   row 5  epoch exchange vs MPI_Alltoallv, epoch read, remote reads
#   exchange-openmpi  the same on the Open MPI build (make MPI=openmpi), the
#                     peers under both MPIs (docs/mpi.md)
#   zlib       row 6  compressed vs uncompressed packs
#   e2e        row 7  torchvision ImageFolder + DataLoader images/s
#   outputs           write-once outputs (issue 15): torch.save of 1 GiB
#                     through the shim vs /var/tmp + fsync vs /dev/shm; the
#                     drain vs cp + sync (bench/outputs.sh)
#   modelcheck        the scaling model's inputs, 1/2/4 simulated nodes
#   scale             a reader at millions of files (issue 27): DstageFiles +
#                     EpochSampler vs ImageFolder + DistributedSampler, the
#                     epoch list of reader 0 and 7 of 8 (bench/scale.sh)
#   s3                object storage: stage-in vs aws s3 cp, read once via
#                     the shim vs an s3fs mount, pack s3:// vs aws s3 cp
#   spill             the spill tier (issue 26): files read once from it
#                     through the shim vs natively from that disk, cold and
#                     warm; a stage that spills half vs one in RAM
#   tree              sources that are not packs (issue 28): stage of a
#                     plain tree vs pack + stage vs pack --in-place + stage
#                     vs cp -r / tar xf; shared-FS bytes and opens of each
#                     (bench/tree.sh)
#   tar               tar shards staged in place (issue 28, --expand-tar) vs
#                     tar xf and cp; bytes and opens on the shared side;
#                     members read through the shim vs tarfile streaming
#                     (WebDataset's reader) (bench/tar.sh)
#   shim, shuffle     the component scripts bench/shim.sh and
#                     bench/shuffle.sh (when present), their tables copied
#                     as they print them
# Scratch data lives in /dev/shm/dstage-bench.* ("node-local") and
# /var/tmp/dstage-bench.* ("shared FS"), removed at the end.  --keep keeps
# bench/results/tmp (the raw figures).  QUICK finishes in a few minutes on 2
# cores; the full run takes longer (bigger data, 7 rounds).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
QUICK=0 ONLY= KEEP=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--only) ONLY=$2; shift ;;
	--keep) KEEP=1 ;;
	*) echo "usage: sh bench/run.sh [--quick] [--only \"SECTION...\"] [--keep]" >&2; exit 2 ;;
	esac
	shift
done
q=; [ $QUICK = 1 ] && q=--quick
[ -x build/bin/dstage ] && [ -f build/lib/libdstage-preload.so ] || { echo "bench: run make first" >&2; exit 1; }
for t in gcc mpicc.mpich mpiexec.mpich; do
	command -v $t >/dev/null || { echo "bench: $t missing (make deps-bench)" >&2; exit 1; }
done

# full runs write bench/results/, quick ones bench/results/quick/
OUT="$top/bench/results"
[ $QUICK = 1 ] && OUT="$OUT/quick"
mkdir -p "$OUT"
RT="$top/bench/results/tmp"
rm -rf "$RT"
mkdir -p "$RT"
BENCH_SCR=$(mktemp -d /dev/shm/dstage-bench.XXXXXX)
BENCH_SHARED=$(mktemp -d /var/tmp/dstage-bench.XXXXXX)
BENCH_BIN="$BENCH_SCR/bin"
export BENCH_SCR BENCH_SHARED BENCH_BIN
cleanup() {
	# a section killed by its timeout may leave a FUSE mount behind
	for m in $(awk -v p="$BENCH_SCR" 'index($2, p) == 1 { print $2 }' /proc/mounts); do
		fusermount -u "$m" 2>/dev/null || :
	done
	rm -rf "$BENCH_SCR" "$BENCH_SHARED"
	[ $KEEP = 1 ] || rm -rf "$RT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$BENCH_BIN"
# a snapshot of the build: other developers may rebuild build/ while this
# runs (the component scripts bench/{stage,shim,shuffle}.sh use build/)
mkdir -p "$BENCH_SCR/dstage/bin" "$BENCH_SCR/dstage/lib"
cp build/bin/dstage "$BENCH_SCR/dstage/bin/"
cp build/lib/libdstage-preload.so "$BENCH_SCR/dstage/lib/"
BENCH_DSTAGE="$BENCH_SCR/dstage/bin/dstage"
BENCH_PRELOAD="$BENCH_SCR/dstage/lib/libdstage-preload.so"
export BENCH_DSTAGE BENCH_PRELOAD
# and of the Open MPI build, where there is one (make MPI=openmpi): the
# exchange section runs again on it, side by side (docs/mpi.md)
if [ -x build-openmpi/bin/dstage ] && command -v mpiexec.openmpi >/dev/null; then
	mkdir -p "$BENCH_SCR/dstage-openmpi/bin" "$BENCH_SCR/dstage-openmpi/lib"
	cp build-openmpi/bin/dstage "$BENCH_SCR/dstage-openmpi/bin/"
	cp build-openmpi/lib/libdstage-preload.so "$BENCH_SCR/dstage-openmpi/lib/"
fi
gcc -O2 -Wall -Wextra -o "$BENCH_BIN/reader" bench/reader.c
mpicc.mpich -O2 -Wall -Wextra -o "$BENCH_BIN/mpibench" bench/mpibench.c

T0=$(date +%s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "bench: $(nproc) cores, load $load0, $( [ $QUICK = 1 ] && echo quick || echo full) mode; scratch $BENCH_SCR, $BENCH_SHARED" >&2

SECTIONS="bystander fanstore small zlib packrate readonce stage exchange exchange-openmpi modelcheck scale e2e outputs shim shuffle s3 spill tree tar"
[ -n "$ONLY" ] && SECTIONS=$ONLY
if [ $QUICK = 1 ]; then TMO=240; else TMO=3600; fi
: >"$RT/sections.txt"
: >"$RT/rows.tsv"
# section NAME: run it, with a time limit; a failure is recorded, the run goes on
section() {
	s=$1
	t0=$(date +%s)
	echo "bench: == $s" >&2
	rc=0
	case $s in
	stage)
		[ -f bench/stage.sh ] || return 0
		timeout -k 10 $TMO sh bench/stage.sh $q "$RT" >"$RT/stage.out" 2>"$RT/stage.err" || rc=$?
		# its rows: | what | dstage | peer | ratio | goal | met |
		[ -s "$RT/stage.md" ] && awk -F'|' 'NF >= 7 {
			for (i = 2; i <= 7; i++) { gsub(/^ +| +$/, "", $i) }
			ratio = $5; sub(/x.*/, "", ratio); goal = $6; sub(/x$/, "", goal)
			printf "stage\t%s\t%s\t%s\t%s\t%s\t%s\t#3\n", $2, $3, $4, ratio, goal, $7 }' "$RT/stage.md" >>"$RT/rows.tsv"
		;;
	packrate)
		# the pack module's own bench/pack.sh when it is there (its rows:
		# | what | files | MiB | tar cf | dstage pack | ratio | goal |), else ours
		if [ -f bench/pack.sh ]; then
			a=; [ $QUICK = 1 ] && a="--quick --rounds 5"
			# shellcheck disable=SC2086
			timeout -k 10 $TMO sh bench/pack.sh $a >"$RT/pack.md" 2>"$RT/packrate.err" || rc=$?
			before=$(wc -l <"$RT/rows.tsv")
			awk -F'|' 'NF >= 9 && $2 !~ /what|---/ {
				for (i = 2; i <= 8; i++) { gsub(/^ +| +$/, "", $i) }
				goal = ($8 == "-") ? "-" : $8
				printf "packrate\t%s, %s files (%s MiB), vs tar cf\t%s\ttar cf %s\t%s\t%s\tx\t%s\n", $2, $3, $4, $6, $5, $7, goal, (goal == "-" ? "" : "#2") }' \
				"$RT/pack.md" >"$RT/pack.rows"
			while IFS='	' read -r sec what ds peer ratio goal ok src; do
				printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$sec" "$what" "$ds" "$peer" "$ratio" "$goal" \
					"$(awk -v r="$ratio" -v g="$goal" 'BEGIN { if (g == "-") { print "n/a"; exit } split(g, a, " ");
						print ((a[1] == ">=") ? (r + 0 >= a[2] + 0) : (r + 0 <= a[2] + 0)) ? "yes" : "no" }')" "$src" >>"$RT/rows.tsv"
			done <"$RT/pack.rows"
			if [ "$(wc -l <"$RT/rows.tsv")" -gt "$before" ]; then
				echo "packrate (bench/pack.sh) ok $(($(date +%s) - t0))s" >>"$RT/sections.txt"
				echo "pack: bench/pack.sh, the pack module's script: dstage pack serial and -n 2 vs tar cf, interleaved in rotating order, medians; its notes: $(grep -v '^|' "$RT/pack.md" | grep . | tr '\n' ' ')" >"$RT/notes-packrate.md"
				return 0
			fi
			echo "bench: bench/pack.sh gave no rows: bench/packrate.sh instead" >&2
			rm -f "$RT/pack.md"
			rc=0
		fi
		timeout -k 10 $TMO sh bench/packrate.sh $q "$RT" 2>"$RT/packrate.err" || rc=$?
		;;
	*-openmpi)
		[ -x "$BENCH_SCR/dstage-openmpi/bin/dstage" ] || { echo "$s absent (make MPI=openmpi)" >>"$RT/sections.txt"; return 0; }
		DSTAGE_MPILIB=openmpi BENCH_DSTAGE="$BENCH_SCR/dstage-openmpi/bin/dstage" \
			BENCH_PRELOAD="$BENCH_SCR/dstage-openmpi/lib/libdstage-preload.so" \
			timeout -k 10 $TMO sh bench/${s%-openmpi}.sh $q "$RT" 2>"$RT/$s.err" || rc=$?
		;;
	shim | shuffle)
		[ -f bench/$s.sh ] || { echo "$s absent" >>"$RT/sections.txt"; return 0; }
		a=$q
		[ $s = shuffle ] && [ $QUICK = 1 ] && a="--quick --size 64 --rounds 5"
		# shellcheck disable=SC2086
		timeout -k 10 $TMO sh bench/$s.sh $a >"$RT/$s.md" 2>"$RT/$s.err" || rc=$?
		;;
	*)
		timeout -k 10 $TMO sh bench/$s.sh $q "$RT" 2>"$RT/$s.err" || rc=$?
		;;
	esac
	dt=$(($(date +%s) - t0))
	if [ $rc = 0 ]; then
		echo "$s ok ${dt}s" >>"$RT/sections.txt"
	else
		echo "$s FAILED (exit $rc) ${dt}s" >>"$RT/sections.txt"
		echo "bench: $s failed (exit $rc); its stderr:" >&2
		tail -20 "$RT/$s.err" >&2
	fi
	grep -v '^  ' "$RT/$s.err" 2>/dev/null | tail -3 >&2 || :
	echo "bench: $s: ${dt}s" >&2
}
for s in $SECTIONS; do
	section "$s"
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
TOTAL=$(($(date +%s) - T0))

# ---- the model ----------------------------------------------------------------
model_md=
if [ -s "$RT/modelcheck.dat" ]; then
	model_md=$(python3 bench/model --check --dat "$RT/model.dat" "$RT" 2>&1 || :)
	mkdir -p "$OUT"
	cp "$RT/modelcheck.dat" "$OUT/modelcheck.dat"
fi

# ---- the table ----------------------------------------------------------------
rownum() {
	case $1 in
	fanstore) echo 1 ;; small) echo 2 ;; bystander) echo 3 ;;
	packrate | stage | readonce) echo 4 ;; exchange | exchange-openmpi) echo 5 ;; zlib) echo 6 ;; e2e) echo 7 ;; *) echo 9 ;;
	esac
}
touch "$RT/rows.tsv"
# rows sorted by issue 7's row number, keeping each section's order
awk -F'\t' 'BEGIN { split("fanstore small bystander packrate stage readonce exchange exchange-openmpi zlib e2e", o, " "); for (i in o) rank[o[i]] = i }
	{ r = ($1 in rank) ? rank[$1] : 99; printf "%02d\t%05d\t%s\n", r, NR, $0 }' "$RT/rows.tsv" | sort | cut -f3- >"$RT/rows.sorted"
: >"$RT/ratios.txt"
n=0 met=0 miss=0 nogoal=0
table=$(
	echo "| id | what | dstage | peer | ratio | goal | met |"
	echo "| --- | --- | --- | --- | --- | --- | --- |"
	prev=
	while IFS='	' read -r sec what ds peer ratio goal ok src; do
		g=$(rownum "$sec")
		[ "$g" = "$prev" ] || k=0
		prev=$g
		k=$((k + 1))
		id="$g.$k"
		gs=$goal
		[ "$goal" = - ] && gs="—"
		[ -n "$src" ] && [ "$goal" != - ] && gs="$goal ($src)"
		mk=$ok
		case $ok in yes) mk="**yes**" ;; no) mk="**NO**" ;; n/a) mk="—" ;; esac
		echo "| $id | $what | $ds | $peer | $ratio | $gs | $mk |"
		gv=$(echo "$goal" | awk '{ print ($2 == "" ? 0 : $2) }')
		mv=-1; [ "$ok" = yes ] && mv=1; [ "$ok" = no ] && mv=0
		case $ratio in [0-9]*) echo "$id $ratio $gv $mv" >>"$RT/ratios.txt" ;; esac
	done <"$RT/rows.sorted"
)
n=$(wc -l <"$RT/rows.sorted")
met=$(awk -F'\t' '$7 == "yes"' "$RT/rows.sorted" | wc -l)
miss=$(awk -F'\t' '$7 == "no"' "$RT/rows.sorted" | wc -l)
missed=$(awk -F'\t' '$7 == "no" { print "- " $2 " (" $5 " against " $6 ")" }' "$RT/rows.sorted")

sh bench/plot.sh "$RT" "$OUT" 2>"$RT/plot.err" || echo "bench: plots failed: $(cat "$RT/plot.err")" >&2

# ---- bench/results/README.md ------------------------------------------------------
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mpich=$(mpichversion 2>/dev/null | sed -n 's/MPICH Version:[[:space:]]*//p')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -v '^.. bench/' | wc -l)
{
	echo "# dstage benchmark results"
	echo
	echo "Written by \`make bench$( [ $QUICK = 1 ] && echo " QUICK=1")\` (\`sh bench/run.sh$( [ $QUICK = 1 ] && echo " --quick")\`) on $(date -u '+%Y-%m-%d %H:%M UTC'), $( [ $QUICK = 1 ] && echo "quick mode (small data, 5 rounds)" || echo "full mode (7 rounds)"), in ${TOTAL}s."
	echo
	echo "| machine | |"
	echo "| --- | --- |"
	echo "| cores (nproc) | $(nproc) |"
	echo "| CPU | $cpu |"
	echo "| memory | $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) |"
	echo "| kernel | $(uname -sr) |"
	echo "| OS | $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") |"
	echo "| MPI | MPICH $mpich (mpiexec.mpich)$( [ -x build-openmpi/bin/dstage ] && echo "; Open MPI $(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p') (mpiexec.openmpi, exchange-openmpi)") |"
	echo "| dstage | commit $commit$( [ "$dirty" -gt 0 ] && echo " + $dirty uncommitted files outside bench/ (other work in progress)") |"
	echo "| load average | $load0 at the start, $load1 at the end |"
	echo
	echo "Other jobs (test suites of other developers) ran on the same 2 cores during the run, so single"
	echo "timings are noisy: every row compares dstage with its peer **in the same run, interleaved**"
	echo "(A B A B ..., each round running every contender once) and reports **medians**; read the"
	echo "ratios, not the absolute figures.  The *ratio* is dstage's figure over the peer's (higher is"
	echo "better), except where the goal says \`<=\` (a time or a byte count).  A goal marked *(#N)* comes"
	echo "from issue N, *(ours)* is set by this report where no issue sets one; — means no goal (reported"
	echo "for information).  The scratch data lived in /dev/shm (\"node-local RAM\") and /var/tmp (the"
	echo "\"shared file system\"); the squashfuse images were on /dev/shm too."
	echo
	echo "**$met of $((met + miss)) goals met**, $miss missed, $((n - met - miss)) rows without a goal."
	if [ -n "$missed" ]; then
		echo
		echo "Missed:"
		echo
		echo "$missed"
	fi
	echo
	echo "Rows by issue 7's list: 1 FanStore's benchmark, 2 small files and metadata, 3 bystanders,"
	echo "4 pack and stage, 5 epoch exchange and remote reads, 6 zlib, 7 end to end."
	echo
	echo "$table"
	echo
	echo "## Plots"
	echo
	for p in ratios fanstore small e2e model; do
		[ -f "$OUT/$p.png" ] && echo "![$p]($p.png)" && echo
	done
	echo "## Scaling model"
	echo
	if [ -n "$model_md" ]; then
		echo "\`bench/model --check ${OUT#"$top"/}\` (the model and its assumptions are described at the top of"
		echo "\`bench/model\`; it reads \`${OUT#"$top"/}/modelcheck.dat\`, measured by \`bench/modelcheck.sh\`)."
		echo
		echo "$model_md"
	else
		echo "Not computed: bench/modelcheck.sh did not run."
	fi
	echo
	echo "## How each row was measured"
	echo
	for s in fanstore small bystander packrate stage readonce exchange exchange-openmpi zlib e2e outputs; do
		[ -s "$RT/notes-$s.md" ] && { echo "- **$s** (row $(rownum $s)): $(cat "$RT/notes-$s.md" | tr '\n' ' ')"; }
	done
	[ -s "$RT/stage.md" ] && echo "- **stage** (row 4): bench/stage.sh (the stage module's script, unchanged logic): dstage stage on 2 simulated nodes vs cp of the partition files vs tar -x of the same tree, into /dev/shm, medians of 5 interleaved runs."
	echo
	echo "Sections: $(tr '\n' ';' <"$RT/sections.txt" | sed 's/;$//; s/;/; /g')."
	for s in pack outputs shim shuffle; do
		if [ -s "$RT/$s.md" ]; then
			echo
			echo "## bench/$s.sh, as it prints it"
			echo
			echo "The component's own script, run in this same session$( [ $QUICK = 1 ] && echo " (--quick)")."
			echo
			cat "$RT/$s.md"
		fi
	done
} >"$OUT/README.md.new"
mv "$OUT/README.md.new" "$OUT/README.md"
echo "bench: $met of $((met + miss)) goals met, $miss missed; ${OUT#"$top"/}/README.md (${TOTAL}s)" >&2
awk '/^\| id /,0' "$OUT/README.md" | sed -n '1,/^$/p'
