#!/usr/bin/env bash
# it_yield.sh: embedded ranks that share cores give them away in their waits
# whenever a pass finds no work (sluiced --yield-idle), which sluice-run
# turns on when ranks outnumber cores; SLUICE_YIELD=1 or 0 decides instead.
# The embedded dataplanes' -v counters say how often each rank's waits
# yielded.  Every run must also complete its calls.
# usage: it_yield.sh SLUICE_RUN IT_ALLREDUCE
set -u
run=$1 prog=$2

log=$(mktemp /tmp/sl-yield.XXXXXX)
trap 'rm -f "$log"' EXIT
check() { # ranks, count of idle lines wanted, their pattern
	local n=$1 want=$2 pattern=$3 got
	if ! "$run" -n "$n" --embedded -v --timeout 20 -- "$prog" >"$log" 2>&1; then
		echo "it_yield: the $n-rank run (SLUICE_YIELD=${SLUICE_YIELD-unset}) failed; log:" >&2
		cat "$log" >&2
		exit 1
	fi
	grep 'idle:' "$log"
	got=$(grep -cE "$pattern" "$log")
	if [ "$got" -ne "$want" ]; then
		echo "it_yield: $n ranks, SLUICE_YIELD=${SLUICE_YIELD-unset}: $got rank(s) match '$pattern', want $want" >&2
		exit 1
	fi
}
yielded='embedded waits yielded [1-9][0-9]* times' never='embedded waits yielded 0 times'
# three ranks: on fewer than three cores they share, and sluice-run has them yield
if [ "$(nproc)" -lt 3 ]; then check 3 3 "$yielded"; else check 3 3 "$never"; fi
SLUICE_YIELD=1 check 2 2 "$yielded"
SLUICE_YIELD=0 check 3 3 "$never"
