#!/usr/bin/env bash
# it_fault.sh: all-reduce with exact results through dataplanes whose links
# inject faults (SLUICE_FAULT), and the dataplanes' counters checked against
# what the injectors say they did:
#   - every DATA frame dropped needs a retransmission: retransmits >= data dropped;
#   - every flip inside the CRC-covered bytes is rejected, and nothing else is:
#     covered flips <= malformed frames <= flipped frames, where the lower bound
#     counts only frames that reached a receiver: af_packet over veth drops
#     frames below the transport when a receiver falls behind (its ring is full),
#     and frames still queued for their delay when a dataplane stops never leave.
# usage: it_fault.sh SLUICE_RUN IT_ALLREDUCE RANKS MODE SPEC
#   MODE: daemons or veth (emulated hosts; counters checked), or embedded (results only:
#   embedded dataplanes print no counters)
set -u
run=$1 prog=$2 n=$3 mode=$4 spec=$5

log=$(mktemp /tmp/sl-fault.XXXXXX)
trap 'rm -f "$log"' EXIT
case "$mode" in
veth) how=(--net veth) ;;
*) how=("--$mode") ;;
esac
# A run that no timeout ends (veth_fault_all_3ranks hung a few times, cause not found) is reported
# with every process's state after HANG_S (IT_FAULT_HANG_S, default 150), inside meson's timeout of
# 300 s: without it, meson killed this script and its log went with it.
SLUICE_FAULT=$spec "$run" -n "$n" "${how[@]}" -v --timeout 20 --hang-report "${IT_FAULT_HANG_S:-150}" -- "$prog" \
	>"$log" 2>&1
rc=$?
grep -v '^\[sluiced' "$log" | tail -5
if [ $rc -ne 0 ]; then
	echo "it_fault: all-reduce under SLUICE_FAULT=$spec ($n ranks, $mode) failed with status $rc; log:" >&2
	cat "$log" >&2
	# a link that went deaf or mute may have left the kernel's word (af_packet's
	# "packet size is too long", a veth's drops)
	dmesg 2>/dev/null | tail -n 20 | sed 's/^/it_fault: kernel: /' >&2
	exit 1
fi
[ "$mode" != embedded ] || exit 0

# Sum "KEY N" pairs over every dataplane's lines that contain MARK.
sum() { # MARK KEY
	grep -- "$1" "$log" | grep -o -- "$2 [0-9]*" | awk '{ s += $NF } END { print s + 0 }'
}
retx=$(( $(sum 'collectives posted' 'rto') + $(sum 'collectives posted' 'sack') ))
malformed=$(sum 'collectives posted' 'malformed')
dropped_data=$(sum 'faults injected' 'data-dropped')
corrupted=$(sum 'faults injected' 'corrupted')
covered=$(sum 'faults injected' 'corrupted-covered')
frames=$(sum 'faults injected' 'frames')
# Frames that never reached a receiver: what the injectors passed on (frames -
# dropped + duplicated) less what the links took (tx), and what the links took
# less what they received (rx, less frames not sent by sluice: foreign).
passed=$(( frames - $(sum 'faults injected' ' dropped') + $(sum 'faults injected' 'duplicated') ))
link_tx=$(grep -o '): tx [0-9]*' "$log" | awk '{ s += $NF } END { print s + 0 }')
link_rx=$(grep -o 'refused [0-9]*, rx [0-9]*' "$log" | awk '{ s += $NF } END { print s + 0 }')
lost=$(( passed - link_rx + $(sum 'collectives posted' 'foreign') ))
[ "$lost" -gt 0 ] || lost=0
echo "it_fault: $spec: frames $frames, DATA dropped $dropped_data, retransmits $retx;" \
	"flips $corrupted (covered $covered), malformed $malformed; frames lost below the transport $lost" \
	"(links took $link_tx of $passed, received $link_rx)"

fail=0
if [ "$frames" -eq 0 ]; then
	echo "it_fault: no injector counters in the dataplanes' logs: was the fault port wrapped?" >&2
	fail=1
fi
if [ "$retx" -lt "$dropped_data" ]; then
	echo "it_fault: $dropped_data DATA frames were dropped but only $retx retransmitted" >&2
	fail=1
fi
arrived=$(( covered > lost ? covered - lost : 0 ))
if [ "$malformed" -lt "$arrived" ] || [ "$malformed" -gt "$corrupted" ]; then
	echo "it_fault: $malformed frames rejected as malformed, expected between the $covered" \
		"flips the CRC covers (less the $lost frames lost below the transport) and the" \
		"$corrupted flips injected" >&2
	fail=1
fi
[ $fail -eq 0 ] || { cat "$log" >&2; exit 1; }
