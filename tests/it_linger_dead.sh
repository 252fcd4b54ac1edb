#!/usr/bin/env bash
# it_linger_dead.sh: rank 2 of 3 is killed while rank 1's small sends to
# it linger behind those to rank 0 (it_linger_dead.c says what each rank
# checks).  sluice-run's status is rank 2's (killed); the test passes when
# ranks 0 and 1 both saw a failure naming rank 2 in time and destroyed
# their communicator, which waits for every lingering call to end.
# usage: it_linger_dead.sh SLUICE_RUN IT_LINGER_DEAD MODE
set -u
run=$1 prog=$2 mode=$3
out=$(timeout 120 "$run" -n 3 "--$mode" --timeout 3 -- "$prog" 2>&1)
rc=$?
grep "^it_linger_dead" <<<"$out"
[ $rc -ne 124 ] || { echo "FAIL: it hung (lingering calls never ended?)"; exit 1; }
for r in 0 1; do
	grep -q "^it_linger_dead: rank $r ok" <<<"$out" && grep -q "^it_linger_dead: rank $r destroyed" <<<"$out" ||
		{ echo "FAIL: rank $r (sluice-run exited $rc); log:"; tail -20 <<<"$out"; exit 1; }
done
