#!/usr/bin/env bash
# it_multipath.sh: two emulated hosts joined by two links (sluice-run --net
# veth --links 2: two veths each, into two bridges); while the all-reduce
# runs, one of host 0's links is cut (ip link set veth1 down).  The
# all-reduce must still complete with exact results (it_allreduce checks
# them), and the dataplanes must have found the cut link's paths dead.
# Skipped (77) without root or iproute2.
# usage: it_multipath.sh SLUICE_RUN IT_ALLREDUCE
set -u
run=$1 prog=$2
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
	echo "it_multipath: needs root and iproute2: skipped"; exit 77
fi
logs=$(mktemp -d /tmp/tp-multipath.XXXXXX)
trap 'rm -rf "$logs"' EXIT

# at most sixteen rounds of every case: several seconds even on a quiet machine, so the cut
# lands mid-run; the ranks stop two rounds after they see the cut's mark (it_allreduce.c),
# so a loaded machine does not run all sixteen (289 s at load 27, near meson's 300)
IT_ALLREDUCE_UNTIL=$logs/cut "$run" --net veth --links 2 -n 2 --timeout 20 --keep-logs "$logs" -- "$prog" 1000003 16 &
pid=$!
# The ranks start once the namespaces, bridges and dataplanes are up: 21-30 s
# after sluice-run at load 18-20, where this waited 30 s; so wait while
# sluice-run lives, up to most of meson's 300 s.
ranks="" deadline=$((SECONDS + 240))
while [ $SECONDS -lt $deadline ] && kill -0 $pid 2>/dev/null; do
	# the ranks are children of sluice-run's worker (its only child), not of sluice-run
	worker=$(pgrep -d, -P $pid)
	[ -n "$worker" ] && ranks=$(pgrep -P "$worker" -x "$(basename "$prog")")
	[ -n "$ranks" ] && break
	sleep 0.1
done
[ -n "$ranks" ] || { echo "it_multipath: the ranks of sluice-run (pid $pid) never started ($SECONDS s)" >&2; wait $pid; exit 1; }
sleep 0.5
if ! ip -n "sl$pid-h0" link set veth1 down; then
	echo "it_multipath: could not cut veth1 in sl$pid-h0" >&2; wait $pid; exit 1
fi
cut_mid_run=0
kill -0 $ranks 2>/dev/null && cut_mid_run=1
touch "$logs/cut"
wait $pid
rc=$?
[ $rc -eq 0 ] || { echo "it_multipath: the all-reduce failed (status $rc) after a link was cut" >&2; exit 1; }
if [ $cut_mid_run -eq 0 ]; then
	echo "it_multipath: the ranks had finished before the cut: the test proved nothing (give them more rounds)" >&2
	exit 1
fi
# Each dataplane ends with the cut link's 4 paths (sluiced's default --paths)
# dead: more deaths than revivals by at least 4 (noise may kill and revive others).
for i in 0 1; do
	log="$logs/sluiced-$i.log"
	moved=$(grep -o 'moved off dead paths [0-9]*' "$log" | awk '{print $5}')
	died=$(grep -o 'paths died [0-9]*' "$log" | awk '{print $3}')
	revived=$(grep -o 'paths died [0-9]* revived [0-9]*' "$log" | awk '{print $5}')
	echo "it_multipath: node $i: paths died ${died:-?} revived ${revived:-?}, packets moved off them ${moved:-?}"
	if [ -z "$died" ] || [ $((died - revived)) -lt 4 ]; then
		echo "it_multipath: node $i did not find the cut link's 4 paths dead; its log:" >&2
		cat "$log" >&2
		exit 1
	fi
done
