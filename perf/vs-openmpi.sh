#!/usr/bin/env bash
# vs-openmpi.sh: sluice against Open MPI in one invocation, on one machine.
# For each collective asked for, runs sluice-perf under sluice-run and
# mpi-allreduce-perf under mpirun (TCP BTL over loopback) with the same sizes,
# prints both nccl-tests tables, then a per-size ratio table read from their
# -J outputs, with medians, since these machines are shared and noisy.
# With -N N the pair runs N times, interleaved, and the ratios are of
# per-size medians over the rounds.
set -u

usage() {
	cat <<EOF
usage: vs-openmpi.sh [options] [BUILD_DIR]   (BUILD_DIR default ./build)
  -r N     ranks (default 2)
  -m MODE  sluice-run's dataplane mode: daemons or embedded (default: sluice-run
           picks, embedded below two cores per rank)
  -C LIST  collectives, comma-separated, or all (default all_reduce): all_reduce
           all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv
           alltoallv barrier (every collective Open MPI has)
  -R ROOT  root of the rooted collectives (default 0)
  -b SIZE  smallest message (default 8)
  -e SIZE  largest message (default 64M)
  -n N     timed iterations per size (default 20)
  -w N     warmup iterations per size (default 40: both tools' first ~2 ms of
           calls after the harness's own idle gap (a phase's check, its fill)
           run 1.1-1.3x slower; 5 left 1 MiB cells of both inside it,
           perf/ALGORITHMS.md warm33)
  -B SIZE  cap on bytes reduced per size and phase, so that large sizes run
           fewer iterations (default 128M)
  -N N     rounds: run the pair N times, alternating, and compare per-size medians
           (default 1; the load of a shared machine changes by the second)
  -A       time apart: pass neither tool -S.  By default both start each phase's
           timed calls on every rank together (a barrier after the warmup), as
           nccl-tests and the OSU benchmarks do; apart, a rank may time its calls
           while others are still in their warmup, and Open MPI's 3-rank 64-128 KiB
           scatter and gather ranks did not overlap at all (perf/ALGORITHMS.md, ahead)
  -k       keep the JSON outputs (their directory is printed)
  -c DIR   run nothing: compare the JSON outputs an earlier -k kept in DIR
EOF
}

ranks=2 minb=8 maxb=64M iters=20 warmup=40 budget=128M keep=0 colls=all_reduce root=0 mode=() rounds=1 kept= sync=(-S)
while getopts "r:m:C:R:b:e:n:w:B:N:Akc:h" opt; do
	case $opt in
	r) ranks=$OPTARG ;;
	m) case $OPTARG in
	   daemons|embedded) mode=("--$OPTARG") ;;
	   *) echo "vs-openmpi.sh: -m $OPTARG: expected daemons or embedded" >&2; exit 2 ;;
	   esac ;;
	C) colls=$OPTARG ;;
	R) root=$OPTARG ;;
	b) minb=$OPTARG ;;
	e) maxb=$OPTARG ;;
	n) iters=$OPTARG ;;
	w) warmup=$OPTARG ;;
	B) budget=$OPTARG ;;
	N) rounds=$OPTARG ;;
	A) sync=() ;;
	k) keep=1 ;;
	c) kept=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "vs-openmpi.sh: -N wants a positive number of rounds" >&2; exit 2; }
build=${1:-./build}

# A build tree keeps each tool in its folder; an install puts them side by side.
find_tool() { # subdir name
	local p
	for p in "$build/$1/$2" "$build/$2"; do
		if [ -x "$p" ]; then echo "$p"; return 0; fi
	done
	echo "vs-openmpi.sh: $2 not found under $build (build first: meson setup build && ninja -C build)" >&2
	return 1
}
if [ -z "$kept" ]; then
	sluice_run=$(find_tool dataplane sluice-run) || exit 2
	sluice_perf=$(find_tool perf sluice-perf) || exit 2
	mpi_perf=$(find_tool perf mpi-allreduce-perf) || exit 2
	command -v mpirun >/dev/null || { echo "vs-openmpi.sh: mpirun not in PATH" >&2; exit 2; }
fi

out=$(mktemp -d /tmp/vs-openmpi.XXXXXX)
if [ "$keep" = 0 ]; then trap 'rm -rf "$out"' EXIT; fi
if [ "$colls" = all ]; then
	colls=all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,gather,scatter,sendrecv,alltoallv,barrier
fi

# Join the two JSON-lines files on size (several lines per size: one per
# round, reduced to their median); plain awk (mawk has no asort).
compare() { # sluice.json mpi.json collective
awk -v coll="$3" '
BEGIN { split("oop_time_us ip_time_us oop_busbw ip_busbw", key, " ") }
function get(line, key,    m) {
	if (!match(line, "\"" key "\":[^,}]*")) return ""
	m = substr(line, RSTART, RLENGTH)
	return substr(m, index(m, ":") + 1)
}
# no ratio where Open MPI has nothing to divide by (the busbw of a barrier),
# or a phase was not run (null: the in-place one of a collective without it): "-"
function ratio(a, b) { return (a != "" && b > 0) ? a / b : "" }
function cell(x) { return x == "" ? sprintf("  %12s", "-") : sprintf("  %12.2f", x) }
function median(v, n,    i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
	return n == 0 ? 0 : (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2)
}
# median of metric k of size z in file f ("" when a round has none)
function med(f, z, k,    i, v) {
	for (i = 1; i <= cnt[f, z]; i++)
		if ((v[i] = val[f, z, k, i]) == "") return ""
	return median(v, cnt[f, z])
}
FNR == 1 { file++ }
{
	size = get($0, "size")
	if (file == 2 && !((2, size) in cnt)) order[++nsizes] = size
	c = ++cnt[file, size]
	# + 0: a number, or median() would sort "43.3" before "5.8" (as strings)
	for (k = 1; k <= 4; k++) val[file, size, k, c] = (v = get($0, key[k])) == "null" ? "" : v + 0
	synced[get($0, "synced")]++
}
END {
	# the rounds: the fewest lines a size has (two sizes may round to one
	# element count, so that one size has two lines a round)
	for (i = 1; i <= nsizes; i++)
		for (f = 1; f <= 2; f++)
			if (((f, order[i]) in cnt) && (!rounds || cnt[f, order[i]] < rounds)) rounds = cnt[f, order[i]]
	# -S or not, from the JSON: both tools timed together, apart, or mixed
	timing = synced["true"] && !synced["false"] && !synced[""] ? ", timed together" : \
		 synced["false"] && !synced["true"] && !synced[""] ? ", timed apart (-A)" : \
		 synced["true"] || synced["false"] ? ", timing MIXED (some rounds with -S, some not)" : ""
	print "# sluice / Open MPI, " coll ", per size" (rounds > 1 ? " (medians of " rounds " rounds)" : "") \
	      timing ": time ratio < 1 and busbw ratio > 1 favour sluice"
	printf "# %10s  %12s  %12s  %12s  %12s\n", "size", "time oop", "time ip", "busbw oop", "busbw ip"
	printf "# %10s  %12s  %12s  %12s  %12s\n", "(B)", "(s/mpi)", "(s/mpi)", "(s/mpi)", "(s/mpi)"
	for (i = 1; i <= nsizes; i++) {
		size = order[i]
		if (!((1, size) in cnt)) continue
		n++
		for (k = 1; k <= 4; k++) r[k, n] = ratio(med(1, size, k), med(2, size, k))
		printf "  %10s%s%s%s%s\n", size, cell(r[1, n]), cell(r[2, n]), cell(r[3, n]), cell(r[4, n])
	}
	for (k = 1; k <= 4; k++) {
		j = 0
		for (i = 1; i <= n; i++) if (r[k, i] != "") col[++j] = r[k, i]
		m[k] = j ? median(col, j) : ""
	}
	printf "# %10s%s%s%s%s\n", "median", cell(m[1]), cell(m[2]), cell(m[3]), cell(m[4])
}' "$1" "$2"
}

if [ -n "$kept" ]; then
	for coll in ${colls//,/ }; do
		[ -s "$kept/sluice-$coll.json" ] && [ -s "$kept/mpi-$coll.json" ] ||
			{ echo "vs-openmpi.sh: $kept has no sluice-$coll.json and mpi-$coll.json (kept by -k)" >&2; exit 2; }
		compare "$kept/sluice-$coll.json" "$kept/mpi-$coll.json" "$coll"
	done
	exit 0
fi

failed=0
for coll in ${colls//,/ }; do
	flags=(-C "$coll" -r "$root" -b "$minb" -e "$maxb" -f 2 -n "$iters" -w "$warmup" -B "$budget" -c 1 -d float -o sum "${sync[@]}")
	sluice_rc=0 mpi_rc=0
	for ((round = 1; round <= rounds; round++)); do
		[ "$rounds" -gt 1 ] && echo "## round $round of $rounds"
		echo "### sluice: sluice-run -n $ranks ${mode[*]} -- sluice-perf ${flags[*]}"
		"$sluice_run" -n "$ranks" "${mode[@]}" -- "$sluice_perf" "${flags[@]}" -J "$out/sluice-$coll.$round.json" || sluice_rc=$?
		echo
		echo "### Open MPI: mpirun -np $ranks --mca btl tcp,self (loopback) mpi-allreduce-perf ${flags[*]}"
		mpirun --allow-run-as-root --oversubscribe -np "$ranks" --mca btl tcp,self \
			--mca btl_tcp_if_include lo "$mpi_perf" "${flags[@]}" -J "$out/mpi-$coll.$round.json" || mpi_rc=$?
		echo
		cat "$out/sluice-$coll.$round.json" >>"$out/sluice-$coll.json" 2>/dev/null
		cat "$out/mpi-$coll.$round.json" >>"$out/mpi-$coll.json" 2>/dev/null
	done
	if [ ! -s "$out/sluice-$coll.json" ] || [ ! -s "$out/mpi-$coll.json" ]; then
		echo "vs-openmpi.sh: $coll: a run produced no results (sluice rc=$sluice_rc, mpi rc=$mpi_rc)" >&2
		failed=1
		continue
	fi
	compare "$out/sluice-$coll.json" "$out/mpi-$coll.json" "$coll"
	echo
	if [ "$sluice_rc" != 0 ] || [ "$mpi_rc" != 0 ]; then
		echo "vs-openmpi.sh: $coll: sluice-perf exited $sluice_rc, mpi-allreduce-perf exited $mpi_rc" >&2
		failed=1
	fi
done

if [ "$keep" = 1 ]; then echo "# JSON outputs kept in $out"; fi
exit $failed
