#!/usr/bin/env bash
# it_notice_exit.sh: rank 1 fails and exits while rank 0 is stopped, its
# abort notice behind a full window; rank 0, resumed, must hear it
# (it_notice_exit.c says how; STOP_S: how long rank 0 is stopped).
# usage: it_notice_exit.sh SLUICE_RUN IT_NOTICE_EXIT [STOP_S]
set -u
run=$1 prog=$2 stop_s=${3:-1.8}
out=$(timeout -k 5 60 "$run" -n 2 --embedded --timeout 10 -- "$prog" "$stop_s" 2>&1)
rc=$?
grep "^it_notice_exit" <<<"$out"
[ $rc -ne 124 ] || { echo "FAIL: it hung; log:"; tail -20 <<<"$out"; exit 1; }
for r in 0 1; do
	grep -q "^it_notice_exit: rank $r ok" <<<"$out" ||
		{ echo "FAIL: rank $r (sluice-run exited $rc); log:"; tail -20 <<<"$out"; exit 1; }
done
