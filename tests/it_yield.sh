#!/usr/bin/env bash
# it_yield.sh: embedded ranks that share cores give them away in their waits
# whenever a pass finds no work (sluiced --yield-idle), which sluice-run
# turns on when ranks outnumber cores; SLUICE_YIELD=1 or 0 decides instead.
# The embedded dataplanes' -v counters say how often each rank's waits
# yielded.  Every run must also complete its calls.
# usage: it_yield.sh SLUICE_RUN IT_ALLREDUCE
set -u
run=$1 prog=$2

name=it_yield
. "$(dirname "$0")/idle_lines.sh"
yielded='embedded waits yielded [1-9][0-9]* times' never='embedded waits yielded 0 times'
# three ranks: on fewer than three cores they share, and sluice-run has them yield
if [ "$(nproc)" -lt 3 ]; then expect_idle_lines 3 "$yielded" -n 3 --embedded; else expect_idle_lines 3 "$never" -n 3 --embedded; fi
SLUICE_YIELD=1 expect_idle_lines 2 "$yielded" -n 2 --embedded
SLUICE_YIELD=0 expect_idle_lines 3 "$never" -n 3 --embedded
