#!/usr/bin/env bash
# it_slow_start.sh: a shm mesh comes up though one dataplane's EAL starts
# longer than the others wait for its links (--timeout): every node makes
# its links' files before EAL starts, so a peer's wait does not cover it
# (perf/ALGORITHMS.md, gaps20: EAL's start is the longest part of a
# dataplane's, and grows with the load).  eal_delay.so delays node 1's
# rte_eal_init by 6 s; the links' wait is 3 s.  Daemons: sluice-run starts
# the ranks once every dataplane is up (embedded, the slow rank would also
# be late for the ranks' bootstrap, which --timeout bounds too).
# usage: it_slow_start.sh SLUICE_RUN IT_ALLREDUCE EAL_DELAY_SO
set -u
run=$1 prog=$2 shim=$3

out=$(LD_PRELOAD="$shim" SLUICE_TEST_EAL_DELAY=1:6000 timeout 120 "$run" -n 2 --daemons --timeout 3 -- \
	"$prog" 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
	echo "$out" | tail -20
	echo "FAIL: it_slow_start: a 2-rank shm mesh with node 1's EAL 6 s slow and a 3 s link wait exited $rc"
	exit 1
fi
echo "it_slow_start: the mesh came up past node 1's 6 s EAL start with a 3 s link wait"
