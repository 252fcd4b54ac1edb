#!/usr/bin/env bash
# tools/deps.sh: make sure the Debian packages sluice builds and tests with
# are installed.  As root it installs what is missing; otherwise it prints
# the exact command to run and fails.
set -euo pipefail

packages=(gcc meson ninja-build pkg-config libdpdk-dev libnuma-dev libcmocka-dev
	openmpi-bin libopenmpi-dev iproute2 nftables ethtool python3 tshark)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "sluice needs these Debian packages: ${missing[*]}" >&2
	echo "install them as root:  apt-get update && apt-get install -y ${missing[*]}" >&2
	exit 1
fi
echo "installing ${missing[*]} ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
