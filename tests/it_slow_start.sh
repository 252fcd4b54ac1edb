#!/usr/bin/env bash
# it_slow_start.sh: a shm mesh comes up though one dataplane's EAL starts
# longer than the others wait for its links (--timeout): every node makes
# its links' files before EAL starts, so a peer's wait does not cover it
# (perf/ALGORITHMS.md, gaps20: EAL's start is the longest part of a
# dataplane's, and grows with the load).  eal_delay.so delays node 1's
# rte_eal_init by 4.5 s; the links' wait is 3 s.  Daemons: sluice-run starts
# the ranks once every dataplane is up (embedded, the slow rank would also
# be late for the ranks' bootstrap, which --timeout bounds too).
# usage: it_slow_start.sh SLUICE_RUN SLUICED IT_ALLREDUCE EAL_DELAY_SO
set -u
run=$1 sluiced=$2 prog=$3 shim=$4

# The shim goes into the sluiced processes alone (SLUICED: sluice-run's
# daemon), and in a sanitizer build behind the sanitizer's runtime, which
# must be the first library a sanitized program loads.
wrap=$(mktemp -d /tmp/it-slow-start.XXXXXX)
trap 'rm -rf "$wrap"' EXIT
asan=$(ldd "$shim" | awk '$1 ~ /^libasan/ {print $3}')
printf '#!/bin/sh\nLD_PRELOAD="%s" exec "%s" "$@"\n' "${asan:+$asan }$shim" "$sluiced" >"$wrap/sluiced"
chmod +x "$wrap/sluiced"

out=$(SLUICED="$wrap/sluiced" SLUICE_TEST_EAL_DELAY=1:4500 timeout 120 "$run" -n 2 --daemons --timeout 3 -- \
	"$prog" 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
	echo "$out" | tail -20
	echo "FAIL: it_slow_start: a 2-rank shm mesh with node 1's EAL 4.5 s slow and a 3 s link wait exited $rc"
	exit 1
fi
echo "it_slow_start: the mesh came up past node 1's 4.5 s EAL start with a 3 s link wait"
