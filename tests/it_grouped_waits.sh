#!/usr/bin/env bash
# it_grouped_waits.sh: embedded ranks wait for a grouped send and then for
# its recv.  The first wait tells the dataplane that the recv is still in
# flight, so its engine's thread is not woken only for the second wait to
# park it again (sl_dp_embedded_release): its "parked while the application
# drove" count stays far below one per call.  3 ranks sharing 2 cores
# (SLUICE_YIELD=1): it was about one per three, 40 us a call instead of 6.
# 2 ranks with a core each (SLUICE_YIELD=0), whose engine threads park
# between calls: one per four, 1.7-2.3x the time.  Counters, not timing.
# It also checks that sluice-perf's rows and -J carry the tail (median, p99, max),
# and that sendrecv's in-place columns, a phase it has not, say N/A (null in -J).
# usage: it_grouped_waits.sh SLUICE_RUN SLUICE_PERF RANKS
set -u
run=$1 perf=$2 ranks=$3
calls=4000 # sendrecv has no in-place form: sluice-perf runs only the out-of-place phase
json=$(mktemp); trap 'rm -f "$json"' EXIT
out=$(SLUICE_YIELD=$((ranks > 2)) "$run" -n "$ranks" --embedded -v --timeout 60 -- "$perf" -C sendrecv -b 8 -e 8 -n $calls -w 10 -J "$json" 2>&1)
rc=$?
parks=$(grep -oE "parked while the application drove [0-9]+ times" <<<"$out" | grep -oE "[0-9]+")
echo "it_grouped_waits: exit $rc, parks per dataplane: $(echo $parks) for $calls calls each"
[ $rc -eq 0 ] || { tail -20 <<<"$out"; echo "FAIL: the run failed"; exit 1; }
# The same run checks sluice-perf's tail columns: median <= p99 <= max, in the row and in -J.
tails=$(awk '$1 == 8 { print NF, $14, $15, $16, $10, $17, $18, $19 }' <<<"$out")
read -r nf m1 p1 x1 ip m2 p2 x2 <<<"$tails"
awk -v a="$m1" -v b="$p1" -v c="$x1" -v nf="$nf" 'BEGIN { exit !(nf == 19 && a > 0 && a <= b && b <= c) }' ||
	{ echo "FAIL: the row's out-of-place tail columns (median p99 max) are not ordered: '$tails'"; exit 1; }
[ "$ip $m2 $p2 $x2" = "N/A N/A N/A N/A" ] ||
	{ echo "FAIL: sendrecv's in-place time and tail columns are not N/A: '$tails'"; exit 1; }
python3 -c 'import json, sys; j = json.loads(open(sys.argv[1]).readline())
assert 0 < j["oop_median_us"] <= j["oop_p99_us"] <= j["oop_max_us"], j
assert j["ip_time_us"] is None and j["ip_median_us"] is None, j' "$json" ||
	{ echo "FAIL: -J lacks ordered oop_ median, p99 and max, or has an ip_ figure"; exit 1; }
[ "$(wc -w <<<"$parks")" -eq "$ranks" ] || { echo "FAIL: want $ranks idle lines"; exit 1; }
for p in $parks; do
	if [ "$p" -gt $((calls / 16)) ]; then
		echo "FAIL: a dataplane's engine thread parked $p times in $calls grouped send/recv calls" \
			"(want at most one per 16): the waits woke it between a send and its recv"
		exit 1
	fi
done
