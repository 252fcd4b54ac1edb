#!/usr/bin/env bash
# loss-busbw.sh: all-reduce bus bandwidth on emulated hosts (sluice-run --net
# veth, a tbf rate limit on every link) with 0.1% and 1% of frames dropped by
# the fault injector, against the same run without loss: median busbw of
# interleaved repetitions and the ratios the issue asks about (>= 0.95 at
# 0.1%, >= 0.80 at 1%), and the best run of each (on a shared machine the
# best is what the stack can do; the median what it did).  A benchmark, not
# a test: it reports, it does not judge.
# usage: perf/loss-busbw.sh BUILD_DIR [-n RANKS] [-r REPS] [-s SIZE] [--rate R] [--cc none|swift]
set -u
build=${1:?usage: loss-busbw.sh BUILD_DIR [-n RANKS] [-r REPS] [-s SIZE] [--rate R] [--cc CC]}
shift
n=2 reps=5 size=4M rate=2gbit cc=swift
while [ $# -gt 0 ]; do
	case "$1" in
	-n) n=$2; shift 2 ;;
	-r) reps=$2; shift 2 ;;
	-s) size=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--cc) cc=$2; shift 2 ;;
	*) echo "loss-busbw: unknown option '$1'" >&2; exit 2 ;;
	esac
done
run=$build/dataplane/sluice-run perf=$build/perf/sluice-perf
[ -x "$run" ] && [ -x "$perf" ] || { echo "loss-busbw: build $build first" >&2; exit 2; }

losses=(0 0.001 0.01)
declare -A got
for ((r = 0; r < reps; r++)); do
	for loss in "${losses[@]}"; do
		spec=""
		[ "$loss" != 0 ] && spec="drop:$loss,seed:$((r + 1))"
		# column 8: out-of-place busbw (GB/s) of the one size
		bw=$(SLUICE_FAULT=$spec "$run" -n "$n" --net veth --rate "$rate" --cc "$cc" --timeout 60 -- \
			"$perf" -b "$size" -e "$size" -n 20 -w 3 2>/dev/null | awk '!/^#/ && NF >= 8 { print $8; exit }')
		got[$loss]="${got[$loss]:-} ${bw:-fail}"
	done
done

median() { tr ' ' '\n' | grep -v '^$' | grep -v fail | sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "fail" }'; }
best() { tr ' ' '\n' | grep -v '^$' | grep -v fail | sort -g | tail -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
echo "# all-reduce $size, $n ranks on veth hosts, links at $rate, cc $cc, $reps runs each (GB/s busbw)"
base=$(echo "${got[0]}" | median) base_best=$(echo "${got[0]}" | best)
for loss in "${losses[@]}"; do
	m=$(echo "${got[$loss]}" | median) b=$(echo "${got[$loss]}" | best)
	printf "loss %-6s median %-6s (x%-5s of lossless)  best %-6s (x%-5s)  runs:%s\n" "$loss" \
		"$m" "$(ratio "$m" "$base")" "$b" "$(ratio "$b" "$base_best")" "${got[$loss]}"
done
