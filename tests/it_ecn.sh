#!/usr/bin/env bash
# it_ecn.sh: ECN on a real wire.  Three veth hosts with rate-limited links;
# a gather into host 0 sends two hosts' traffic into host 0's one link, and
# the bridge marks CE on what exceeds that link's rate (sluice-run --ecn).
# Passes when the gather's results are exact, host 0's dataplane counted CE
# marks (so af_packet handed it the IPv4 header's ECN bits as the bridge
# left them), the senders counted echoes of them in ACKs, and the same run
# without --ecn counted no CE at all (the marks are the bridge's, nothing
# else's).  Skipped (77) without root, iproute2 or nftables.
# usage: it_ecn.sh SLUICE_RUN SLUICE_PERF
set -u
run=$1 perf=$2
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null || ! command -v nft >/dev/null; then
	echo "it_ecn: needs root, iproute2 and nftables: skipped"; exit 77
fi
log=$(mktemp /tmp/it_ecn.XXXXXX)
trap 'rm -f "$log"' EXIT

# total of one counter ("CE received") over the dataplanes' last lines
count() { grep -o "$1 [0-9]*" "$log" | awk '{ s += $NF } END { print s + 0 }'; }
gather() { # extra sluice-run flags; fails unless the gather is exact
	"$run" -n 3 --net veth --rate 200mbit --cc swift -v --timeout 30 "$@" -- \
		"$perf" -C gather -r 0 -b 2M -e 2M -n 4 -w 1 -c 1 >"$log" 2>&1 || { cat "$log"; exit 1; }
	grep -q "Out of bounds values : 0 OK" "$log" || { cat "$log"; echo "it_ecn: wrong results" >&2; exit 1; }
}

gather --ecn 100us
ce=$(count "CE received") echoes=$(count "CE echoes")
echo "it_ecn: with marking: CE received $ce, CE echoes $echoes"
if [ "$ce" -eq 0 ] || [ "$echoes" -eq 0 ]; then
	cat "$log"; echo "it_ecn: no CE marks arrived or none was echoed" >&2; exit 1
fi
gather
ce=$(count "CE received")
echo "it_ecn: without marking: CE received $ce"
[ "$ce" -eq 0 ] || { cat "$log"; echo "it_ecn: CE counted with no marker on the wire" >&2; exit 1; }
