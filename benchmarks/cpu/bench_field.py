"""Benchmark of the Fr layer: vector multiplication, batch inversion and NTTs on the CPU.

Usage: ``python benchmarks/cpu/bench_field.py [--json out.json] [--big] [--runs 5]``

Each figure is the median of ``--runs`` timed calls after one untimed warm-up call (which also pays
numba's compilation or cache load). Sizes are 2^16 and 2^20, plus 2^24 with ``--big``. The JSON
records the hardware and the load average, since a shared machine skews parallel timings.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np

from cuzk.field import Domain, fr_vec
from cuzk.field.ntt import clear_twiddle_cache


def hardware() -> dict[str, Any]:
    """CPU model, core count and memory, read from /proc where available."""
    model = platform.processor() or "unknown"
    mem_kib = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_kib = int(line.split()[1])
                break
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "mem_gib": round(mem_kib / 2**20, 1) if mem_kib else None,
        "numba_threads": numba.get_num_threads(),
        "python": platform.python_version(),
        "numba": numba.__version__,
        "numpy": np.__version__,
    }


def random_montgomery(n: int, seed: int) -> np.ndarray:
    """n random field elements in Montgomery form (top limb masked so each value is below r)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, np.iinfo(np.uint64).max, size=(n, 4), dtype=np.uint64, endpoint=True)
    a[:, 3] &= np.uint64((1 << 62) - 1)
    return fr_vec.to_montgomery(a)


def cpu_idle_percent(seconds: float = 1.0) -> float | None:
    """Share of all CPUs idle over ``seconds`` (from /proc/stat): shows whether others shared the box."""

    def sample() -> list[int]:
        return [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]

    try:
        before = sample()
        time.sleep(seconds)
        after = sample()
    except OSError:
        return None
    delta = [b - a for a, b in zip(before, after, strict=True)]
    return round(100.0 * (delta[3] + delta[4]) / max(1, sum(delta)), 1)


def time_runs(fn: Callable[[], object], runs: int) -> tuple[list[float], list[float]]:
    """Warm up once, then time ``runs`` calls; returns (wall, process CPU) times in milliseconds.

    CPU time summed over threads helps read wall times taken on a machine shared with other work.
    """
    fn()
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return wall, cpu


def bench(op: str, log_n: int, fn: Callable[[], object], runs: int) -> dict[str, Any]:
    wall, cpu = time_runs(fn, runs)
    med = statistics.median(wall)
    n = 1 << log_n
    row = {
        "op": op,
        "log_size": log_n,
        "n": n,
        "median_ms": round(med, 3),
        "min_ms": round(min(wall), 3),
        "ns_per_element": round(med * 1e6 / n, 2),
        "median_cpu_ms": round(statistics.median(cpu), 3),
        "runs_ms": [round(t, 3) for t in wall],
    }
    print(
        f"{op:>14} 2^{log_n:<2}  {med:10.2f} ms  (min {min(wall):.2f}, {row['ns_per_element']} ns/elem,"
        f" cpu {row['median_cpu_ms']:.1f} ms)",
        flush=True,
    )
    return row


def bench_elementwise(log_n: int, runs: int) -> list[dict[str, Any]]:
    a = random_montgomery(1 << log_n, 1)
    b = random_montgomery(1 << log_n, 2)
    return [
        bench("mul", log_n, lambda: fr_vec.mul(a, b), runs),
        bench("batch_inverse", log_n, lambda: fr_vec.batch_inverse(a), runs),
    ]


def bench_ntt(log_n: int, runs: int) -> list[dict[str, Any]]:
    d = Domain(log_n)
    x = random_montgomery(d.size, log_n)
    t0 = time.perf_counter()
    d.ntt(x)  # builds the twiddle table (and compiles on a cold numba cache)
    setup = (time.perf_counter() - t0) * 1e3
    print(f"{'first ntt':>14} 2^{log_n:<2}  {setup:10.2f} ms  (twiddle table + warm-up)", flush=True)
    rows = [
        bench("ntt", log_n, lambda: d.ntt(x), runs),
        bench("intt", log_n, lambda: d.intt(x), runs),
        bench("coset_ntt", log_n, lambda: d.coset_ntt(x), runs),
        bench("ntt_inplace", log_n, lambda: d.ntt_inplace(x), runs),
    ]
    clear_twiddle_cache()
    return rows


def run(sizes: list[int], runs: int) -> list[dict[str, Any]]:
    results = bench_elementwise(20, runs)
    for log_n in sizes:
        results += bench_ntt(log_n, runs)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results to this JSON file")
    parser.add_argument("--big", action="store_true", help="also run the NTTs at 2^24")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per figure (median reported)")
    args = parser.parse_args(argv)

    sizes = [16, 20] + ([24] if args.big else [])
    load_before = os.getloadavg()
    idle_before = cpu_idle_percent()
    print(f"cpu idle before: {idle_before} %, load average {load_before[0]:.2f}", flush=True)
    results = run(sizes, args.runs)
    report = {
        "hardware": hardware(),
        "date": dt.date.today().isoformat(),
        "cpu_idle_percent_before": idle_before,
        "loadavg_before": [round(v, 2) for v in load_before],
        "loadavg_after": [round(v, 2) for v in os.getloadavg()],
        "results": results,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
