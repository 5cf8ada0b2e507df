#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/plot.sh: the PNG plots of bench/results from the .dat files the
# sections wrote (gnuplot, Debian's gnuplot-nox).
#   sh bench/plot.sh DATA_DIR OUT_DIR
# Writes OUT_DIR/{fanstore,small,e2e,ratios,model}.png for what is there.
set -eu
D=$1 O=$2
command -v gnuplot >/dev/null || { echo "bench/plot.sh: no gnuplot: no plots" >&2; exit 0; }
mkdir -p "$O"
term='set terminal pngcairo size 1000,520 font "DejaVu Sans,10" noenhanced'
common='set style data histograms; set style histogram clustered gap 1; set style fill solid 0.85 border -1; set boxwidth 0.9; set grid ytics; set key below horizontal'

if [ -s "$D/fanstore.dat" ]; then
	# size P native shim squash (B/s) ...
	awk '$2 == 1 { l = ($1 >= 1024) ? ($1 / 1024) " MiB" : $1 " KiB"; print "\"" l "\"", $3 / 1e9, $4 / 1e9, ($5 == "-" ? 0 : $5 / 1e9) }' "$D/fanstore.dat" >"$D/fs1.txt"
	awk '$2 == 2 { l = ($1 >= 1024) ? ($1 / 1024) " MiB" : $1 " KiB"; print "\"" l "\"", $3 / 1e9, $4 / 1e9, ($5 == "-" ? 0 : $5 / 1e9) }' "$D/fanstore.dat" >"$D/fs2.txt"
	gnuplot <<EOF
$term
set output "$O/fanstore.png"
$common
set multiplot layout 1,2 title "Row 1: FanStore read-once benchmark, every file read once per reader (GB/s, higher is better)"
set ylabel "GB/s"
set yrange [0:*]
set title "1 reader"
plot "$D/fs1.txt" using 2:xtic(1) title "tmpfs (native)" lc rgb "#999999", "" using 3 title "dstage shim" lc rgb "#1f77b4", "" using 4 title "squashfuse" lc rgb "#d62728"
set title "2 readers (aggregate)"
plot "$D/fs2.txt" using 2:xtic(1) title "tmpfs (native)" lc rgb "#999999", "" using 3 title "dstage shim" lc rgb "#1f77b4", "" using 4 title "squashfuse" lc rgb "#d62728"
unset multiplot
EOF
fi

if [ -s "$D/small.dat" ]; then
	awk '{ n = $1; if (n == "read") n = "4 KiB read"; if (n == "walk") n = "C walk+lstat"; if (n == "walkpy") n = "os.walk+stat";
		print "\"" n "\"", $2, $3, ($4 == "-" ? 1 : $4) }' "$D/small.dat" >"$D/small.txt"
	gnuplot <<EOF
$term
set output "$O/small.png"
$common
set title "Row 2: small files and metadata, operations per second (log scale, higher is better)"
set logscale y
set ylabel "ops/s (files, entries)"
plot "$D/small.txt" using 2:xtic(1) title "tmpfs (native)" lc rgb "#999999", "" using 3 title "dstage shim" lc rgb "#1f77b4", "" using 4 title "squashfuse" lc rgb "#d62728"
EOF
fi

if [ -s "$D/e2e.dat" ]; then
	awk '{ n = ($1 == "decode") ? "PIL decode" : "raw bytes (decode off)"; print "\"" n "\"", $2, $3, ($4 == "-" ? 0 : $4) }' "$D/e2e.dat" >"$D/e2e.txt"
	gnuplot <<EOF
$term
set output "$O/e2e.png"
$common
set title "Row 7: torchvision ImageFolder + DataLoader(num_workers=2), images/s (higher is better)"
set logscale y
set ylabel "images/s"
plot "$D/e2e.txt" using 2:xtic(1) title "tmpfs (native)" lc rgb "#999999", "" using 3 title "dstage shim" lc rgb "#1f77b4", "" using 4 title "squashfuse" lc rgb "#d62728"
EOF
fi

if [ -s "$D/ratios.txt" ]; then
	# id ratio goal met(1/0/-1): one bar per row that has a numeric ratio
	n=$(wc -l <"$D/ratios.txt")
	gnuplot <<EOF
set terminal pngcairo size 1200,520 font "DejaVu Sans,9" noenhanced
set output "$O/ratios.png"
set title "Every row: dstage / peer (bars; green: goal met, red: missed, grey: no goal) and the goal (black marks); log scale"
set logscale y
set grid ytics
set style fill solid 0.85 border -1
set boxwidth 0.7
set xrange [0:$n + 1]
set xtics rotate by 90 right font ",8"
set ylabel "ratio"
set key off
plot "$D/ratios.txt" using 0:2:(\$4 == 1 ? 0x2ca02c : (\$4 == 0 ? 0xd62728 : 0xaaaaaa)):xtic(1) with boxes lc rgb variable, \
     "" using 0:(\$3 > 0 ? \$3 : 1/0) with points pt 7 ps 1.2 lc rgb "black", \
     1 with lines lc rgb "#555555" dt 2
EOF
fi

if [ -s "$D/model.dat" ]; then
	gnuplot <<EOF
$term
set output "$O/model.png"
set multiplot layout 1,2 title "Scaling model (bench/model): HDR InfiniBand 25 GB/s, Lustre 100 GB/s aggregate, 5 GB/s per node (assumed)"
set logscale xy
set grid
set xlabel "nodes"
set key below vertical maxrows 2
set title "stage-in and per-epoch exchange time (s)"
plot "< grep ^ImageNet1k $D/model.dat" using 2:5 with linespoints lw 2 title "ImageNet-1k stage-in", \
     "< grep ^ImageNet1k $D/model.dat" using 2:6 with linespoints lw 2 title "ImageNet-1k exchange/epoch", \
     "< grep ^10M $D/model.dat" using 2:5 with linespoints lw 2 title "10M files stage-in", \
     "< grep ^10M $D/model.dat" using 2:6 with linespoints lw 2 title "10M files exchange/epoch"
set title "memory per node (GB): store + epoch cache + index"
plot "< grep ^ImageNet1k $D/model.dat" using 2:(\$7/1e9) with linespoints lw 2 title "ImageNet-1k", \
     "< grep ^10M $D/model.dat" using 2:(\$7/1e9) with linespoints lw 2 title "10M files", \
     "< grep ^10M $D/model.dat" using 2:(\$3/1e9) with linespoints lw 2 dt 2 title "10M files: index alone"
unset multiplot
EOF
fi
