#!/usr/bin/env bash
# fairness.sh: two jobs sharing one bottleneck.  Four emulated hosts
# (sluice-run --net veth, every link limited by a tbf queue); job A is an
# all-reduce between hosts 0 and 1, job B one between hosts 0 and 3, each
# its own communicator (own ranks, own bootstrap) on the same dataplanes, so
# both cross host 0's link, both ways.  Host 2 carries nothing: sluice-run
# puts host i's dataplane and rank on core i mod 2, so hosts 1 and 3 share
# a core alike and the scheduler favours neither job.  With host 2 as B's
# peer, B's processes shared core 0 with host 0 and A's peer had core 1:
# one job (mostly A) got 0.01 to 0.25 of the link, Jain 0.51 to 0.89, with
# or without congestion control; that measured placement, not the transport.
# Both stream all-reduces
# (sluice-stream) and are measured over the same wall-clock window; prints
# each job's busbw, their sum against the link rate, and Jain's fairness
# index (sum x)^2 / (n sum x^2): 1 is an even split, 0.5 one job starved.
# Job A first runs alone over the same links, in a window of its own, and
# the sum is also printed against it: with every uplink limited both of host
# 0's directions are bottlenecks and the two jobs together move what one job
# moves alone (0.82 of the link with Swift, 0.93 without: a flow's delay
# counts its ACKs' wait behind the other direction's data; perf/ALGORITHMS.md,
# fair34), so against the link alone the ratio mixed that with sharing.
# A benchmark, not a test: it reports, it does not judge.
# usage: perf/fairness.sh BUILD_DIR [--rate R] [--cc none|swift] [--cc-target US] [-s SIZE] [-t SECS]
set -u
. "$(dirname "$0")/rate.sh"
build=${1:?usage: fairness.sh BUILD_DIR [--rate R] [--cc CC] [--cc-target US] [-s SIZE] [-t SECS]}
shift
rate=500mbit cc=swift target=1000 size=1048576 secs=10  # target: sluice-run's veth default
while [ $# -gt 0 ]; do
	case "$1" in
	--rate) rate=$2; shift 2 ;;
	--cc) cc=$2; shift 2 ;;
	--cc-target) target=$2; shift 2 ;;
	-s) size=$2; shift 2 ;;
	-t) secs=$2; shift 2 ;;
	*) echo "fairness: unknown option '$1'" >&2; exit 2 ;;
	esac
done
run=$build/dataplane/sluice-run stream=$build/perf/sluice-stream
[ -x "$run" ] && [ -x "$stream" ] || { echo "fairness: build $build first" >&2; exit 2; }
out=$(mktemp -d /tmp/sl-fair.XXXXXX)
trap 'rm -rf "$out"' EXIT

# Each sluice-run rank is one host's launcher: host 0 starts both jobs'
# rank 0, host 1 job A's rank 1, host 3 job B's.  The window opens 3 s after
# host 0's launcher starts (both jobs meet their peers first) and rank 0 of
# each job keeps it; the other ranks follow their rank 0's stop.  With
# jobs=A host 0 starts job A only and host 3 nothing.
hosts='stream=$1 size=$2 secs=$3 pa=$4 pb=$5 out=$6 jobs=$7
from=$(awk -v t="$(date +%s.%N)" "BEGIN { printf \"%.3f\", t + 3 }")
to=$(awk -v f="$from" -v s="$secs" "BEGIN { printf \"%.3f\", f + s }")
job() { SLUICE_WORLD_SIZE=2 SLUICE_RANK=$1 SLUICE_ROOT=127.0.0.1:$2 "$stream" -s "$size" -F "$from" -T "$to"; }
case $SLUICE_RANK$jobs in
0A) job 0 "$pa" >"$out/alone" ;;
0AB) job 0 "$pa" >"$out/A" & a=$!; job 0 "$pb" >"$out/B" & b=$!; wait $a && wait $b ;;
1*) job 1 "$pa" ;;
3AB) job 1 "$pb" ;;
esac'
hosts_run() { # jobs log
	local pa=$(( 10000 + RANDOM % 20000 )) # below the ephemeral ports
	"$run" -n 4 --net veth --rate "$rate" --cc "$cc" --cc-target "$target" -v --timeout 60 -- \
		bash -c "$hosts" _ "$stream" "$size" "$secs" "$pa" "$((pa + 1))" "$out" "$1" >"$out/$2" 2>&1
}
hosts_run A log-alone
rc_alone=$?
hosts_run AB log
rc=$?

bps=$(rate_bps "$rate")
echo "# two 2-rank all-reduce jobs through host 0's link, 4 veth hosts (2 idle), links at $rate, cc $cc, target $target us," \
	"$size B calls, ${secs} s window (sluice-run status $rc; job A alone before, status $rc_alone)"
grep -h '^#' "$out/alone" 2>/dev/null | sed "s/^# /# job A alone: /"
for j in A B; do
	grep -h '^#' "$out/$j" 2>/dev/null | sed "s/^# /# job $j: /"
done
alone=$(awk '/^busbw_mbit/ { print $2 }' "$out/alone" 2>/dev/null)
awk -v bps="$bps" -v alone="${alone:-0}" '/^busbw_mbit/ { x[++n] = $2; s += $2; q += $2 * $2 }
	END {
		if (n != 2) { print "fairness: a job reported no rate (see the dataplanes log below)"; exit 1 }
		if (alone > 0) printf "job A alone %.1f Mbit/s (%.2f of the link)\n", alone, alone * 1e6 / bps
		else print "job A alone reported no rate (not compared)"
		printf "job A %.1f Mbit/s, job B %.1f Mbit/s, sum %.1f Mbit/s (%.2f of the link", x[1], x[2], s, s * 1e6 / bps
		if (alone > 0) printf ", %.2f of job A alone", s / alone
		printf ")\nJain fairness index %.3f\n", s * s / (n * q) }' "$out/A" "$out/B" || { cat "$out/log"; exit 1; }
grep -h "collectives posted" "$out/log" | sed 's/^/# /'
exit $rc
