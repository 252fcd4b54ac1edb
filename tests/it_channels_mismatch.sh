#!/usr/bin/env bash
# it_channels_mismatch.sh: two ranks slice one call differently (rank 1 is
# capped to one channel by SLUICE_CHANNELS), so channel 0 sees a count
# mismatch and rank 0's slice on channel 1 waits for a call that never
# comes.  Every rank must get the mismatch long before SLUICE_TIMEOUT: the
# first channel to fail a communicator fails it on the others too.  COLL
# (sluice-perf's -C, default all_reduce) picks the call: all_gather's
# slices are strided, each a part of every rank's block.
#   usage: it_channels_mismatch.sh SLUICE_RUN SLUICE_PERF [COLL]
set -u
run=$1 perf=$2 coll=${3:-all_reduce} limit=60
t0=$SECONDS
out=$("$run" -n 2 --daemons --channels 2 --timeout $limit -- bash -c \
	'[ "$SLUICE_RANK" = 1 ] && export SLUICE_CHANNELS=1; exec "$0" "$@"' \
	"$perf" -C "$coll" -b 1M -e 1M -n 1 -w 0 2>&1)
rc=$? took=$((SECONDS - t0))
ranks=$(grep -c "sluice-perf: .*differs across ranks" <<<"$out")
echo "it_channels_mismatch ($coll): exit $rc after $took s, $ranks rank(s) reported the mismatch (\"differs across ranks\")"
if [ $rc -eq 0 ] || [ "$ranks" -lt 2 ] || [ $took -ge $((limit / 2)) ]; then
	echo "FAIL: expected both ranks to fail with a mismatch within $((limit / 2)) s (SLUICE_TIMEOUT is $limit s)"
	tail -30 <<<"$out"
	exit 1
fi
