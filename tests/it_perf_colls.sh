#!/usr/bin/env bash
# it_perf_colls.sh: sluice-perf reaches every collective of sluice.h (-C),
# each checked (-c 1: no wrong element) on 2 ranks over real dataplanes,
# with a row per size and the collective's name in the -J output; each
# waited for call by call (-z 1) and with calls in flight together (-z 0).
# usage: it_perf_colls.sh SLUICE_RUN SLUICE_PERF
set -u
run=$1 perf=$2
d=$(mktemp -d /tmp/it-perf-colls.XXXXXX)
trap 'rm -rf "$d"' EXIT
fail() { echo "it_perf_colls: FAIL: $*; output:" >&2; cat "$d/out" >&2; exit 1; }

# sluice.h's collectives: all-reduce ... scatter, send/recv (grouped), all-to-allv, barrier
for z in 1 0; do
for coll in all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv alltoallv barrier; do
	"$run" -n 2 --timeout 20 -- "$perf" -C "$coll" -z $z -b 8 -e 4K -f 8 -n 20 -w 1 -c 1 -J "$d/json" >"$d/out" 2>&1 ||
		fail "sluice-perf -C $coll -z $z exited $?"
	grep -q '^# Out of bounds values : 0 OK' "$d/out" || fail "-C $coll -z $z: results not checked, or wrong"
	rows=$(grep "\"coll\":\"$coll\"" "$d/json" | grep -c "\"blocking\":$([ $z = 1 ] && echo true || echo false)")
	want=4 # 8, 64, 512 and 4096 bytes
	[ "$coll" = barrier ] && want=1 # moves no bytes: one row
	[ "$rows" = "$want" ] || fail "-C $coll -z $z: $rows JSON rows naming it, want $want"
	echo "it_perf_colls: -C $coll -z $z: $rows row(s), 0 wrong"
done
done
