#!/usr/bin/env bash
# gpu_run.sh: everything issue 6 measures on a GPU machine, in one go (for
# the device tool's `run`, from the repository root, with .device carried):
# build, the GPU test suite, gpu-dma-bench, the torch.distributed peers,
# then compute-sanitizer.  Logs go to $OUT (or ./gpu-out).
#   usage: perf/gpu_run.sh [tests] [colls] [bench] [peers] [sanitizer]   (default: all)
#   tests: gpu_dma's own GPU tests; colls: collectives on GPU buffers through
#   dataplanes; peers: the side-by-side table (sluice, NCCL, Gloo)
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
steps=${*:-tests colls bench peers sanitizer}
has() { [[ " $steps " == *" $1 "* ]]; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. .device/use-dpdk.sh
# cmocka (for the unit tests' build) travels as Debian packages in .device/cmocka (apt-get download)
if ! pkg-config --exists cmocka; then
  for f in .device/cmocka/*.deb; do dpkg -x "$f" /opt/cmocka; done
  mkdir -p /opt/cmocka/pc
  printf 'Name: cmocka\nDescription: cmocka\nVersion: 1.1.5\nLibs: -L/opt/cmocka/usr/lib/x86_64-linux-gnu -lcmocka\nCflags: -I/opt/cmocka/usr/include\n' >/opt/cmocka/pc/cmocka.pc
  export PKG_CONFIG_PATH=/opt/cmocka/pc:$PKG_CONFIG_PATH LD_LIBRARY_PATH=/opt/cmocka/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
fi
{ nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv; nproc; nvcc --version | tail -1; } | tee "$out/machine.txt"
[ -d build-dev ] || meson setup build-dev -Dcuda=enabled >"$out/setup.log" 2>&1 || { tail -30 "$out/setup.log"; exit 1; }
ninja -C build-dev tests/test_gpu_ring tests/gdma_gpu_test gpu_dma/gpu-dma-bench dataplane/sluiced dataplane/libsluice_dp.so \
  perf/sluice-perf >"$out/build.log" 2>&1 || { grep -B2 -A12 FAILED "$out/build.log" | head -60; exit 1; }
# sluiced: hugepages where they can be had
[ "$(cat /proc/sys/vm/nr_hugepages)" -gt 0 ] || { echo 2048 >/proc/sys/vm/nr_hugepages; mkdir -p /dev/hugepages; mount -t hugetlbfs none /dev/hugepages 2>/dev/null; } || true
if has tests; then
  meson test -C build-dev --no-rebuild gpu_ring 2>&1 | grep -E "^ *[0-9]+/[0-9]+ " | tee "$out/tests.txt"
  timeout 400 meson test -C build-dev --no-rebuild gpu_reduce gpu_large gpu_lifecycle gpu_mem gpu_stage --print-errorlogs 2>&1 | tee -a "$out/tests.txt" | tail -15
  cp build-dev/meson-logs/testlog.txt "$out/testlog.txt"
  grep -h -E "^(reduce|large|lifecycle|mem|stage):|FAIL" build-dev/meson-logs/testlog.txt | head -40
fi
if has colls; then
  timeout 580 meson test -C build-dev --no-rebuild ${COLLS_TESTS:-gpu_colls_2ranks_embedded gpu_colls_2ranks_daemons gpu_colls_2ranks_daemons_4channels gpu_colls_3ranks_embedded gpu_colls_4ranks_daemons} --print-errorlogs 2>&1 | tee "$out/colls.txt" | grep -E "^ *[0-9]+/|ok:|FAIL" | tail -70
  cp build-dev/meson-logs/testlog.txt "$out/colls-testlog.txt"
fi
if has bench; then
  build-dev/gpu_dma/gpu-dma-bench 1024 2>&1 | tee "$out/bench.txt"
fi
if has peers; then
  # PEER_MODES picks the modes (gpu_peers.py --modes), e.g. sluice,sluice-c4,nccl-socket
  PYTHONUNBUFFERED=1 timeout 500 python3 perf/gpu_peers.py --modes "${PEER_MODES:-sluice,nccl-socket,nccl,gloo}" \
    --max "${PEER_MAX:-1G}" --json "$out/peers.json" 2>&1 | tee "$out/peers.txt" | grep -v Warning
fi
if has sanitizer; then
  for t in "memcheck reduce" "racecheck reduce" "synccheck reduce" "memcheck stage"; do
    set -- $t
    timeout 150 compute-sanitizer --tool "$1" --error-exitcode 9 build-dev/tests/gdma_gpu_test "$2" quick >"$out/sanitizer-$1-$2.txt" 2>&1
    echo "compute-sanitizer --tool $1 ($2 quick): exit $? -- $(grep -E 'ERROR SUMMARY|error' "$out/sanitizer-$1-$2.txt" | tail -1)"
  done
  # end to end: every process of a 2-rank run on GPU buffers (embedded, so the ranks run the kernel).
  # memcheck judges a running kernel's accesses against the allocations that existed at its launch:
  # the engine restarts its kernel after allocating scratch or taking a new buffer (sl_gdma_restart).
  # 2 and 4 channels: as many engines, reducers and staging streams per rank at once (they stalled
  # under the sanitizer until each kernel's blocks learnt to exit when idle: GPU-NOTES.md section 10)
  for run in "memcheck 1" "racecheck 1" "memcheck 2" "racecheck 2" "memcheck 4" "racecheck 4"; do
    set -- $run
    rm -rf /tmp/san && mkdir -p /tmp/san
    timeout 300 compute-sanitizer --tool $1 --target-processes all --error-exitcode 9 --log-file "/tmp/san/%p.txt" \
      bash build-dev/dataplane/sluice-run -n 2 --embedded --channels $2 --timeout 120 -- build-dev/perf/sluice-perf -G -b 8 \
      -e 1M -f 32 -n 2 -w 1 >"$out/sanitizer-$1-e2e-c$2.txt" 2>&1
    echo "compute-sanitizer --tool $1 (sluice-perf -G, 2 ranks, $2 channels): exit $?; per process: $(cat /tmp/san/*.txt | grep -E 'SUMMARY' | sort | uniq -c | tr '\n' ' ')"
    cat /tmp/san/*.txt >>"$out/sanitizer-$1-e2e-c$2.txt"
  done
fi
