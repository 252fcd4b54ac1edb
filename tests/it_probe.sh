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
# usage: it_probe.sh SLUICE_RUN SLUICE_PERF
set -u
run=$1 perf=$2
log=$(mktemp /tmp/it-probe.XXXXXX)
trap 'rm -f "$log"' EXIT
fail() { echo "it_probe: $*; log:" >&2; cat "$log" >&2; exit 1; }

run_opts=() # more sluice-run options
ranks() { # ENV... : run sluice-perf on 3 ranks, one 8-byte all-reduce, TUNING logs into $log
	env SLUICE_DEBUG=INFO SLUICE_DEBUG_SUBSYS=TUNING "$@" \
		"$run" -n 3 "${run_opts[@]}" --timeout 20 -- "$perf" -b 8 -e 8 -n 1 -w 0 >"$log" 2>&1
}

ranks || fail "a run with the probe failed"
figures=$(grep -o 'links measured: latency [0-9.]* us, [0-9.]* GB/s' "$log")
[ "$(echo "$figures" | grep -c .)" = 3 ] || fail "expected a measurement logged by each of 3 ranks"
[ "$(echo "$figures" | sort -u | grep -c .)" = 1 ] || fail "the ranks measured different figures: $figures"
echo "it_probe: every rank: $(echo "$figures" | head -1)"

for off in "SLUICE_LINK_PROBE=0" "SLUICE_LINK_LATENCY_US=20 SLUICE_LINK_GBPS=3"; do
	# shellcheck disable=SC2086 # two assignments in one word, split on purpose
	ranks $off || fail "a run with $off failed"
	! grep -q 'links measured' "$log" || fail "$off still measured the links"
	grep -q 'predicted us' "$log" || fail "$off: the planner logged no choice"
done

# SLUICE_DEBUG_SUBSYS alone asks for that subsystem's INFO lines: the choices are logged
ranks SLUICE_DEBUG= SLUICE_LINK_PROBE=0 || fail "a run with SLUICE_DEBUG_SUBSYS=TUNING alone failed"
grep -q 'predicted us' "$log" || fail "SLUICE_DEBUG_SUBSYS=TUNING without SLUICE_DEBUG logged no choice"
! grep ' INFO ' "$log" | grep -qv ' INFO TUNING ' || fail "SLUICE_DEBUG_SUBSYS=TUNING alone logged other subsystems"
echo "it_probe: SLUICE_DEBUG_SUBSYS=TUNING alone logs the planner's choices"

# packets of 4 KiB: 10000 runs as 3 of them, 1M as 64, 0 (a direct all-reduce's) as the default 32
run_opts=(--payload 4096)
for c in "8K:8192 bytes (SLUICE_CHUNK_SIZE)" "10000:12288 bytes (asked 10000, SLUICE_CHUNK_SIZE)" \
	"1M:262144 bytes (asked 1048576, SLUICE_CHUNK_SIZE)" ":131072 bytes (the dataplane's default)"; do
	ranks SLUICE_LINK_PROBE=0 SLUICE_ALGO=direct SLUICE_CHUNK_SIZE="${c%%:*}" ||
		fail "a run with SLUICE_CHUNK_SIZE=${c%%:*} failed"
	shown=$(grep -o 'chunk .* (predicted' "$log" | sort -u)
	[ "$shown" = "chunk ${c#*:} (predicted" ] &&
		[ "$(grep -F "$shown" "$log" | grep -o ' \[[0-9]\] ' | sort -u | grep -c .)" = 3 ] ||
		fail "SLUICE_CHUNK_SIZE=${c%%:*} on 4 KiB packets: want \"chunk ${c#*:}\" from each of 3 ranks"
done
run_opts=()
echo "it_probe: the TUNING line shows the chunk the dataplane runs, and the one asked for where they differ"

ranks SLUICE_LINK_PROBE=yes && fail "SLUICE_LINK_PROBE=yes was accepted"
grep -q 'SLUICE_LINK_PROBE="yes" is not valid' "$log" || fail "SLUICE_LINK_PROBE=yes: no message saying why"
echo "it_probe: SLUICE_LINK_PROBE=0 and given figures skip it; a bad value is refused"
