#!/usr/bin/env bash
# incast.sh: N-to-1 incast on emulated hosts (sluice-run --net veth, every
# link limited by a tbf queue): a gather to rank 0, so every other host
# sends into rank 0's one link at once.  Reports the root's goodput against
# the link rate, per size, and the dataplanes' retransmissions and drops:
# no collapse means goodput near the rate and few retransmissions.  A
# benchmark, not a test: it reports, it does not judge.
# usage: perf/incast.sh BUILD_DIR [-n HOSTS] [--rate R] [--cc none|swift] [--cc-target US] [-b MIN] [-e MAX]
set -u
. "$(dirname "$0")/rate.sh"
build=${1:?usage: incast.sh BUILD_DIR [-n HOSTS] [--rate R] [--cc CC] [-b MIN] [-e MAX]}
shift
n=4 rate=500mbit cc=swift target=1000 min=256K max=16M  # target: sluice-run's veth default
while [ $# -gt 0 ]; do
	case "$1" in
	-n) n=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--cc) cc=$2; shift 2 ;;
	--cc-target) target=$2; shift 2 ;;
	-b) min=$2; shift 2 ;;
	-e) max=$2; shift 2 ;;
	*) echo "incast: unknown option '$1'" >&2; exit 2 ;;
	esac
done
run=$build/dataplane/sluice-run perf=$build/perf/sluice-perf
[ -x "$run" ] && [ -x "$perf" ] || { echo "incast: build $build first" >&2; exit 2; }
bps=$(rate_bps "$rate")
log=$(mktemp /tmp/sl-incast.XXXXXX)
trap 'rm -f "$log"' EXIT
"$run" -n "$n" --net veth --rate "$rate" --cc "$cc" --cc-target "$target" -v --timeout 60 -- \
	"$perf" -C gather -r 0 -b "$min" -e "$max" -f 4 -n 10 -w 2 >"$log" 2>&1
rc=$?
echo "# $((n - 1))-to-1 gather into rank 0, $n veth hosts, links at $rate, cc $cc, target $target us (sluice-run status $rc)"
printf "# %10s %12s %14s %10s %8s\n" "size(B)" "time(us)" "goodput(Mb/s)" "of rate" "#wrong"
# the root receives (n-1)/n of the gathered buffer per call
awk -v n="$n" -v bps="$bps" '!/^#/ && !/^\[/ && NF >= 9 {
	bits = $1 * (n - 1) / n * 8; t = $6 * 1e-6
	printf "  %10d %12.1f %14.1f %10.2f %8s\n", $1, $6, bits / t / 1e6, bits / t / bps, $9 }' "$log"
grep -h "retransmits\|faults\|credit" "$log" | sed 's/^/# /'
exit $rc
