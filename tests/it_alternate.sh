#!/usr/bin/env bash
# it_alternate.sh: 2 embedded ranks make a 512 KiB and a 64 KiB in-place
# all-to-all in turn, 120 rounds (sluice-alternate).  Each snapshots its
# input into memory the engine keeps; with one spare buffer for all calls,
# the small one took fresh memory every round (perf/ALGORITHMS.md, spare
# (session 17)).  Each engine may allocate a few buffers at first, not one
# a round; the tool must also run and print its rows.
# usage: it_alternate.sh SLUICE_RUN SLUICE_ALTERNATE
set -u
run=$1 alt=$2
out=$("$run" -n 2 --embedded -v --timeout 60 -- "$alt" -n 100 -w 20 -S alltoall:512K alltoall:64K 2>&1)
rc=$?
allocs=$(grep -oE "own buffers allocated [0-9]+" <<<"$out" | awk '{print $4}')
engines=$(wc -w <<<"$allocs")
most=$(tr ' ' '\n' <<<"$allocs" | sort -n | tail -1)
rows=$(grep -cE "^ *alltoall" <<<"$out")
echo "it_alternate: exit $rc, engines $engines, own buffers allocated: $(echo $allocs), rows $rows"
[ $rc -eq 0 ] || { grep -m3 -iE "rror|fail" <<<"$out"; echo "FAIL: sluice-alternate failed"; exit 1; }
[ "$engines" -eq 2 ] || { echo "FAIL: expected 2 engines' counters (sluice-run -v), found $engines"; exit 1; }
[ "$most" -le 8 ] || { echo "FAIL: an engine allocated $most own buffers in 120 rounds; it should keep them"; exit 1; }
[ "$rows" -eq 2 ] || { echo "$out" | tail -5; echo "FAIL: expected a row per call, found $rows"; exit 1; }
