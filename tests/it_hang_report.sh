#!/usr/bin/env bash
# it_hang_report.sh: sluice-run --hang-report: ranks that outlive it (here `sleep`) are reported,
# not waited for: each rank's and dataplane's state (threads; gdb's stacks when gdb is there),
# then the dataplanes' counters as they stop, and exit status 124.
# usage: it_hang_report.sh SLUICE_RUN
set -u
run=$1
log=$(mktemp /tmp/it-hang.XXXXXX)
trap 'rm -f "$log"' EXIT
start=$SECONDS
"$run" -n 2 --daemons -v --hang-report 2 -- sleep 100 >"$log" 2>&1
rc=$?
took=$((SECONDS - start))
fail() { echo "it_hang_report: FAIL: $*; sluice-run said:" >&2; cat "$log" >&2; exit 1; }
[ $rc = 124 ] || fail "sluice-run exited with $rc after $took s, not 124"
[ $took -lt 90 ] || fail "sluice-run took $took s: it waited for the ranks"
for who in "rank 0" "rank 1" "sluiced 0" "sluiced 1"; do
	grep -q "^\[$who\] pid [0-9]*: " "$log" || fail "no state for $who"
	grep -q "^\[$who\]   thread " "$log" || fail "no threads for $who"
	if command -v gdb >/dev/null; then
		grep -q "^\[$who\]   #0 " "$log" || fail "no stack for $who (gdb is there)"
	fi
done
for i in 0 1; do
	grep -q "sluiced node $i: collectives posted" "$log" || fail "no counters from dataplane $i"
done
echo "it_hang_report: ok ($took s)"
