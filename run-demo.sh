#!/usr/bin/env bash
# The main road in one command: install what is missing, build, start an
# emulated two-host cluster (two dataplanes joined by DPDK net_memif, one
# rank each) and run sluice-perf all-reduce from 8 B to 64 MiB.
set -euo pipefail
cd "$(dirname "$0")"
tools/deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
exec build/dataplane/sluice-run -n "${RANKS:-2}" -- build/perf/sluice-perf -b 8 -e 64M -f 2 "$@"
