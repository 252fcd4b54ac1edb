#!/usr/bin/env bash
# loss-busbw.sh: all-reduce bus bandwidth on emulated hosts (sluice-run --net
# veth, a tbf rate limit on every link) with 0.1% and 1% of frames lost,
# against the same links without loss, for sluice and for Open MPI over TCP
# (its TCP BTL, each rank in its host's namespace, on the same veths:
# sluice-run --kernel builds them).  Median busbw of interleaved repetitions,
# the ratios the issue asks about (>= 0.95 at 0.1%, >= 0.80 at 1%), the best
# run of each (on a shared machine the best is what a stack can do, the
# median what it did), and sluice against Open MPI at each loss.
# Each round runs every loss once, in reverse order every other round, so
# that a slow minute of the shared machine hits lossless and lossy runs
# alike; "paired" is the median, and the range, of each round's lossy run
# over the same round's lossless one.  The load average is printed at the
# start and the end.
#
# Where the loss happens: in the bridge, for both stacks (sluice-run --loss:
# an nftables rule drops each forwarded frame with probability P).  This
# kernel has no netem, and sluice's own injector (SLUICE_FAULT) drops in
# sluice's sender, before the tbf queue, where it cannot touch TCP; a drop in
# the bridge hits data and acknowledgements of both stacks alike, on the
# same wire, after the sender's queue.  Open MPI's veths have segmentation
# offloads off, so a drop is one frame, not a 64 KiB segment.
# A benchmark, not a test: it reports, it does not judge.
# usage: perf/loss-busbw.sh BUILD_DIR [-n RANKS] [-r REPS] [-s SIZE] [--rate R] [--cc none|swift] [--no-mpi]
set -u
build=${1:?usage: loss-busbw.sh BUILD_DIR [-n RANKS] [-r REPS] [-s SIZE] [--rate R] [--cc CC] [--no-mpi]}
shift
n=2 reps=3 size=4M rate=2gbit cc=swift stacks="sluice mpi"
while [ $# -gt 0 ]; do
	case "$1" in
	-n) n=$2; shift 2 ;;
	-r) reps=$2; shift 2 ;;
	-s) size=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--cc) cc=$2; shift 2 ;;
	--no-mpi) stacks=sluice; shift ;;
	*) echo "loss-busbw: unknown option '$1'" >&2; exit 2 ;;
	esac
done
run=$build/dataplane/sluice-run perf=$build/perf/sluice-perf mpi_perf=$build/perf/mpi-allreduce-perf
[ -x "$run" ] && [ -x "$perf" ] || { echo "loss-busbw: build $build first" >&2; exit 2; }
if [[ "$stacks" == *mpi* ]] && { [ ! -x "$mpi_perf" ] || ! command -v mpirun >/dev/null; }; then
	echo "loss-busbw: Open MPI (mpirun, $mpi_perf) missing: install it or pass --no-mpi" >&2; exit 2
fi

bench=(-b "$size" -e "$size" -n 20 -w 3)
# one run of a stack at a loss; prints the out-of-place busbw (GB/s) from the
# size and time columns (the table's busbw column has two decimals)
one() { # stack loss
	local lossarg=()
	[ "$2" != 0 ] && lossarg=(--loss "$2")
	if [ "$1" = sluice ]; then
		"$run" -n "$n" --net veth --rate "$rate" "${lossarg[@]}" --cc "$cc" --timeout 60 -- "$perf" "${bench[@]}"
	else
		# mpirun in the bridge namespace; its PMIx server listens on br0 so that
		# ranks in other namespaces reach it; each rank enters its host's namespace
		"$run" -n "$n" --net veth --rate "$rate" "${lossarg[@]}" --kernel -- \
			env PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=br0 \
			timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$n" --mca btl tcp,self \
			--mca btl_tcp_if_include veth0 -x SLUICE_HOSTS \
			bash -c 'h=($SLUICE_HOSTS); exec ip netns exec "${h[$OMPI_COMM_WORLD_RANK]}" "$@"' _ \
			"$mpi_perf" "${bench[@]}"
	fi 2>/dev/null | awk -v n="$n" '!/^#/ && NF >= 8 { printf "%.4f\n", $1 * 2 * (n - 1) / n / $6 / 1000; exit }'
}

losses=(0 0.001 0.01)
declare -A got
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 0; r < reps; r++)); do
	order=("${losses[@]}")
	[ $((r % 2)) = 1 ] && order=(0.01 0.001 0)
	for loss in "${order[@]}"; do
		for s in $stacks; do
			bw=$(one "$s" "$loss")
			got[$s,$loss]="${got[$s,$loss]:-} ${bw:-fail}"
		done
	done
done

median() { tr ' ' '\n' | grep -v '^$' | grep -v fail | sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "fail" }'; }
best() { tr ' ' '\n' | grep -v '^$' | grep -v fail | sort -g | tail -1; }
spread() { tr ' ' '\n' | grep -v '^$' | grep -v fail | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%s..%s", v[1], v[NR]; else print "-" }'; }
# each round's run at a loss over the same round's lossless run
paired() { # lossy-runs lossless-runs
	awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, " "); split(b, y, " ")
		for (i = 1; i <= n; i++) if (x[i] + 0 > 0 && y[i] + 0 > 0) printf "%.3f\n", x[i] / y[i] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
echo "# all-reduce $size, $n ranks on veth hosts, links at $rate, loss in the bridge, sluice cc $cc, $reps runs each (GB/s busbw)"
echo "# load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
for s in $stacks; do
	base=$(echo "${got[$s,0]}" | median) base_best=$(echo "${got[$s,0]}" | best)
	for loss in "${losses[@]}"; do
		m=$(echo "${got[$s,$loss]}" | median) b=$(echo "${got[$s,$loss]}" | best)
		pr=$(paired "${got[$s,$loss]}" "${got[$s,0]}" | tr '\n' ' ')
		printf "%-6s loss %-6s median %-7s (x%-5s of lossless)  best %-7s (x%-5s)  paired x%s (%s)  range %s\n" \
			"$s" "$loss" "$m" "$(ratio "$m" "$base")" "$b" "$(ratio "$b" "$base_best")" \
			"$(echo "$pr" | median)" "$(echo "$pr" | spread)" "$(echo "${got[$s,$loss]}" | spread)"
		echo "#   runs:${got[$s,$loss]}"
	done
done
if [ "$stacks" != sluice ]; then
	for loss in "${losses[@]}"; do
		printf "sluice / Open MPI at loss %-6s median x%-6s best x%s\n" "$loss" \
			"$(ratio "$(echo "${got[sluice,$loss]}" | median)" "$(echo "${got[mpi,$loss]}" | median)")" \
			"$(ratio "$(echo "${got[sluice,$loss]}" | best)" "$(echo "${got[mpi,$loss]}" | best)")"
	done
fi
