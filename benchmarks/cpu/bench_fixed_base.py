"""Batch fixed-base multiplication (Groth16 parameter generation) on the CPU.

For each size and group: the window table is built once (timed separately: `table_s`), then
`g{1,2}_fixed_base_batch` is timed `--reps` times (median) with the table cached, on all of numba's
threads and on one thread. `us_per_point_thread` = wall time * threads / n, the figure to compare
with the per-thread targets (G1 <= ~20 us, G2 <= ~60 us). The load average is recorded because the
development machine is shared.

    python benchmarks/cpu/bench_fixed_base.py --sizes 14,16 --reps 3
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import numba

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, median_time, write

from cuzk.curve.fixed_base import (
    choose_window,
    clear_table_cache,
    g1_fixed_base_batch,
    g2_fixed_base_batch,
    scalars_from_ints,
)
from cuzk.curve.points import G1Point, G2Point
from cuzk.field.constants import R_MODULUS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="14,16", help="comma-separated log2 sizes")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    rng = random.Random(2026)
    all_threads = numba.get_num_threads()
    # Compile (or load from the numba cache) before timing anything.
    g1_fixed_base_batch(G1Point(), scalars_from_ints([1, 2]))
    g2_fixed_base_batch(G2Point(), scalars_from_ints([1, 2]))

    results = []
    for log_n in (int(s) for s in args.sizes.split(",")):
        n = 1 << log_n
        scalars = scalars_from_ints(rng.randrange(R_MODULUS) for _ in range(n))
        cases = (("G1", g1_fixed_base_batch, G1Point()), ("G2", g2_fixed_base_batch, G2Point()))
        for group, fn, base in cases:
            clear_table_cache()
            start = time.perf_counter()
            fn(base, scalars[:1], window=choose_window(n))      # builds and caches the table
            table_s = time.perf_counter() - start
            for threads in sorted({all_threads, 1}, reverse=True):
                numba.set_num_threads(threads)
                med, samples = median_time(lambda fn=fn, base=base, s=scalars: fn(base, s), args.reps)
                row = {
                    "group": group, "log_n": log_n, "n": n, "window": choose_window(n), "threads": threads,
                    "median_s": round(med, 4), "samples_s": [round(s, 4) for s in samples],
                    "table_s": round(table_s, 4),
                    "us_per_point_wall": round(med / n * 1e6, 2),
                    "us_per_point_thread": round(med * threads / n * 1e6, 2),
                    "loadavg_1m": round(os.getloadavg()[0], 2),
                }
                results.append(row)
                print(f"{group} 2^{log_n} threads={threads}: {med:.3f} s "
                      f"({row['us_per_point_thread']} us/point/thread, table {table_s:.3f} s, "
                      f"load {row['loadavg_1m']})", flush=True)
            numba.set_num_threads(all_threads)

    path = write("fixed-base-cpu", envelope("fixed-base-cpu", results, reps=args.reps), args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
