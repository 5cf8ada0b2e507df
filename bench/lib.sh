# SPDX-License-Identifier: BSD-3-Clause
# bench/lib.sh: helpers shared by the benchmark scripts (sourced).
# Timing with date +%s.%N, medians with sort, Markdown rows.
top=$(cd "$(dirname "$0")/.." && pwd)
B="$top/build/bin/dstage"
T="$top/build/t"
now() { date +%s.%N; }
# elapsed START: seconds since START, 4 decimals
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.4f", b - a }'; }
# median of the numbers given as arguments
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# ratio A B with 2 decimals
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "inf"; else printf "%.2f", a / b }'; }
# met VALUE OP GOAL: "yes" or "no"
met() { awk -v v="$1" -v g="$3" -v op="$2" 'BEGIN { r = (op == ">=") ? v >= g : v <= g; print r ? "yes" : "no" }'; }
