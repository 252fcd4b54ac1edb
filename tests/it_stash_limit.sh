#!/usr/bin/env bash
# it_stash_limit.sh: sluiced --stash-limit MIB and SLUICE_STASH_LIMIT, in a
# daemon and in the embedded dataplane (which reads the variable in the
# rank's process).  Bad values are refused with a message naming the flag
# or variable and a nonzero exit; a valid one reaches the engine, whose
# start-up line says the limit it runs with.  What the limit does is
# test_engine's (a sender past the stash's cap fails its communicator
# there) and it_cross_order's (a legal order runs under a 1 MiB limit).
# usage: it_stash_limit.sh SLUICE_RUN SLUICED SLUICE_PERF
set -u
run=$1 sluiced=$2 perf=$3
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT

# refused: WHAT (for the report), the words the message must hold, then the command
refused() {
	local what=$1 words=$2 out rc
	shift 2
	out=$(timeout 5 "$@" 2>&1)
	rc=$?
	[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q -- "$words" <<<"$out" ||
		{ echo "FAIL: $what: exit $rc, want a refusal naming '$words'; output:"; tail -5 <<<"$out"; exit 1; }
	echo "it_stash_limit: $what refused: $(grep -m1 -- "$words" <<<"$out")"
}
# (its own socket: a sluiced that took the value would start, and must not take a shared one)
refused "sluiced --stash-limit 0" "--stash-limit" "$sluiced" --node 0 --socket "$tmp/n0.sock" --stash-limit 0
refused "sluiced with SLUICE_STASH_LIMIT=abc" "SLUICE_STASH_LIMIT" \
	env SLUICE_STASH_LIMIT=abc "$sluiced" --node 0 --socket "$tmp/n0.sock"
refused "embedded with SLUICE_STASH_LIMIT=abc" "SLUICE_STASH_LIMIT" \
	env SLUICE_STASH_LIMIT=abc "$run" -n 1 --embedded --timeout 10 -- "$perf" -b 8 -e 8 -n 1 -w 0

# limit MODE [ENV...]: the limit in MiB that each of a 2-rank job's engines says it runs with
limit() {
	local mode=$1 out rc
	shift
	out=$(env "$@" timeout 60 "$run" -n 2 -v "--$mode" --timeout 20 -- "$perf" -b 8 -e 8 -n 1 -w 0 2>&1)
	rc=$?
	[ $rc -eq 0 ] || { echo "FAIL: $mode, $*: exit $rc; log:" >&2; tail -20 <<<"$out" >&2; exit 1; }
	grep -o "stash limit [0-9]* MiB" <<<"$out" | awk '{print $3}' | sort -u | tr '\n' ' '
}
# want MODE WANT [ENV...]: both engines say WANT MiB
want() {
	local mode=$1 want=$2 got
	shift 2
	got=$(limit "$mode" "$@") || exit 1
	[ "$got" = "$want " ] || { echo "FAIL: $mode, $*: engines say stash limit '$got' MiB, want $want"; exit 1; }
	echo "it_stash_limit: $mode${*:+, $*}: stash limit $want MiB"
}
# the flag, through a sluiced that sluice-run starts
printf '#!/bin/sh\nexec "%s" --stash-limit 3 "$@"\n' "$sluiced" >"$tmp/sluiced" && chmod +x "$tmp/sluiced"
want daemons 3 SLUICED="$tmp/sluiced"
want daemons 5 SLUICE_STASH_LIMIT=5
want embedded 7 SLUICE_STASH_LIMIT=7
# the default: a quarter of memory, at least 256 MiB (dp.h DP_STASH_LIMIT_FLOOR)
quarter=$(awk '/^MemTotal:/ {q = int($2 / 4096); print q < 256 ? 256 : q}' /proc/meminfo)
want embedded "$quarter"
echo "it_stash_limit: ok"
