#!/usr/bin/env bash
# it_stash_limit.sh: sluiced --stash-limit MIB and SLUICE_STASH_LIMIT, in a
# daemon and in the embedded dataplane (which reads the variable in the
# rank's process).  Bad values are refused with a message naming the flag
# or variable and a nonzero exit; a valid one reaches the engine: a job
# whose legal order stashes 4 MiB past the stash's cap (it_stash_limit.c)
# fails under a limit of 1 MiB, saying so, and runs under the default.
# usage: it_stash_limit.sh SLUICE_RUN SLUICED IT_STASH_LIMIT
set -u
run=$1 sluiced=$2 prog=$3
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
	env SLUICE_STASH_LIMIT=abc "$run" -n 1 --embedded --timeout 10 -- "$prog" runs

# job MODE EXPECT [ENV...]: the 2-rank job with 1 KiB packets, as it_stash_limit.c expects
job() {
	local mode=$1 expect=$2 out rc
	shift 2
	out=$(env "$@" timeout 120 "$run" -n 2 "--$mode" --payload 1024 --timeout 20 -- "$prog" "$expect" 2>&1)
	rc=$?
	grep "^it_stash_limit" <<<"$out"
	[ $rc -eq 0 ] && [ "$(grep -c "^it_stash_limit: rank [01] ok" <<<"$out")" -eq 2 ] ||
		{ echo "FAIL: $mode, $* (want: $expect): exit $rc; log:"; tail -20 <<<"$out"; exit 1; }
}
# the flag, through a sluiced that sluice-run starts
printf '#!/bin/sh\nexec "%s" --stash-limit 1 "$@"\n' "$sluiced" >"$tmp/sluiced" && chmod +x "$tmp/sluiced"
job daemons overruns SLUICED="$tmp/sluiced"
job embedded overruns SLUICE_STASH_LIMIT=1
job daemons runs
echo "it_stash_limit: ok"
