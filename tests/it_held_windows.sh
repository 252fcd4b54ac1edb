#!/usr/bin/env bash
# it_held_windows.sh: 3 embedded ranks gather 4 MiB 300 times over shm.  The
# leaves run ahead, the root's stash fills and holds their windows, then
# reopens them.  A leaf whose next message waits on a held window must not
# take the root for dead: an embedded pass timed at its application's clock
# read saw that wait start after its own clock, the dead check wrapped, and
# the flow died within a second ("nothing was acknowledged for 30.0 s", 6
# runs of 6).  Skips (77) when no window was held: then it tests nothing.
# usage: it_held_windows.sh SLUICE_RUN SLUICE_PERF
set -u
run=$1 perf=$2
out=$("$run" -n 3 --embedded -v --timeout 60 -- "$perf" -C gather -b 4M -e 4M -n 300 -w 10 -c 1 2>&1)
rc=$?
held=$(grep -oE "windows held [0-9]+" <<<"$out" | awk '{s += $3} END {print s + 0}')
echo "it_held_windows: exit $rc, windows held $held"
[ $rc -eq 0 ] || { grep -m3 -E "acknowledged|rror" <<<"$out"; echo "FAIL: the gathers failed"; exit 1; }
[ "$held" -gt 0 ] || { echo "SKIP: no window was held, so none was waited on"; exit 77; }
