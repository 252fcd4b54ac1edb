#!/usr/bin/env bash
# it_yield.sh: processes that share cores give them away as soon as they
# find no work (sluiced --yield-idle, SLUICE_YIELD=1), which sluice-run turns
# on when they outnumber cores; SLUICE_YIELD=1 or 0 decides instead.
# Embedded, each rank's wait yields whenever a pass finds no work: the -v
# counters say how often.  As daemons, idle engines and the ranks' waits
# sleep without spinning first: the engines' -v counters and the ranks'
# SLUICE_DEBUG=INFO lines count the turns that spun.  Every run must also
# complete its calls.
# usage: it_yield.sh SLUICE_RUN IT_ALLREDUCE
set -u
run=$1 prog=$2

name=it_yield
. "$(dirname "$0")/idle_lines.sh"
yielded='embedded waits yielded [1-9][0-9]* times' never='embedded waits yielded 0 times'
# three ranks: on fewer than three cores they share, and sluice-run has them yield
if [ "$(nproc)" -lt 3 ]; then expect_idle_lines 3 "$yielded" -n 3 --embedded; else expect_idle_lines 3 "$never" -n 3 --embedded; fi
SLUICE_YIELD=1 expect_idle_lines 2 "$yielded" -n 2 --embedded
SLUICE_YIELD=0 expect_idle_lines 3 "$never" -n 3 --embedded
# daemons: three ranks and three engines
at_once='idle passes spun 0$|waits slept [0-9]+ times, spun 0 turns first'
spun='idle passes spun [1-9][0-9]*$|waits slept [0-9]+ times, spun [1-9][0-9]* turns first'
export SLUICE_DEBUG=INFO SLUICE_DEBUG_SUBSYS=INIT
if [ "$(nproc)" -lt 3 ]; then expect_idle_lines 6 "$at_once" -n 3 --daemons; else expect_idle_lines 6 "$spun" -n 3 --daemons; fi
SLUICE_YIELD=0 expect_idle_lines 6 "$spun" -n 3 --daemons
