#!/usr/bin/env bash
# it_veth.sh: a sluice-run over emulated hosts (network namespaces, veths, a
# bridge), then a check that it removed every namespace it made, also when
# interrupted (TERM mid-run: a script's background job ignores INT, and
# sluice-run traps both alike).  Skipped (77) without root or iproute2.
# usage: it_veth.sh SLUICE_RUN [--interrupt] SLUICE_RUN_ARGS... -- COMMAND...
set -u
run=$1; shift
interrupt=0
[ "${1:-}" = --interrupt ] && { interrupt=1; shift; }
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
	echo "it_veth: needs root and iproute2: skipped"; exit 77
fi

"$run" --net veth "$@" &
pid=$!
if [ $interrupt -eq 1 ]; then
	# wait until its hosts exist, then interrupt it
	for _ in $(seq 100); do ip netns list | grep -q "^sl$pid-" && break; sleep 0.1; done
	sleep 1
	kill -TERM $pid
fi
wait $pid
rc=$?
left=$(ip netns list | grep "^sl$pid-")
if [ -n "$left" ]; then
	echo "it_veth: sluice-run (pid $pid) left namespaces behind:" $left >&2
	for ns in $(echo "$left" | awk '{print $1}'); do ip netns del "$ns"; done
	exit 1
fi
if [ $interrupt -eq 1 ]; then
	[ $rc -ne 0 ] || { echo "it_veth: an interrupted run reported success" >&2; exit 1; }
	exit 0
fi
exit $rc
