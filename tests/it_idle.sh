#!/usr/bin/env bash
# it_idle.sh: three ranks on sluiced dataplanes whose engines sleep when
# idle (dataplane/idle.c) complete every call, and each dataplane's -v
# counters show its engine asleep and woken both by a peer's frames (the
# memif links' kicks, dataplane/wake.c) and by its client's doorbell.
# With --busy-poll, no engine sleeps.
# usage: it_idle.sh SLUICE_RUN IT_ALLREDUCE
set -u
run=$1 prog=$2

log=$(mktemp /tmp/sl-idle.XXXXXX)
trap 'rm -f "$log"' EXIT
check() { # what: the sluice-run arguments before --, then the count of idle lines wanted and their pattern
	local want=$1 pattern=$2 got
	shift 2
	if ! "$run" -n 3 --daemons -v --timeout 20 "$@" -- "$prog" >"$log" 2>&1; then
		echo "it_idle: the run with [$*] failed; log:" >&2
		cat "$log" >&2
		exit 1
	fi
	grep 'idle:' "$log"
	got=$(grep -cE "$pattern" "$log")
	if [ "$got" -ne "$want" ]; then
		echo "it_idle: [$*]: $got dataplane(s) match '$pattern', want $want" >&2
		exit 1
	fi
}
check 3 'idle: slept, also with collectives in flight, slept [1-9][0-9]* times \(woken by a peer [1-9][0-9]*, by a client [1-9]'
SLUICE_BUSY_POLL=1 check 3 'idle: busy-polled, slept 0 times'
