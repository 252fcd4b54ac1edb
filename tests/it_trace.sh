#!/usr/bin/env bash
# it_trace.sh: sluice-trace end to end.  Dataplanes run an all-reduce test
# while `sluice-trace capture` is attached to all of them; then real
# tshark, with the repository's Lua dissector, reads the capture and every
# count is checked against what the dataplanes counted themselves: DATA
# sent, retransmissions (and that each retransmitted PSN was first sent
# plainly), ACKs with a SACK body, and which frames carry the CRC32C
# trailer (over shm links, only a dataplane injecting faults sends it).
# Finally `sluice-trace analyze` must read it.  usage: it_trace.sh hand [FAULT_SPEC] | run [RANKS] | top | filter
#   hand: two sluiced started here; with a spec, node 0 (rank 0) drops on its
#         sends (sluiced --fault) and analyze must blame rank 0's link
#   run:  sluice-run --trace with RANKS dataplanes (default 3)
#   top:  `sluice-trace top` instead of a capture: it must show traffic
#   filter: loss on node 0, a capture of node 0 with --type data --retx-only
#         --rank 1: exactly both dataplanes' retransmissions, nothing else
set -u
B=${SLUICE_BUILD_ROOT:?run through meson test, or set SLUICE_BUILD_ROOT to the build directory}
SRC=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-hand} nodes=2 fault=""
case "$mode" in
hand) fault=${2:-} ;;
run) nodes=${2:-3} ;;
top) ;;
filter) fault=drop:0.01,seed:7 ;;
*) echo "usage: it_trace.sh hand [FAULT_SPEC] | run [RANKS] | top | filter" >&2; exit 2 ;;
esac
LUA=$SRC/tools/sluice.lua
TRACE=$B/ctl/sluice-trace
command -v tshark >/dev/null || { echo "it_trace: tshark is missing: apt-get install tshark"; exit 77; }

d=$(mktemp -d /tmp/it-trace.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	[ -n "${KEEP:-}" ] && cp "$d/cap.pcapng" "$KEEP"
	rm -rf "$d"
}
trap cleanup EXIT
fail() { echo "it_trace: FAIL: $*" >&2; for f in "$d"/*.log; do sed "s|^|[$(basename "$f")] |" "$f" >&2; done; exit 1; }
wait_for() { # file seconds
	for ((t = 0; t < $2 * 20; t++)); do [ -e "$1" ] && return 0; sleep 0.05; done
	return 1
}

# Two sluiced by hand, so that only node 0 gets the fault; sluice-trace attached to both.
by_hand() {
	for i in 0 1; do
		extra=()
		[ $i = 0 ] && [ -n "$fault" ] && extra=(--fault "$fault")
		"$B/dataplane/sluiced" --node $i --nodes 2 --mesh shm --memif-dir "$d" --timeout 20 --engine-cpu $i \
			--socket "$d/n$i.sock" "${extra[@]}" >"$d/dp$i.log" 2>&1 &
		pids+=($!)
	done
	for i in 0 1; do wait_for "$d/n$i.sock" 30 || fail "dataplane $i did not start"; done
	if [ "$mode" = top ]; then
		"$TRACE" top --socket "$d/n0.sock" --socket "$d/n1.sock" --interval 0.5 >"$d/top.log" 2>&1 &
	else
		what=(--socket "$d/n0.sock" --socket "$d/n1.sock")
		[ "$mode" = filter ] && what=(--socket "$d/n0.sock" --type data --retx-only --rank 1)
		"$TRACE" capture "${what[@]}" -w "$d/cap.pcapng" --ready "$d/ready" 2>"$d/trace.log" &
	fi
	tracer=$!
	pids+=($tracer)
	[ "$mode" = top ] && sleep 0.5 || wait_for "$d/ready" 10 || fail "sluice-trace did not attach"
	port=$((10000 + RANDOM % 20000)) # below the ephemeral ports (sluice-run says why)
	ranks=()
	# top samples every 0.5 s: give it traffic for a few seconds, not one burst
	# (a wall-clock window: a count of calls took 3 s here, 18 s under the sanitizers)
	work=("$B/tests/it_allreduce")
	[ "$mode" = top ] && work=("$B/perf/sluice-stream" -s 1048576 -F "$(date +%s.%N)" -T "$(date -d '+3 sec' +%s.%N)")
	for i in 0 1; do
		SLUICE_RANK=$i SLUICE_WORLD_SIZE=2 SLUICE_ROOT=127.0.0.1:$port SLUICE_SOCKET=$d/n$i.sock \
			SLUICE_TIMEOUT=20 "${work[@]}" >"$d/rank$i.log" 2>&1 &
		ranks+=($!)
	done
	for p in "${ranks[@]}"; do wait "$p" || fail "a rank failed"; done
	[ "$mode" = top ] && kill -INT "$tracer"
	kill -TERM "${pids[0]}" "${pids[1]}"
	wait "${pids[0]}" "${pids[1]}"
	wait "$tracer" || fail "sluice-trace $mode exited with $?"
	pids=()
}

# top's refreshes: some flow moved data, and the communicator appeared
check_top() {
	awk '$1 ~ /^node0->node1|^node1->node0/ && $2 == "tx" && $3 > 0 { moved = 1 } END { exit !moved }' \
		"$d/top.log" || fail "sluice-trace top showed no traffic"
	grep -q '^0x[0-9a-f]* ' "$d/top.log" || fail "sluice-trace top showed no communicator"
	echo "it_trace: top ok"
	exit 0
}

# The launcher does it all: sluice-run --trace.
launcher() {
	"$B/dataplane/sluice-run" -n "$nodes" --net shm --daemons -v --timeout 20 --trace "$d/cap.pcapng" -- \
		"$B/tests/it_allreduce" >"$d/run.log" 2>&1 || fail "sluice-run --trace failed"
	grep '^sluice-trace:' "$d/run.log" >"$d/trace.log"
	for ((i = 0; i < nodes; i++)); do grep "sluiced node $i:" "$d/run.log" >"$d/dp$i.log"; done
}

# the filtered capture of node 0: every retransmission node 0 sent or received, nothing else
check_filter() {
	tshark -X lua_script:"$LUA" -r "$d/cap.pcapng" -T fields -E separator=' ' -e frame.interface_name \
		-e sluice.type -e sluice.flags.retx >"$d/fields.txt" 2>"$d/tshark.log" || fail "tshark failed"
	others=$(awk '!($1 == "node0-port0" && $2 == 1 && ($3 == "True" || $3 == 1))' "$d/fields.txt" | wc -l)
	[ "$others" = 0 ] || fail "$others packets in the capture do not pass the filter"
	want=0
	for i in 0 1; do
		want=$((want + $(sed -n 's/.*rto \([0-9]*\) sack \([0-9]*\).*/\1 + \2/p' "$d/dp$i.log")))
	done
	got=$(wc -l <"$d/fields.txt")
	[ "$got" = "$want" ] || fail "the filtered capture holds $got retransmissions, the dataplanes sent $want"
	[ "$got" -gt 0 ] || fail "no retransmissions under loss"
	echo "it_trace: filter ok ($got retransmissions, as counted)"
	exit 0
}

if [ "$mode" = run ]; then launcher; else by_hand; fi
[ "$mode" = top ] && check_top
[ "$mode" = filter ] && check_filter

grep -q ", 0 dropped in the trace rings" "$d/trace.log" || fail "the trace rings dropped records"
written=$(sed -n 's/^sluice-trace: \([0-9]*\) packets written.*/\1/p' "$d/trace.log")
read_back=$(tshark -r "$d/cap.pcapng" -T fields -e frame.number 2>/dev/null | wc -l) # one line per packet, whatever its summary
[ "$written" = "$read_back" ] || fail "sluice-trace wrote $written packets, tshark read $read_back"

# One line per packet: capturing interface, type, source node, PSN, retx flag, CRC flag, ack-now flag
# (tshark refuses a field the dissector does not know), SACKed PSN count (last: empty on DATA).
tshark -X lua_script:"$LUA" -r "$d/cap.pcapng" -T fields -E separator=' ' -e frame.interface_name \
	-e sluice.type -e sluice.src_node -e sluice.psn -e sluice.flags.retx -e sluice.flags.crc -e sluice.flags.ack_now \
	-e sluice.ack.sacked >"$d/fields.txt" 2>"$d/tshark.log" || fail "tshark with the dissector failed"
# The mesh here is shm: its frames carry no CRC32C trailer, except those of
# a dataplane injecting faults (node 0 with a spec), which all must: the
# trailer is what catches its corruptions.
crc_bad=$(awk -v f="${fault:+0}" '{ crc = $6 == "True" || $6 == 1; if (crc != ($3 == f)) n++ } END { print n + 0 }' \
	"$d/fields.txt")
[ "$crc_bad" = 0 ] || fail "$crc_bad frames had a CRC trailer where they should not, or none where they should (fault: ${fault:-none})"
for ((i = 0; i < nodes; i++)); do
	# counters line: "... data tx N rx N, retransmits rto N sack N, ..."
	line=$(grep 'collectives posted' "$d/dp$i.log") || fail "dataplane $i printed no counters"
	data_tx=$(sed -n 's/.*data tx \([0-9]*\).*/\1/p' <<<"$line")
	retx=$(( $(sed -n 's/.*rto \([0-9]*\) sack \([0-9]*\).*/\1 + \2/p' <<<"$line") ))
	awk -v i=$i 'index($1, "node" i "-") == 1 && $2 == 1 && $3 == i' "$d/fields.txt" >"$d/tx$i.txt"
	got_tx=$(wc -l <"$d/tx$i.txt")
	got_retx=$(awk '$5 == "True" || $5 == 1' "$d/tx$i.txt" | wc -l)
	[ "$got_tx" = "$data_tx" ] || fail "node $i: $got_tx DATA sent in the capture, the dataplane counted $data_tx"
	[ "$got_retx" = "$retx" ] || fail "node $i: $got_retx retransmissions in the capture, the dataplane counted $retx"
	# each retransmitted PSN went out plainly first
	orphans=$(awk '{ if ($5 == "True" || $5 == 1) r[$4] = 1; else o[$4] = 1 } END { n = 0; for (p in r) if (!(p in o)) n++; print n }' "$d/tx$i.txt")
	[ "$orphans" = 0 ] || fail "node $i: $orphans retransmitted PSNs were never sent before"
	echo "node $i: $got_tx DATA sent, $got_retx retransmitted: matches the dataplane's counters"
done
acks=$(awk '$2 == 2 && $8 != ""' "$d/fields.txt" | wc -l)
[ "$acks" -gt 0 ] || fail "no ACK with a decoded SACK body"

"$TRACE" analyze "$d/cap.pcapng" >"$d/analyze.log" 2>&1 || fail "sluice-trace analyze failed"
grep -q "^slowest rank" "$d/analyze.log" || fail "analyze named no slowest rank"
if [ -n "$fault" ]; then
	grep -q "^slowest link: rank 0 (node 0) -> rank 1 (node 1): [1-9]" "$d/analyze.log" ||
		fail "analyze did not blame the lossy link rank 0 -> rank 1: $(grep ^slowest "$d/analyze.log")"
	grep -q "^slowest rank: 0 " "$d/analyze.log" || fail "analyze did not name rank 0"
	# every DATA frame the injector dropped is a frame the capture saw leave and never arrive
	dropped=$(sed -n 's/.*faults injected on link 0 .* data-dropped \([0-9]*\).*/\1/p' "$d/dp0.log")
	vanished=$(sed -n 's/^  rank 0 (node 0) -> rank 1 (node 1): [0-9]* lost (\([0-9]*\) DATA frames never arrived.*/\1/p' \
		"$d/analyze.log")
	[ -n "$dropped" ] && [ "$dropped" = "$vanished" ] ||
		fail "the fault injector dropped ${dropped:-?} DATA frames, analyze saw ${vanished:-?} vanish"
	echo "rank 0 -> rank 1: $dropped DATA frames dropped by the injector, all seen vanishing in the capture"
	grep "^slowest" "$d/analyze.log"
fi
echo "it_trace: ok ($written packets)"
