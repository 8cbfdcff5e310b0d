"""H's quotient on the CPU (`cuzk.groth16.prover.quotient`): six transforms against bellperson's seven,
alternating within each repetition on the same a, b and c = a·b (every constraint holding, where the
two agree; checked), wall clock of each call, median of `--reps` after one warm-up of each.

    python benchmarks/cpu/bench_quotient.py --sizes 18,20,22 --reps 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="18,20,22", help="log2 domain sizes")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    from cuzk.field import fr_vec
    from cuzk.field.ntt import Domain
    from cuzk.groth16.prover import Reduction, quotient, quotient_shift

    rows = []
    for log_m in (int(x) for x in args.sizes.split(",") if x):
        m = 1 << log_m
        rng = np.random.default_rng(log_m)
        a, b = (rng.integers(0, 2**64, size=(m, 4), dtype=np.uint64) for _ in range(2))
        for v in (a, b):
            v[:, 3] &= np.uint64(2**62 - 1)  # below r
        a, b = fr_vec.to_montgomery(a), fr_vec.to_montgomery(b)
        c = fr_vec.mul(a, b)
        domain, red = Domain(log_m), Reduction(quotient_shift(m), divide=True)
        samples: dict[int, list[float]] = {6: [], 7: []}
        outs = {}
        for rep in range(args.reps + 1):  # the first round (twiddles, numba) is not counted
            for transforms in (6, 7):
                inputs = (a.copy(), b.copy(), c.copy())
                start = time.perf_counter()
                out = quotient(domain, red, *inputs, transforms=transforms)
                if rep:
                    samples[transforms].append((time.perf_counter() - start) * 1e3)
                else:
                    outs[transforms] = out
        row = {"log_m": log_m, "equal": bool(np.array_equal(outs[6], outs[7])),
               **{f"median_ms_{t}": round(statistics.median(samples[t]), 2) for t in (6, 7)},
               "ratio_6_to_7": round(statistics.median(x / y for x, y in zip(samples[6], samples[7], strict=True)), 3),
               "samples_ms": {t: [round(x, 2) for x in samples[t]] for t in (6, 7)}}
        print({k: v for k, v in row.items() if k != "samples_ms"}, flush=True)
        rows.append(row)
    path = write("cpu-quotient", envelope("cpu-quotient", rows), args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
