"""The MSM's global-atomic counting sort (kernels/msm.cu msm_histogram, msm_scatter), step by step: where
its time goes at the H MSM's size, for whoever makes it cheaper.

For each size and window it times, on the same random canonical scalars (CUDA events, median of --reps):
the histogram (one atomic per scalar and window on the key counters), the prefix sum of the counters,
the scatter (an atomic with its return value per pair, then the pair's 4-byte store at that place) a
scalar at a time (msm_scatter) and a window at a time (msm_scatter_by_window), and the whole
`DeviceMsm._sort` as the MSM runs it (with the count's read-back). JSON lines:

    python benchmarks/probes/probe_msm_sort.py --log 26 --log 27 --window 16 --window 20 OUT.jsonl
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))  # bench_cuda
from bench_cuda import random_scalars, time_events

_BLOCK = 256


def probe(cp, k, eng, scalars, c: int, reps: int) -> dict:
    """Median ms of each step of the sort of `scalars` in windows of c bits."""
    from cuzk.backends.cuda.msm import num_windows

    n, w = scalars.shape[0], num_windows(c)
    nkeys = w << (c - 1)
    counts = cp.zeros(nkeys + 1, dtype=cp.uint32)

    def histogram() -> None:
        counts.fill(0)
        k.launch1d("msm_histogram", n, (scalars, n, c, w, counts[1:]), _BLOCK)

    histogram()
    offsets = cp.cumsum(counts, dtype=cp.uint32)
    entries = cp.empty(int(k.to_host(offsets[-1:])[0]), dtype=cp.uint32)
    cursor = cp.empty(nkeys, dtype=cp.uint32)

    def scatter(kernel: str, threads: int) -> None:
        cursor[:] = offsets[:nkeys]
        k.launch1d(kernel, threads, (scalars, n, c, w, None, cursor, entries), _BLOCK)

    steps = {"histogram": histogram, "prefix_sum": lambda: cp.cumsum(counts, dtype=cp.uint32),
             "scatter": lambda: scatter("msm_scatter", n),
             "scatter_by_window": lambda: scatter("msm_scatter_by_window", n * w),
             "whole_sort": lambda: eng._sort(scalars, c, w, None)}
    return {"window_bits": c, "windows": w, "pairs": int(entries.size),
            "median_ms": {name: round(statistics.median(time_events(cp, fn, reps)), 3) for name, fn in steps.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--log", type=int, action="append", help="log2 scalar counts (default 27)")
    ap.add_argument("--window", type=int, action="append", help="window bits (default 20)")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()

    from cuzk.backends.cuda.device import properties
    from cuzk.backends.cuda.module import get_module
    from cuzk.backends.cuda.msm import DeviceMsm
    from cuzk.backends.cuda.runtime import get_cupy

    cp = get_cupy()  # CuPy, or the emulated device's stand-in (a smoke test without a GPU)
    k = get_module()
    eng = DeviceMsm(k)
    gpu = properties().name
    rng = np.random.default_rng(27)
    with args.out.open("a") as f:
        for log_n in args.log or [27]:
            n = 1 << log_n
            scalars = cp.asarray(random_scalars(n, rng).view(np.uint32).reshape(n, 8))
            for c in args.window or [20]:
                row = {"probe": "msm_sort", "log_n": log_n, "gpu": gpu,
                       "measured": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                       **probe(cp, k, eng, scalars, c, args.reps)}
                print(json.dumps(row), flush=True)
                f.write(json.dumps(row) + "\n")
                cp.get_default_memory_pool().free_all_blocks()
            del scalars
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
