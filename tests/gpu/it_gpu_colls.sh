#!/usr/bin/env bash
# it_gpu_colls.sh: collectives on GPU buffers end to end, over real
# dataplanes joined by memif: sluice-perf -G checks every element of every
# row bitwise against the exact result, for every collective, every datatype
# (sum and one other op each, so that every op is run; gdma_gpu_test has the
# kernel's every type x op), then one large all-reduce.  With CHANNELS above
# 1 each dataplane runs that many engines, and large calls are split over
# them.  Exits 77 (skipped) without a GPU.
#   usage: it_gpu_colls.sh SLUICE_RUN SLUICE_PERF RANKS MODE(embedded|daemons) [MAX_BYTES [CHANNELS]]
set -u
run=$1 perf=$2 n=$3 mode=$4 big=${5:-256M} channels=${6:-1}
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no GPU here (nvidia-smi finds none)"
	exit 77
fi
fails=0
step() { # what, sluice-perf flags...
	local what=$1 out t0=$SECONDS
	shift
	out=$("$run" -n "$n" "--$mode" --channels "$channels" --timeout 60 -- "$perf" -G "$@" 2>&1)
	local rc=$?
	if [ $rc -ne 0 ] || ! grep -q "Out of bounds values : 0 OK" <<<"$out"; then
		echo "FAIL: $what (status $rc, $((SECONDS - t0)) s)"; tail -25 <<<"$out"; fails=$((fails + 1))
	else
		echo "ok: $what ($((SECONDS - t0)) s)"
	fi
}
for coll in all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv; do
	step "$coll float" -C "$coll" -b 8 -e 4M -f 16 -n 2 -w 1 -r $((n - 1))
done
for d in int8:prod uint8:max int32:min uint32:prod int64:max uint64:min half:avg float:prod double:avg \
	bfloat16:max f8e4m3:avg f8e5m2:min; do
	for o in sum "${d#*:}"; do
		step "all_reduce ${d%:*} $o" -d "${d%:*}" -o "$o" -b 4 -e 1M -f 32 -n 1 -w 0
	done
done
step "all_reduce float 1M..$big" -b 1M -e "$big" -f 16 -n 2 -w 1
[ $fails -eq 0 ] || { echo "it_gpu_colls: $fails failed ($n ranks, $mode, $channels channels)"; exit 1; }
echo "it_gpu_colls: every step passed ($n ranks, $mode, $channels channels)"
