#!/usr/bin/env bash
# it_idle.sh: three ranks on sluiced dataplanes whose engines sleep when
# idle (dataplane/idle.c) complete every call, and each dataplane's -v
# counters show its engine asleep and woken both by a peer's frames (the
# memif links' kicks, dataplane/wake.c) and by its client's doorbell.
# With --busy-poll, no engine sleeps.
# usage: it_idle.sh SLUICE_RUN IT_ALLREDUCE
set -u
run=$1 prog=$2

name=it_idle
. "$(dirname "$0")/idle_lines.sh"
expect_idle_lines 3 'idle: slept, also with collectives in flight, slept [1-9][0-9]* times \(woken by a peer [1-9][0-9]*, by a client [1-9]' -n 3 --daemons
SLUICE_BUSY_POLL=1 expect_idle_lines 3 'idle: busy-polled, slept 0 times' -n 3 --daemons
