#!/usr/bin/env bash
# trace-overhead.sh: what sluice-trace costs the dataplane.  Two sluiced
# dataplanes run sluice-perf all-reduce, alternating rounds with no tracer
# attached and with `sluice-trace capture` attached (headers only, written
# to a pcapng file), and optionally rounds on a BASELINE build made without
# the trace taps; prints the median busbw of each and the ratios.  Rounds
# alternate because these machines are shared and drift.
set -u

usage() {
	cat <<EOF
usage: trace-overhead.sh [options] BUILD_DIR [BASELINE_BUILD_DIR]
  -r N     rounds per mode (default 5)
  -s SIZE  message size (default 16M)
  -n N     timed iterations per round (default 20)
EOF
}

rounds=5 size=16M iters=20
while getopts "r:s:n:h" opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	s) size=$OPTARG ;;
	n) iters=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { usage >&2; exit 2; }
build=$1 base=${2:-}
for b in "$build" ${base:+"$base"}; do
	[ -x "$b/dataplane/sluiced" ] && [ -x "$b/perf/sluice-perf" ] ||
		{ echo "trace-overhead: $b has no sluiced or sluice-perf: build it first" >&2; exit 2; }
done
[ -x "$build/ctl/sluice-trace" ] || { echo "trace-overhead: $build has no sluice-trace" >&2; exit 2; }

d=$(mktemp -d /tmp/trace-overhead.XXXXXX)
pids=()
stop_all() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	pids=()
}
trap 'stop_all; rm -rf "$d"' EXIT

# One round: fresh dataplanes from build $1, tracer attached when $2 = 1; prints busbw (GB/s).
round() {
	local b=$1 traced=$2 port=$((10000 + RANDOM % 20000)) ranks=() # below the ephemeral ports
	rm -f "$d"/*.sock "$d"/ready
	for i in 0 1; do
		"$b/dataplane/sluiced" --node $i --nodes 2 --memif-dir "$d" --engine-cpu $i --socket "$d/n$i.sock" \
			--quiet >"$d/dp$i.log" 2>&1 &
		pids+=($!)
	done
	for i in 0 1; do
		for ((t = 0; t < 600; t++)); do [ -S "$d/n$i.sock" ] && break; sleep 0.05; done
	done
	if [ "$traced" = 1 ]; then
		"$build/ctl/sluice-trace" capture --socket "$d/n0.sock" --socket "$d/n1.sock" -w "$d/cap.pcapng" \
			--ready "$d/ready" 2>"$d/trace.log" &
		pids+=($!)
		for ((t = 0; t < 200; t++)); do [ -e "$d/ready" ] && break; sleep 0.05; done
	fi
	for i in 0 1; do
		SLUICE_RANK=$i SLUICE_WORLD_SIZE=2 SLUICE_ROOT=127.0.0.1:$port SLUICE_SOCKET=$d/n$i.sock \
			"$b/perf/sluice-perf" -b "$size" -e "$size" -n "$iters" -w 3 >"$d/rank$i.log" 2>&1 &
		ranks+=($!)
	done
	for p in "${ranks[@]}"; do wait "$p"; done
	stop_all
	[ "$traced" = 1 ] && grep -h "dropped in the trace rings" "$d/trace.log" >>"$d/drops.log"
	sed -n 's/^# Avg bus bandwidth *: *//p' "$d/rank0.log"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print NR ? (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) : "nan" }'; }

for ((r = 0; r < rounds; r++)); do
	round "$build" 0 >>"$d/detached.txt"
	round "$build" 1 >>"$d/attached.txt"
	[ -n "$base" ] && round "$base" 0 >>"$d/baseline.txt"
done
det=$(median <"$d/detached.txt") att=$(median <"$d/attached.txt")
echo "all-reduce $size, 2 ranks, $rounds rounds per mode, median busbw (GB/s):"
echo "  tracer detached:              $det   (rounds: $(tr '\n' ' ' <"$d/detached.txt"))"
echo "  tracer attached, headers only: $att   (rounds: $(tr '\n' ' ' <"$d/attached.txt"))"
awk -v a="$att" -v b="$det" 'BEGIN { printf "  attached / detached:          %.3f\n", a / b }'
if [ -n "$base" ]; then
	bl=$(median <"$d/baseline.txt")
	echo "  built without the taps:       $bl   (rounds: $(tr '\n' ' ' <"$d/baseline.txt"))"
	awk -v a="$det" -v b="$bl" 'BEGIN { printf "  detached / without taps:      %.3f\n", a / b }'
fi
echo "  tracer: $(tail -1 "$d/drops.log")"
