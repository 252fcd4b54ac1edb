#!/usr/bin/env python3
"""gpu_peers.py: the peers of issue 6's table, all-reduce of CUDA tensors
through torch.distributed, one process per GPU, printed in nccl-tests'
columns (size, count, type, redop, time, algbw, busbw):

  nccl-socket  NCCL forced onto its socket network path (no P2P, no SHM,
               NCCL_NET=Socket over loopback): the medium sluice competes on
  nccl         NCCL's default path (NVLink here), the ceiling of another medium
  gloo         Gloo on CUDA tensors
  sluice       sluice over memif between two dataplanes (sluiced, one pinned
               engine core each), sluice-perf -G from the build in SLUICE_BUILD
               (default build-dev); its time is the mean per call of a timed loop
               without Python, the torch modes' the median with Python around it
  sluice-cK    the same with K channels per dataplane (sluice-run --channels K:
               K engines, each on its own core and memif link; large calls split
               over them)

Rank i takes GPU i % (GPUs on the machine), as sluice-perf -G does.

Usage: python3 perf/gpu_peers.py [--ranks 2] [--min 8] [--max 1G]
                                 [--modes sluice,nccl-socket,nccl,gloo] [--json FILE]
Each mode runs in fresh processes, since NCCL reads its variables at start.
The last table puts every mode's busbw side by side, with each sluice mode / nccl-socket.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

# NVLink multicast stays off on these machines (it can take the host's GPUs down).
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
MODES = {
    "nccl-socket": ("nccl", {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_NET": "Socket",
                             "NCCL_SOCKET_IFNAME": "lo"}),
    "nccl": ("nccl", {}),
    "gloo": ("gloo", {}),
}


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def iterations(nbytes):
    """Enough repeats for a stable median at small sizes; about 1 GiB moved at large ones."""
    return max(3, min(200, (1 << 30) // max(nbytes, 1)))


def worker(rank, nranks, mode, sizes, port, queue):
    backend, env = MODES[mode]
    os.environ.update(SAFE_ENV)
    os.environ.update(env)
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    gpu = rank % torch.cuda.device_count()  # more ranks than GPUs: Gloo and sluice share them, NCCL refuses
    torch.cuda.set_device(gpu)
    dist.init_process_group(backend, rank=rank, world_size=nranks,
                            device_id=torch.device("cuda", gpu) if backend == "nccl" else None)
    rows = []
    for nbytes in sizes:
        count = max(1, nbytes // 4)
        x = torch.rand(count, dtype=torch.float32, device="cuda") + rank
        want = None
        iters = iterations(nbytes)
        # one checked call (also the warm-up): every rank adds the same set of tensors
        ref = x.clone()
        dist.all_reduce(x)
        torch.cuda.synchronize()
        gathered = [torch.empty_like(ref) for _ in range(nranks)] if count <= 1024 else None
        if gathered is not None:
            dist.all_gather(gathered, ref)
            want = torch.stack(gathered).sum(0)
        wrong = 0 if want is None else int((~torch.isclose(x, want, rtol=1e-5, atol=1e-5)).sum())
        dist.barrier()
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            dist.all_reduce(x)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        times.sort()
        t = times[len(times) // 2]
        t_max = torch.tensor([t], dtype=torch.float64, device="cuda")
        dist.all_reduce(t_max, op=dist.ReduceOp.MAX)  # the slowest rank's median
        t = float(t_max.item())
        algbw = count * 4 / t / 1e9
        rows.append({"mode": mode, "bytes": count * 4, "count": count, "us": t * 1e6, "algbw": algbw,
                     "busbw": algbw * 2 * (nranks - 1) / nranks, "wrong": wrong, "iters": iters})
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def run_mode(mode, nranks, sizes, port):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, nranks, mode, sizes, port, queue)) for r in range(nranks)]
    for p in procs:
        p.start()
    rows = queue.get(timeout=1800)
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        sys.exit(f"gpu_peers: a {mode} rank failed (exit codes {[p.exitcode for p in procs]})")
    return rows


def run_sluice(mode, nranks, sizes):
    """mode "sluice", or "sluice-cK": dataplanes of K channels (an engine and core each)."""
    build = os.environ.get("SLUICE_BUILD", "build-dev")
    channels = mode[len("sluice-c"):] if mode.startswith("sluice-c") else "1"
    with tempfile.NamedTemporaryFile(suffix=".json") as js:
        cmd = [f"{build}/dataplane/sluice-run", "-n", str(nranks), "--daemons", "--channels", channels, "--",
               f"{build}/perf/sluice-perf", "-G", "-b", str(sizes[0]), "-e", str(sizes[-1]), "-f", "2",
               "-n", "50", "-w", "5", "-B", str(4 << 30), "-J", js.name]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
        if done.returncode != 0:
            sys.exit(f"gpu_peers: sluice failed ({' '.join(cmd)}):\n{done.stdout[-3000:]}")
        lines = [json.loads(line) for line in open(js.name) if line.strip()]
    return [{"mode": mode, "bytes": r["size"], "count": r["count"], "us": r["oop_time_us"],
             "algbw": r["oop_algbw"], "busbw": r["oop_busbw"], "wrong": r["oop_wrong"], "iters": r["iters"]}
            for r in lines]


def side_by_side(allrows, modes):
    by = {(r["mode"], r["bytes"]): r for r in allrows}
    sizes = sorted({r["bytes"] for r in allrows})
    print("\n# all-reduce busbw (GB/s) side by side; time (us) of the smallest size in the first rows")
    ours = [m for m in modes if m.startswith("sluice")] if "nccl-socket" in modes else []
    print(f"{'size':>12} " + " ".join(f"{m:>12}" for m in modes) +
          "".join(f" {m + '/nccl-socket':>22}" for m in ours))
    for size in sizes:
        cells = [by.get((m, size)) for m in modes]
        line = f"{size:>12} " + " ".join(f"{c['busbw']:>12.3f}" if c else f"{'-':>12}" for c in cells)
        for m in ours:
            a, b = by.get((m, size)), by.get(("nccl-socket", size))
            line += f" {a['busbw'] / b['busbw']:>22.2f}" if a and b and b["busbw"] > 0 else f" {'-':>22}"
        print(line)
    print(f"{'8 B us':>12} " + " ".join(f"{by[(m, sizes[0])]['us']:>12.1f}" if (m, sizes[0]) in by else
                                       f"{'-':>12}" for m in modes))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--min", default="8")
    ap.add_argument("--max", default="1G")
    ap.add_argument("--modes", default="sluice,nccl-socket,nccl,gloo",
                    help="sluice-cK runs sluice with K channels (engines) per dataplane")
    ap.add_argument("--json", help="also write every row here")
    args = ap.parse_args()
    if torch.cuda.device_count() < args.ranks and any(m.startswith("nccl") for m in args.modes.split(",")):
        sys.exit(f"gpu_peers: NCCL's {args.ranks} ranks need {args.ranks} GPUs, this machine has "
                 f"{torch.cuda.device_count()}")
    sizes, s = [], parse_size(args.min)
    while s <= parse_size(args.max):
        sizes.append(s)
        s *= 2
    allrows = []
    for i, mode in enumerate(args.modes.split(",")):
        t0 = time.time()
        rows = run_sluice(mode, args.ranks, sizes) if mode.startswith("sluice") else run_mode(mode, args.ranks, sizes,
                                                                             29500 + 17 * i)
        allrows += rows
        print(f"\n# {mode}: all-reduce float32 sum, {args.ranks} ranks, torch {torch.__version__}, "
              f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))} ({time.time() - t0:.0f} s)")
        print(f"{'size':>12} {'count':>12} {'type':>6} {'redop':>6} {'time(us)':>10} {'algbw':>8} "
              f"{'busbw':>8} {'#wrong':>6}")
        for r in rows:
            print(f"{r['bytes']:>12} {r['count']:>12} {'float':>6} {'sum':>6} {r['us']:>10.1f} "
                  f"{r['algbw']:>8.3f} {r['busbw']:>8.3f} {r['wrong']:>6}")
        sys.stdout.flush()
    side_by_side(allrows, args.modes.split(","))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(allrows, f, indent=1)


if __name__ == "__main__":
    main()
