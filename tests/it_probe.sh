#!/usr/bin/env bash
# it_probe.sh: the link measurement at communicator creation (ctl/link_probe.c).
# 3 ranks over real dataplanes: every rank logs the measured latency and
# bandwidth under TUNING, and all log the same figures (they plan alike or
# their calls mismatch); with SLUICE_LINK_PROBE=0, or both link variables
# given, nothing is measured and the planner says which figures it used;
# SLUICE_DEBUG_SUBSYS=TUNING alone (no SLUICE_DEBUG) logs the choices too,
# each with the chunk the dataplane runs (whole packets, at most 64) and the
# one asked for where they differ; a bad SLUICE_LINK_PROBE fails
# communicator creation with a message.
# The runs share two jobs of three daemons (the second with 4 KiB packets):
# each rank runs them in turn (this script's `steps`), each with its own
# environment; started apart, embedded, their dataplanes' start-ups took
# most of the test's 31 s.
# usage: it_probe.sh SLUICE_RUN SLUICE_PERF
set -u
if [ "$1" = steps ]; then # steps SLUICE_PERF DIR ENV...: run K (from 0) in ENV number K, its log and status in DIR
	perf=$2 dir=$3 k=0
	shift 3
	for e in "$@"; do
		# shellcheck disable=SC2086 # assignments in one word, split on purpose
		env SLUICE_DEBUG=INFO SLUICE_DEBUG_SUBSYS=TUNING $e "$perf" -b 8 -e 8 -n 1 -w 0 \
			>"$dir/log$k.$SLUICE_RANK" 2>&1
		echo $? >"$dir/rc$k.$SLUICE_RANK"
		k=$((k + 1))
	done
	exit 0
fi
run=$1 perf=$2
d=$(mktemp -d /tmp/it-probe.XXXXXX)
log=$d/log
trap 'rm -rf "$d"' EXIT
fail() { echo "it_probe: $*; log:" >&2; cat "$log" >&2; exit 1; }

# jobs OPTIONS ENV...: one job of 3 ranks with these sluice-run options, run K in ENV number K
jobs() {
	local opts=$1
	shift
	rm -f "$d"/log* "$d"/rc*
	# shellcheck disable=SC2086 # options split on purpose
	"$run" -n 3 --daemons $opts --timeout 20 -- bash "$0" steps "$perf" "$d" "$@" >"$d/job" 2>&1 ||
		{ log=$d/job; fail "the job of runs [$*] failed"; }
}
ranks() { # K: run K's logs (every rank's) into $log; fails where any rank's run failed
	cat "$d/log$1".* >"$log"
	! grep -qv '^0$' "$d/rc$1".*
}

jobs "" "" "SLUICE_LINK_PROBE=0" "SLUICE_LINK_LATENCY_US=20 SLUICE_LINK_GBPS=3" "SLUICE_DEBUG= SLUICE_LINK_PROBE=0" \
	"SLUICE_LINK_PROBE=yes"
ranks 0 || fail "a run with the probe failed"
figures=$(grep -o 'links measured: latency [0-9.]* us, [0-9.]* GB/s' "$log")
[ "$(echo "$figures" | grep -c .)" = 3 ] || fail "expected a measurement logged by each of 3 ranks"
[ "$(echo "$figures" | sort -u | grep -c .)" = 1 ] || fail "the ranks measured different figures: $figures"
echo "it_probe: every rank: $(echo "$figures" | head -1)"

k=1
for off in "SLUICE_LINK_PROBE=0" "SLUICE_LINK_LATENCY_US=20 SLUICE_LINK_GBPS=3"; do
	ranks $k || fail "a run with $off failed"
	k=$((k + 1))
	! grep -q 'links measured' "$log" || fail "$off still measured the links"
	grep -q 'predicted us' "$log" || fail "$off: the planner logged no choice"
done

# SLUICE_DEBUG_SUBSYS alone asks for that subsystem's INFO lines: the choices are logged
ranks 3 || fail "a run with SLUICE_DEBUG_SUBSYS=TUNING alone failed"
grep -q 'predicted us' "$log" || fail "SLUICE_DEBUG_SUBSYS=TUNING without SLUICE_DEBUG logged no choice"
! grep ' INFO ' "$log" | grep -qv ' INFO TUNING ' || fail "SLUICE_DEBUG_SUBSYS=TUNING alone logged other subsystems"
echo "it_probe: SLUICE_DEBUG_SUBSYS=TUNING alone logs the planner's choices"

ranks 4 && fail "SLUICE_LINK_PROBE=yes was accepted"
grep -q 'SLUICE_LINK_PROBE="yes" is not valid' "$log" || fail "SLUICE_LINK_PROBE=yes: no message saying why"
echo "it_probe: SLUICE_LINK_PROBE=0 and given figures skip it; a bad value is refused"

# packets of 4 KiB: 10000 runs as 3 of them, 1M as 64, 0 (a direct all-reduce's) as the default 32
chunks=("8K:8192 bytes (SLUICE_CHUNK_SIZE)" "10000:12288 bytes (asked 10000, SLUICE_CHUNK_SIZE)"
	"1M:262144 bytes (asked 1048576, SLUICE_CHUNK_SIZE)" ":131072 bytes (the dataplane's default)")
envs=()
for c in "${chunks[@]}"; do envs+=("SLUICE_LINK_PROBE=0 SLUICE_ALGO=direct SLUICE_CHUNK_SIZE=${c%%:*}"); done
jobs "--payload 4096" "${envs[@]}"
k=0
for c in "${chunks[@]}"; do
	ranks $k || fail "a run with SLUICE_CHUNK_SIZE=${c%%:*} failed"
	k=$((k + 1))
	shown=$(grep -o 'chunk .* (predicted' "$log" | sort -u)
	[ "$shown" = "chunk ${c#*:} (predicted" ] &&
		[ "$(grep -F "$shown" "$log" | grep -o ' \[[0-9]\] ' | sort -u | grep -c .)" = 3 ] ||
		fail "SLUICE_CHUNK_SIZE=${c%%:*} on 4 KiB packets: want \"chunk ${c#*:}\" from each of 3 ranks"
done
echo "it_probe: the TUNING line shows the chunk the dataplane runs, and the one asked for where they differ"
