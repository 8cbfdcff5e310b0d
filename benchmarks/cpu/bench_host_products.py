"""A compiled circuit's a, b, c and their a·b = c check on the host, as a GPU whose plan cannot hold
the products computes them (and the CPU backend): three passes over the rows (`spmv_table` per
matrix, then `check_rows`) against one (`spmv3_table`, which computes a row's three products and
checks them together), on a real partition's witness.

Medians over ``--reps`` repetitions per numba thread count, the two forms alternating; both forms'
results are compared once (they must be identical).

    python benchmarks/cpu/bench_host_products.py --circuit porep-2k --threads 1 2 --reps 7
    python benchmarks/cpu/bench_host_products.py --compiled /tmp/e2e/params/compiled/porep-2k.cuzk-r1cs
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write

from cuzk.circuits.filecoin.compound import blank_circuit, sample_compound
from cuzk.groth16.synthesis import compile_circuit
from cuzk.r1cs.compiled_file import load_compiled
from cuzk.r1cs.spmv import check_rows, spmv3_table, spmv_table


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--circuit", default="porep-2k", help="a Filecoin circuit id (its partition 0's witness)")
    p.add_argument("--compiled", type=Path, help="its compiled file (default: compiled here, which takes a while)")
    p.add_argument("--threads", type=int, nargs="+", default=[1, numba.config.NUMBA_NUM_THREADS])
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.reps < 1 or any(t < 1 or t > numba.config.NUMBA_NUM_THREADS for t in args.threads):
        p.error(f"--reps >= 1 and each of --threads in 1..{numba.config.NUMBA_NUM_THREADS}")
    if args.compiled is not None:
        compiled = load_compiled(args.compiled, expect_circuit_id=args.circuit)
    else:
        compiled = compile_circuit(blank_circuit(args.circuit), args.circuit)
    inputs, aux = sample_compound(args.circuit, 3).partition_circuit(0).witness_arrays()
    mats = tuple((m.row_ptr, m.cols, m.coeff_idx) for m in (compiled.a, compiled.b, compiled.c))
    table, canonical, rows = compiled.coeff_table, compiled.coeff_table_canonical, compiled.num_constraints
    outs = tuple(np.empty((rows, 4), dtype=np.uint64) for _ in range(3))

    def three_passes() -> tuple[np.ndarray, ...]:
        a, b, c = (spmv_table(*m, table, inputs, aux, o, table_canonical=canonical)
                   for m, o in zip(mats, outs, strict=True))
        return a, b, c, check_rows(a, b, c)

    def one_pass() -> tuple[np.ndarray, ...]:
        return spmv3_table(mats, table, inputs, aux, outs, check=True, table_canonical=canonical)

    want = [x.copy() for x in three_passes()]
    got = one_pass()
    if not all(np.array_equal(x, y) for x, y in zip(want, got, strict=True)) or got[3].size:
        raise SystemExit("the two forms differ, or the witness does not satisfy the circuit")
    results = []
    for threads in args.threads:
        numba.set_num_threads(threads)
        samples: dict[str, list[float]] = {"three_passes": [], "one_pass": []}
        for _ in range(args.reps):
            for name, fn in (("three_passes", three_passes), ("one_pass", one_pass)):
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
        med = {k: statistics.median(v) for k, v in samples.items()}
        results.append({"threads": threads, "median_s": med, "samples_s": samples,
                        "ratio_one_over_three": med["one_pass"] / med["three_passes"]})
        print(f"{threads} thread(s): three passes {med['three_passes'] * 1e3:.1f} ms, one pass "
              f"{med['one_pass'] * 1e3:.1f} ms ({med['one_pass'] / med['three_passes']:.2f}x)", flush=True)
    nonzeros = {name: int(m.cols.shape[0]) for name, m in zip("abc", (compiled.a, compiled.b, compiled.c), strict=True)}
    payload = envelope("bench_host_products", results, circuit=args.circuit, rows=rows, nonzeros=nonzeros,
                       reps=args.reps)
    print(write(f"host-products-{args.circuit}-cpu", payload, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
