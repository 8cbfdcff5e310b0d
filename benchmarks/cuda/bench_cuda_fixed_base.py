"""Fixed-base multiplication on the GPU (parameter generation): points/s for G1 and G2, and the projected
time of a PoRep-32GiB key's points (427M G1 + 33M G2).

Measures, for random scalars uniform below r (top limb below r's):

* kernel: scalars and encoded output already on the device, CUDA events around the kernel; first a
  sweep of the scalars per thread sharing one inversion (`batch`) at one width (--batch-width), then
  of the window width at the best batch;
* end to end: `DeviceFixedBase.run` from host scalars into a host array (upload, kernel, download and
  the copy into `out`, chunked and overlapped), the way `cuzk params gen` uses it; G1 also into a
  np.memmap file;
* a check of the first rows against the CPU (cuzk.curve.fixed_base).

Every time is the median (min, max) of `--reps` runs after one warm-up.

    python benchmarks/cuda/bench_cuda_fixed_base.py --out results.json
    python benchmarks/cuda/bench_cuda_fixed_base.py --quick
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, nvidia_smi, write

from cuzk.curve.fixed_base import g1_fixed_base_batch, g2_fixed_base_batch
from cuzk.curve.points import G1Point, G2Point, Scalar

R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
POREP_32G = {"g1": 427_000_000, "g2": 33_000_000}
CPU = {"g1": g1_fixed_base_batch, "g2": g2_fixed_base_batch}


def random_scalars(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 4) uint64 canonical scalars: the top limb below r's, so every value is < r."""
    out = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    out[:, 3] %= np.uint64(R >> 192)
    return out


def base(group: str, seed: int) -> Any:
    k = random.Random(seed).randrange(1, R)
    return (G2Point() if group == "g2" else G1Point()) * Scalar.from_le_bytes(k.to_bytes(32, "little"))


def stats(samples: list[float], n: int) -> dict[str, Any]:
    med = statistics.median(samples)
    return {"median_ms": round(med * 1e3, 3), "min_ms": round(min(samples) * 1e3, 3),
            "max_ms": round(max(samples) * 1e3, 3), "points_per_s": round(n / med)}


def time_kernel(eng: Any, group: str, g: Any, w: int, batch: int, sc: Any, out: Any, reps: int) -> list[float]:
    cp = eng.cp
    table = eng.table(group, g, w)
    bad = cp.full(1, 0xFFFFFFFF, dtype=cp.uint32)
    n = sc.shape[0]
    stream = cp.cuda.Stream(non_blocking=True)
    samples = []
    with stream:
        for rep in range(reps + 1):
            begin = stream.record()
            eng.launch(group, table, w, sc, n, out, bad, batch)
            end = stream.record()
            end.synchronize()
            if rep:
                samples.append(cp.cuda.get_elapsed_time(begin, end) / 1e3)
    return samples


def bench_kernel(eng: Any, group: str, log_n: int, reps: int, batch_width: int, batches: list[int],
                 widths: list[int], rng: np.random.Generator) -> dict[str, Any]:
    cp = eng.cp
    n = 1 << log_n
    g = base(group, 1)
    sc = cp.asarray(random_scalars(n, rng))
    out = cp.empty((n, 96 if group == "g1" else 192), dtype=cp.uint8)
    rows: list[dict[str, Any]] = []
    for batch in batches:
        row = {"w": batch_width, "batch": batch,
               **stats(time_kernel(eng, group, g, batch_width, batch, sc, out, reps), n)}
        print(f"{group} kernel 2^{log_n} w={batch_width} batch={batch}: {row}", flush=True)
        rows.append(row)
    best_batch = max(rows, key=lambda r: r["points_per_s"])["batch"]
    for w in widths:
        if w == batch_width:
            continue
        t0 = time.perf_counter()
        eng.table(group, g, w)
        table_s = time.perf_counter() - t0
        row = {"w": w, "batch": best_batch, "table_build_s": round(table_s, 3),
               **stats(time_kernel(eng, group, g, w, best_batch, sc, out, reps), n)}
        print(f"{group} kernel 2^{log_n} w={w} batch={best_batch}: {row}", flush=True)
        rows.append(row)
    best = max(rows, key=lambda r: r["points_per_s"])
    return {"log_n": log_n, "rows": rows, "best": best}


def bench_end_to_end(eng: Any, group: str, log_n: int, reps: int, rng: np.random.Generator,
                     memmap_dir: Path | None) -> dict[str, Any]:
    n = 1 << log_n
    width = 96 if group == "g1" else 192
    g = base(group, 2)
    scalars = random_scalars(n, rng)
    out = np.ones((n, width), dtype=np.uint8)  # touched: page faults are not part of the measure
    samples = []
    for rep in range(reps + 1):
        t0 = time.perf_counter()
        eng.run(group, g, scalars, out)
        if rep:
            samples.append(time.perf_counter() - t0)
    check = min(n, 2048)
    ok = bool(np.array_equal(out[:check], CPU[group](g, scalars[:check])))
    result: dict[str, Any] = {"log_n": log_n, "into_ram": stats(samples, n), "cpu_check_rows": check,
                              "cpu_check_equal": ok}
    print(f"{group} end-to-end 2^{log_n} into RAM: {result['into_ram']} check={ok}", flush=True)
    if memmap_dir is not None:
        path = memmap_dir / f"fixed_base_{group}.bin"
        mm = np.memmap(path, dtype=np.uint8, mode="w+", shape=(n, width))
        t0 = time.perf_counter()
        eng.run(group, g, scalars, mm)
        mm.flush()
        elapsed = time.perf_counter() - t0
        result["into_memmap_incl_flush"] = stats([elapsed], n)
        del mm
        path.unlink()
        print(f"{group} end-to-end 2^{log_n} into memmap: {result['into_memmap_incl_flush']}", flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log-n", type=int, default=24)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batches", default="1,4,8,16")
    ap.add_argument("--batch-width", type=int, default=16, help="the window width of the batch sweep")
    ap.add_argument("--widths", default="11,12,13,14,16")
    ap.add_argument("--quick", action="store_true", help="2^16 points, one width, one batch")
    ap.add_argument("--memmap-dir", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.quick:
        args.log_n, args.reps, args.batches, args.widths, args.batch_width = 16, 2, "8", "13", 13

    import cupy

    from cuzk.backends.cuda.fixed_base import DEFAULT_BATCH, DEFAULT_WINDOW, DeviceFixedBase
    from cuzk.backends.cuda.module import get_module

    t0 = time.perf_counter()
    kernels = get_module(0, "setup")
    load_s = time.perf_counter() - t0
    eng = DeviceFixedBase(kernels)
    rng = np.random.default_rng(2026)
    batches = [int(x) for x in args.batches.split(",")]
    widths = [int(x) for x in args.widths.split(",")]
    results: dict[str, Any] = {"module_load_s": round(load_s, 3), "module_source": kernels.source,
                               "defaults": {"window": DEFAULT_WINDOW, "batch": DEFAULT_BATCH}}
    for group in ("g1", "g2"):
        results[f"{group}_kernel"] = bench_kernel(eng, group, args.log_n, args.reps, args.batch_width, batches,
                                                 widths, rng)
        results[f"{group}_end_to_end"] = bench_end_to_end(eng, group, args.log_n, args.reps, rng,
                                                          args.memmap_dir if group == "g1" else None)
        eng.clear()
        cupy.get_default_memory_pool().free_all_blocks()
    projection = {}
    for label, rate in (("kernel_best", lambda g: results[f"{g}_kernel"]["best"]["points_per_s"]),
                        ("end_to_end_into_ram", lambda g: results[f"{g}_end_to_end"]["into_ram"]["points_per_s"])):
        seconds = {g: POREP_32G[g] / rate(g) for g in ("g1", "g2")}
        projection[label] = {"g1_s": round(seconds["g1"], 2), "g2_s": round(seconds["g2"], 2),
                             "total_s": round(seconds["g1"] + seconds["g2"], 2)}
    results["porep_32g_projection"] = {"points": POREP_32G, **projection}
    print(f"PoRep-32GiB projection: {projection}", flush=True)
    payload = envelope("cuda-fixed-base", results, gpu=nvidia_smi(), quick=args.quick)
    path = write("cuda-fixed-base-h200", payload, args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
