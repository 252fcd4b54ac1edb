#!/usr/bin/env bash
# vs-openmpi.sh: sluice against Open MPI in one invocation, on one machine.
# For each collective asked for, runs sluice-perf under sluice-run and
# mpi-allreduce-perf under mpirun (TCP BTL over loopback) with the same sizes,
# prints both nccl-tests tables, then a per-size ratio table read from their
# -J outputs, with medians, since these machines are shared and noisy.
set -u

usage() {
	cat <<EOF
usage: vs-openmpi.sh [options] [BUILD_DIR]   (BUILD_DIR default ./build)
  -r N     ranks (default 2)
  -m MODE  sluice-run's dataplane mode: daemons or embedded (default: sluice-run
           picks, embedded below two cores per rank)
  -C LIST  collectives, comma-separated, or all (default all_reduce): all_reduce
           all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv
  -R ROOT  root of the rooted collectives (default 0)
  -b SIZE  smallest message (default 8)
  -e SIZE  largest message (default 64M)
  -n N     timed iterations per size (default 20)
  -w N     warmup iterations per size (default 5)
  -B SIZE  cap on bytes reduced per size and phase, so that large sizes run
           fewer iterations (default 128M)
  -k       keep the JSON outputs (their directory is printed)
EOF
}

ranks=2 minb=8 maxb=64M iters=20 warmup=5 budget=128M keep=0 colls=all_reduce root=0 mode=()
while getopts "r:m:C:R:b:e:n:w:B:kh" opt; do
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
	k) keep=1 ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
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
sluice_run=$(find_tool dataplane sluice-run) || exit 2
sluice_perf=$(find_tool perf sluice-perf) || exit 2
mpi_perf=$(find_tool perf mpi-allreduce-perf) || exit 2
command -v mpirun >/dev/null || { echo "vs-openmpi.sh: mpirun not in PATH" >&2; exit 2; }

out=$(mktemp -d /tmp/vs-openmpi.XXXXXX)
if [ "$keep" = 0 ]; then trap 'rm -rf "$out"' EXIT; fi
if [ "$colls" = all ]; then
	colls=all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,gather,scatter,sendrecv
fi

# Join the two JSON-lines files on size; plain awk (mawk has no asort).
compare() { # sluice.json mpi.json collective
awk -v coll="$3" '
BEGIN {
	print "# sluice / Open MPI, " coll ", per size: time ratio < 1 and busbw ratio > 1 favour sluice"
	printf "# %10s  %12s  %12s  %12s  %12s\n", "size", "time oop", "time ip", "busbw oop", "busbw ip"
	printf "# %10s  %12s  %12s  %12s  %12s\n", "(B)", "(s/mpi)", "(s/mpi)", "(s/mpi)", "(s/mpi)"
}
function get(line, key,    m) {
	if (!match(line, "\"" key "\":[^,}]*")) return ""
	m = substr(line, RSTART, RLENGTH)
	return substr(m, index(m, ":") + 1)
}
function ratio(a, b) { return (b > 0) ? a / b : 0 }
function median(v, n,    i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
	return n == 0 ? 0 : (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2)
}
FNR == 1 { file++ }
file == 1 { s[get($0, "size")] = $0; next }
{
	size = get($0, "size")
	if (!(size in s)) next
	n++
	to[n] = ratio(get(s[size], "oop_time_us"), get($0, "oop_time_us"))
	ti[n] = ratio(get(s[size], "ip_time_us"), get($0, "ip_time_us"))
	bo[n] = ratio(get(s[size], "oop_busbw"), get($0, "oop_busbw"))
	bi[n] = ratio(get(s[size], "ip_busbw"), get($0, "ip_busbw"))
	printf "  %10s  %12.2f  %12.2f  %12.2f  %12.2f\n", size, to[n], ti[n], bo[n], bi[n]
}
END {
	printf "# %10s  %12.2f  %12.2f  %12.2f  %12.2f\n", "median", median(to, n), median(ti, n), median(bo, n), median(bi, n)
}' "$1" "$2"
}

failed=0
for coll in ${colls//,/ }; do
	flags=(-C "$coll" -r "$root" -b "$minb" -e "$maxb" -f 2 -n "$iters" -w "$warmup" -B "$budget" -c 1 -d float -o sum)
	echo "### sluice: sluice-run -n $ranks ${mode[*]} -- sluice-perf ${flags[*]}"
	"$sluice_run" -n "$ranks" "${mode[@]}" -- "$sluice_perf" "${flags[@]}" -J "$out/sluice-$coll.json"
	sluice_rc=$?
	echo
	echo "### Open MPI: mpirun -np $ranks --mca btl tcp,self (loopback) mpi-allreduce-perf ${flags[*]}"
	mpirun --allow-run-as-root --oversubscribe -np "$ranks" --mca btl tcp,self \
		--mca btl_tcp_if_include lo "$mpi_perf" "${flags[@]}" -J "$out/mpi-$coll.json"
	mpi_rc=$?
	echo
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
