#!/usr/bin/env bash
# it_perf_colls.sh: sluice-perf reaches every collective of sluice.h (-C),
# each checked (-c 1: no wrong element) on 2 ranks over real dataplanes,
# with a row per size and the collective's name in the -J output; each
# waited for call by call (-z 1) and with calls in flight together (-z 0);
# the collectives without an in-place form (sendrecv, alltoallv, barrier) run
# no in-place phase: its JSON fields are null, every other's a number;
# -d all -o all: a checked table for each datatype and op (all-reduce), or
# each datatype (all-gather: no op), its JSON rows naming both.
# The 22 runs of the first part share one job of two daemons (each rank runs
# them in turn, this script's `steps`): started apart, embedded, their
# dataplanes' start-ups took 20 of its 22 s.
# usage: it_perf_colls.sh SLUICE_RUN SLUICE_PERF
set -u
colls="all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv alltoallv barrier"
if [ "$1" = steps ]; then # steps SLUICE_PERF DIR: one rank's runs, each one's output in DIR, the first failure ends them
	for z in 1 0; do
		for coll in $colls; do
			f="$3/$coll.$z"
			"$2" -C "$coll" -z $z -b 8 -e 4K -f 8 -n 20 -w 1 -c 1 -J "$f.json" >"$f.out$SLUICE_RANK" 2>&1 ||
				{ echo "rank $SLUICE_RANK: sluice-perf -C $coll -z $z exited $?" >"$3/failed$SLUICE_RANK"; exit 1; }
		done
	done
	exit 0
fi
run=$1 perf=$2
d=$(mktemp -d /tmp/it-perf-colls.XXXXXX)
trap 'rm -rf "$d"' EXIT
fail() { echo "it_perf_colls: FAIL: $*; output:" >&2; cat "$d/out" >&2; exit 1; }

# sluice.h's collectives: all-reduce ... scatter, send/recv (grouped), all-to-allv, barrier
"$run" -n 2 --daemons --timeout 20 -- bash "$0" steps "$perf" "$d" >"$d/out" 2>&1 ||
	{ cat "$d"/failed* "$d"/*.out* >>"$d/out" 2>/dev/null; fail "the job of every collective's runs failed"; }
for z in 1 0; do
for coll in $colls; do
	cat "$d/$coll.$z.out"* >"$d/out"
	grep -q '^# Out of bounds values : 0 OK' "$d/out" || fail "-C $coll -z $z: results not checked, or wrong"
	rows=$(grep "\"coll\":\"$coll\"" "$d/$coll.$z.json" | grep -c "\"blocking\":$([ $z = 1 ] && echo true || echo false)")
	want=4 # 8, 64, 512 and 4096 bytes
	[ "$coll" = barrier ] && want=1 # moves no bytes: one row
	[ "$rows" = "$want" ] || fail "-C $coll -z $z: $rows JSON rows naming it, want $want"
	case $coll in sendrecv|alltoallv|barrier) want_null=$want ;; *) want_null=0 ;; esac
	nulls=$(grep -c '"ip_time_us":null' "$d/$coll.$z.json")
	[ "$nulls" = "$want_null" ] || fail "-C $coll -z $z: $nulls rows with no in-place time, want $want_null"
	echo "it_perf_colls: -C $coll -z $z: $rows row(s), 0 wrong"
done
done

# all-reduce: 12 datatypes x 5 ops, less avg on the 6 integer types (skipped with a note), a row each
for c in "all_reduce 54 6" "all_gather 12 0"; do
	read -r coll want_tables want_skipped <<<"$c"
	"$run" -n 2 --timeout 20 -- "$perf" -C "$coll" -d all -o all -b 64 -e 64 -n 2 -w 0 -c 1 -J "$d/json" \
		>"$d/out" 2>&1 || fail "sluice-perf -C $coll -d all -o all exited $?"
	tables=$(grep -c '^# Out of bounds values : 0 OK' "$d/out")
	skipped=$(grep -c '^# skipped [a-z0-9]* avg: avg on an integer type' "$d/out")
	pairs=$(python3 -c 'import json, sys; print(len({(j["type"], j["redop"]) for j in map(json.loads, open(sys.argv[1]))}))' \
		"$d/json") || fail "-C $coll -d all -o all: the JSON does not parse"
	rows=$(grep -c . "$d/json")
	[ "$tables $skipped $pairs $rows" = "$want_tables $want_skipped $want_tables $want_tables" ] ||
		fail "-C $coll -d all -o all: $tables tables checked, $skipped skipped, $pairs datatype and op pairs in $rows JSON rows; want $want_tables, $want_skipped, $want_tables in $want_tables"
	echo "it_perf_colls: -C $coll -d all -o all: $tables tables, 0 wrong, $skipped skipped"
done
