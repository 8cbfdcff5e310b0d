"""A PoRep-32GiB-shaped partition on the CUDA backend under `[gpus] memory_limit` caps, side by side in
one process: the device phase, the steady state of two prover workers, what the memory plan keeps
resident and streams, and the peak device memory actually used.

The partition and key are `bench_cuda_partition.py`'s (synthetic, PoRep-32GiB-shaped, tiled valid
points); the key's bases are made once on the device, kept in pinned host memory in device form, and
each cap's backend plans and loads them from there (`CudaBackend.load_key(device_bases=...)`). Per cap,
after one warm-up proof: `--reps` proofs alone (device phase and phases, medians), then two threads
proving `--pair-reps` each (the steady state per partition, as two prover workers on one GPU), while
a thread samples the driver's used memory (cudaMemGetInfo: total - free, the whole device) every 5 ms.

A capped H200 keeps the H200's compute and its PCIe 5 link: these are not measurements of a consumer
card, only of the plan's streaming within that much memory.

    python benchmarks/cuda/bench_cuda_capped.py --caps none,32GiB,24GiB,16GiB --out results.json
    python benchmarks/cuda/bench_cuda_capped.py --scale 0.02 --caps none,2GiB --reps 2   # a small smoke test
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write
from bench_cuda_partition import (
    POREP_32G,
    device_bases,
    point_pool,
    prove_in_threads,
    steady_state,
    synthetic_assignment,
    synthetic_key,
)

PHASES = ("device", "h", "msm_h", "msm_l", "msm_a", "msm_b_g1", "msm_b_g2", "gather", "h2d_abc", "h2d_witness",
          "lock_wait", "stage_ahead")


class DriverPeak:
    """The device's used memory (total - free) sampled in a thread: its peak since `reset`."""

    def __init__(self) -> None:
        import cupy as cp

        self._cp, self.peak, self._stop = cp, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        runtime = self._cp.cuda.runtime
        while not self._stop.is_set():
            free, total = runtime.memGetInfo()
            self.peak = max(self.peak, int(total) - int(free))
            time.sleep(0.005)

    def reset(self) -> int:
        free, total = self._cp.cuda.runtime.memGetInfo()
        self.peak = int(total) - int(free)
        return self.peak

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def live_allocations(threshold: int = 16 << 20) -> Any:
    """A CuPy memory hook (this thread's pool allocations) that keeps every live allocation of at least
    `threshold` bytes with the cuzk frames that made it. When a request that needs more than the
    pool's limit leaves (its malloc never returned: out of memory), `report()["first_failed"]` has
    the pool and the large live arrays as they were at that request: what the failure is made of,
    whether the proof then failed or its retry went on."""
    import traceback

    import cupy as cp

    class Live(cp.cuda.MemoryHook):
        name = "cuzk-live-allocations"

        def __init__(self) -> None:
            self.live: dict[int, tuple[int, str]] = {}
            self.pool = cp.get_default_memory_pool()
            self.pending: dict[str, Any] | None = None  # a request over the limit, until it returns
            self.failed: dict[str, Any] | None = None

        def malloc_preprocess(self, device_id: int, size: int, mem_size: int) -> None:
            if self.pending is not None and self.failed is None:
                self.failed = self.pending  # the last request never returned
            self.pending = None
            limit = self.pool.get_limit()
            if limit and self.pool.total_bytes() + mem_size > limit:
                large = [{"bytes": n, "where": w} for n, w in sorted(self.live.values(), reverse=True)]
                self.pending = {"request": mem_size, "pool_total": self.pool.total_bytes(),
                                "pool_used": self.pool.used_bytes(), "limit": limit, "large": large}

        def malloc_postprocess(self, device_id: int, size: int, mem_size: int, mem_ptr: int, pmem_id: int) -> None:
            self.pending = None
            if mem_size >= threshold:
                frames = [f for f in traceback.extract_stack()[:-1] if "/cuzk/" in f.filename]
                where = " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames[-4:]))
                self.live[mem_ptr] = (mem_size, where)

        def free_postprocess(self, device_id: int, mem_size: int, mem_ptr: int, pmem_id: int) -> None:
            self.live.pop(mem_ptr, None)

        def report(self) -> dict[str, Any]:
            return {"first_failed": self.failed or self.pending}

    return Live()


def parse_cap(text: str) -> tuple[int | None, int | None, int | None]:
    """A --caps entry: "none", a size ("24GiB"), or a size with the streaming plan's MSM batch and
    tree-group bytes forced ("16GiB@2^23/1.5GiB"; the plan's resident vectors are kept)."""
    from cuzk.config import parse_size

    cap, _, forced = text.partition("@")
    limit = None if cap in ("none", "auto") else parse_size(cap, what="--caps")
    if not forced:
        return limit, None, None
    batch, _, tree = forced.partition("/")
    if not batch.startswith("2^") or not batch[2:].isdigit() or not tree:
        raise SystemExit(f"--caps: {text!r}: a forced plan is written SIZE@2^K/TREE_BYTES, e.g. 16GiB@2^23/1.5GiB")
    if limit is None:
        raise SystemExit(f"--caps: {text!r}: only a capped (streaming) plan can be forced")
    return limit, 1 << int(batch[2:]), parse_size(tree, what="--caps tree groups")


def profiled_proof(backend: Any, pk: Any, asg: Any) -> dict[str, dict[str, float]]:
    """One proof with its MSMs' device steps timed (`DeviceMsm.profile`: every step synchronised, so
    slower than the others), by MSM: "wait" is the stream's time since the step before (a streamed
    batch's bases arriving, the host's work between MSMs), then split, ones, sort, tree, accumulate,
    combine, reduce, summed over the batches. B's G2 MSM runs after the G1 ones while profiled."""
    from cuzk.backends.cuda import phase, streaming

    per: dict[str, dict[str, float]] = {}
    g1_order = iter(("h", "l", "a", "b_g1"))
    real_batches, real_msm = streaming.msm_batches, phase.msm

    def attributed(name: str, call: Any) -> Any:
        before = dict(backend.msm.profile)
        out = call()
        after = backend.msm.profile
        per[name] = {k: round(v - before.get(k, 0.0), 2) for k, v in after.items() if v != before.get(k, 0.0)}
        return out

    def batches(gpu: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        return attributed(name, lambda: real_batches(gpu, name, *args, **kwargs))

    def msm(gpu: Any, group: str, *args: Any, **kwargs: Any) -> Any:
        return attributed("b_g2" if group == "g2" else next(g1_order), lambda: real_msm(gpu, group, *args, **kwargs))

    streaming.msm_batches, phase.msm = batches, msm
    backend.msm.profile = {}
    try:
        backend.prove(pk, asg, r=1, s=2)
    finally:
        backend.msm.profile = None
        streaming.msm_batches, phase.msm = real_batches, real_msm
    return per


def run_cap(spec: tuple[int | None, int | None, int | None], pk: Any, asg: Any, host: dict[str, np.ndarray],
            args: argparse.Namespace, sampler: DriverPeak) -> dict[str, Any]:
    import cupy as cp

    from cuzk.backends.cuda import CudaBackend
    cap, forced_batch, forced_tree = spec

    pool = cp.get_default_memory_pool()
    pool.set_limit(size=0)
    gc.collect()  # an earlier cap's failure may have left its arrays in reference cycles
    pool.free_all_blocks()
    idle = sampler.reset()
    pool_at_start = pool.used_bytes()
    backend = CudaBackend(0, memory_limit=cap)
    start = time.monotonic()
    backend.load_key(pk, device_bases=host)
    load_s = time.monotonic() - start
    plan = backend.key_plan(pk)
    shape = backend.keys.loaded[pk].shape
    forced = forced_batch is not None
    if forced:
        plan = plan.streaming_with(shape, forced_batch, forced_tree)
        backend.unload_key(pk)
        backend.load_key(pk, device_bases=host, plan=plan)
    planned = {"memory_limit": cap, "mode": plan.mode, "resident": list(plan.resident), "streamed": list(plan.streamed),
               "msm_batch": plan.batch, "tree_group_bytes": plan.tree_bytes, "working_reserve": plan.reserve,
               "budget": plan.budget, "streamed_bytes_per_partition": plan.streamed_bytes(shape),
               "resident_bytes": plan.resident_bytes(shape), "pool_used_at_start": pool_at_start,
               "forced_plan": forced, "plan_fits": plan.resident_bytes(shape) + plan.reserve <= plan.budget}
    hook = live_allocations()
    alone = []
    try:
        with hook:  # the proofs of this thread: a failure report lists their allocations
            backend.prove(pk, asg, r=1, s=2)  # warm-up
            for _ in range(args.reps):
                t: dict[str, float] = {}
                backend.prove(pk, asg, r=1, s=2, timings=t)
                alone.append(t)
    except Exception as exc:
        backend.unload_key(pk)
        del backend
        pool.free_all_blocks()
        return {**planned, "phases": plan.phases, "error": f"{type(exc).__name__}: {exc}",
                "at_failure": hook.report()}
    profile = profiled_proof(backend, pk, asg) if args.profile else None
    by_start, _, wall = prove_in_threads(backend, pk, asg, 2, args.pair_reps)
    steady, handoffs = steady_state(by_start)
    report = backend.memory_plan()
    out = {
        **planned, "load_s": round(load_s, 2),
        "alone_ms": {k: round(statistics.median(t.get(k, 0.0) for t in alone) * 1e3, 1) for k in PHASES},
        "device_phase_ms_each": [round(t["device"] * 1e3, 1) for t in alone],
        "two_workers": {"proofs": len(by_start), "wall_s": round(wall, 3), "steady_s_per_partition": round(steady, 4),
                        "handoffs_ms": [round(h * 1e3, 1) for h in handoffs],
                        "staged_ahead": sum(t.get("stage_ahead", 0.0) > 0 for t in by_start)},
        "peak_pool_bytes": report["peak_pool_bytes"], "device_used_before_bytes": idle,
        "first_failed": hook.report()["first_failed"], "profile_ms": profile,
        "peak_device_used_bytes": sampler.peak, "oom_retries": report["oom_retries"],
    }
    if cap is not None:
        out["peak_within_cap"] = sampler.peak <= cap
    backend.unload_key(pk)
    del backend
    pool.set_limit(size=0)
    pool.free_all_blocks()
    return out


def print_failed(failed: dict[str, Any] | None) -> None:
    if failed is not None:
        print(f"  a request of {failed['request'] / 1e9:.3f} GB failed with the pool at "
              f"{failed['pool_total'] / 1e9:.2f} GB ({failed['pool_used'] / 1e9:.2f} in use); large live arrays:")
        for row in failed["large"]:
            print(f"  | {row['bytes'] / 1e9:7.3f} GB  {row['where']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--caps", default="none,32GiB,24GiB,16GiB",
                    help="comma-separated memory_limit values ('none'); SIZE@2^K/TREE forces a streaming plan's "
                         "MSM batch and tree-group bytes, e.g. 16GiB@2^23/1.5GiB")
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the 32 GiB partition's constraints")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--pair-reps", type=int, default=3, help="proofs per thread in the two-worker run")
    ap.add_argument("--distinct", type=int, default=4096)
    ap.add_argument("--profile", action="store_true",
                    help="one more proof per cap with each MSM's device steps timed (profile_ms in the record)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    caps = [parse_cap(c.strip()) for c in args.caps.split(",") if c.strip()]

    import cupy as cp
    import cupyx

    from cuzk.backends.cuda import CudaBackend

    began = time.monotonic()
    shape = POREP_32G if args.scale >= 1 else POREP_32G.scaled(max(1024, int(POREP_32G.constraints * args.scale)))
    rng = np.random.default_rng(32)
    asg, stats = synthetic_assignment(shape, rng)
    pool_points = point_pool(args.distinct, 7)
    pk, index = synthetic_key(shape, asg, pool_points, rng, host_bases=False)
    maker = CudaBackend(0)
    dev = device_bases(maker, pool_points, index)
    del index
    host = {}
    for name, arr in dev.items():
        host[name] = cupyx.empty_pinned(arr.shape, dtype=np.uint32)
        arr.get(out=host[name])
    del dev, maker, arr  # the loop's last array too: 6.4 GB of B_G2 bases that every cap would count
    cp.get_default_memory_pool().free_all_blocks()

    print(f"synthetic key and partition ready in {time.monotonic() - began:.1f} s", flush=True)
    sampler = DriverPeak()
    results = []
    for spec in caps:
        r = run_cap(spec, pk, asg, host, args, sampler)
        results.append(r)
        if "error" in r:
            print(f"cap {r['memory_limit'] or 'none':>12}: {r['mode']} plan, reserve "
                  f"{r['working_reserve'] / 1e9:.2f} GB within {r['budget'] / 1e9:.2f}: {r['error']}", flush=True)
            print_failed(r["at_failure"]["first_failed"])
            continue
        print(f"cap {r['memory_limit'] or 'none':>12}: {r['mode']:9s} resident {','.join(r['resident']) or '-':22s} "
              f"batch {r['msm_batch'] or '-'} tree {r['tree_group_bytes'] / 2**30:.2f} GiB"
              f"{' (forced)' if r['forced_plan'] else ''}  device {r['alone_ms']['device']:8.1f} ms  two workers "
              f"{r['two_workers']['steady_s_per_partition'] * 1e3:8.1f} ms/partition  peak used "
              f"{r['peak_device_used_bytes'] / 2**30:6.2f} GiB  pool {r['peak_pool_bytes'] / 2**30:6.2f} GiB  "
              f"oom {r['oom_retries']}", flush=True)
        print_failed(r["first_failed"])
        for name, steps in (r["profile_ms"] or {}).items():
            print(f"  {name:5s} " + "  ".join(f"{k} {v:.1f}" for k, v in steps.items()), flush=True)
    sampler.stop()
    base = next((r for r in results if r["memory_limit"] is None and "error" not in r), None)
    print(json.dumps([{k: r.get(k) for k in ("memory_limit", "alone_ms", "device_phase_ms_each",
                                             "two_workers", "peak_pool_bytes", "peak_device_used_bytes")}
                      for r in results]), flush=True)
    if base is not None:
        for r in (r for r in results if "error" not in r):
            r["steady_vs_uncapped"] = round(r["two_workers"]["steady_s_per_partition"]
                                            / base["two_workers"]["steady_s_per_partition"], 3)
    path = write("cuda-capped", envelope("bench_cuda_capped", results, shape=shape.__dict__, witness_classes=stats,
                                         device=cp.cuda.runtime.getDeviceProperties(0)["name"].decode()), args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
