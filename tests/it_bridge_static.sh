#!/usr/bin/env bash
# it_bridge_static.sh: sluice-run's emulated switch (--net veth) must forward by
# its static entries and learn nothing from what it forwards.  A frame sent
# from host 0 with host 1's source MAC (what one of SLUICE_FAULT's flips can
# make) must leave host 1's address on host 1's port; a learning bridge moved
# it to host 0's, and a host with nothing more to send then heard nothing
# until the run timed out (veth_fault_all_3ranks' rare failure).  Run by
# sluice-run --kernel in the bridge namespace (SLUICE_HOSTS: the hosts').
# usage: it_bridge_static.sh SLUICE_RUN
set -u
if [ "$(id -u)" -ne 0 ] || ! command -v bridge >/dev/null || ! command -v ethtool >/dev/null ||
	! command -v python3 >/dev/null; then
	echo "it_bridge_static: needs root, iproute2, ethtool and python3: skipped"; exit 77
fi
if [ -z "${SLUICE_HOSTS:-}" ]; then
	exec "$1" -n 3 --net veth --kernel -- bash "$0"
fi

read -r -a hosts <<<"$SLUICE_HOSTS"
mac1=02:53:4c:00:00:01 # node 1's (sl_addr_for_node)
where() { bridge fdb show br br0 | awk -v m="$mac1" '$1 == m { print $3 }'; }
before=$(where)
# a broadcast frame (the bridge floods it, and learns from it if it learns)
ip netns exec "${hosts[0]}" python3 -c '
import socket
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("veth0", 0))
s.send(bytes.fromhex("ffffffffffff" "02534c000001" "88b5") + bytes(46))
' || { echo "it_bridge_static: could not send the spoofed frame from ${hosts[0]}" >&2; exit 1; }
sleep 0.2
after=$(where)
echo "it_bridge_static: $mac1 on port(s) before: ${before:-none}; after a frame from host 0 with it: ${after:-none}"
if [ "$after" != "$before" ] || ! [[ "$after" =~ b1l0$ ]]; then
	echo "it_bridge_static: the bridge moved or lost host 1's address: it must hold it on host 1's" \
		"port (static, learning off; see sluice-run's add_host)" >&2
	bridge fdb show br br0 >&2
	exit 1
fi
