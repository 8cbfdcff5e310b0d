"""A compiled circuit's a, b, c and their a·b = c check on the host, as a GPU whose plan cannot hold
the products computes them (and the CPU backend): three passes over the rows (`spmv_table` per
matrix, then `check_rows`) against one (`spmv3_table`, which computes a row's three products and
checks them together), on a real partition's witness.

Medians over ``--reps`` repetitions per numba thread count, the two forms alternating; both forms'
results are compared once (they must be identical).

    python benchmarks/cpu/bench_host_products.py --circuit porep-2k --threads 1 2 --reps 7
    python benchmarks/cpu/bench_host_products.py --compiled /tmp/e2e/params/compiled/porep-2k.cuzk-r1cs

`--rows N` takes the circuit's first N rows only (a PoRep-32GiB partition's 130M rows, its 4.2 GB
witness and 12.5 GB of a, b, c do not fit a small machine; its first 2^25 rows show the per-row cost
where the witness is far larger than the caches); `--forms one` times the one pass alone.
`--random-witness` takes a PoRep partition's witness from random well-formed values
(`random_stacked_circuit`, as for sectors too large to build): the rows that tie it to a sector fail
the check, the others are a witness's.

    python benchmarks/cpu/bench_host_products.py --circuit porep-32g --compiled DIR/porep-32g.cuzk-r1cs \
        --random-witness --rows 33554432 --forms one --threads 1 2 --reps 3
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
from cuzk.circuits.filecoin.porep import PRODUCTION_CONFIGS, random_stacked_circuit
from cuzk.circuits.filecoin.porep_witness import porep_witness
from cuzk.filecoin.sizes import CircuitKind, parse_circuit_id
from cuzk.groth16.synthesis import compile_circuit
from cuzk.r1cs.compiled_file import load_compiled
from cuzk.r1cs.spmv import check_rows, spmv3_table, spmv_table


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--circuit", default="porep-2k", help="a Filecoin circuit id (its partition 0's witness)")
    p.add_argument("--compiled", type=Path, help="its compiled file (default: compiled here, which takes a while)")
    p.add_argument("--threads", type=int, nargs="+", default=[1, numba.config.NUMBA_NUM_THREADS])
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--rows", type=int, help="the first ROWS rows only (default: all)")
    p.add_argument("--forms", choices=("both", "one"), default="both", help="'one': the one pass alone")
    p.add_argument("--random-witness", action="store_true",
                   help="a PoRep circuit's witness from random well-formed values (module docstring)")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.reps < 1 or any(t < 1 or t > numba.config.NUMBA_NUM_THREADS for t in args.threads):
        p.error(f"--reps >= 1 and each of --threads in 1..{numba.config.NUMBA_NUM_THREADS}")
    if args.rows is not None and args.rows < 1:
        p.error("--rows must be at least 1")
    if args.compiled is not None:
        compiled = load_compiled(args.compiled, expect_circuit_id=args.circuit)
    else:
        compiled = compile_circuit(blank_circuit(args.circuit), args.circuit)
    if args.random_witness:
        kind, size = parse_circuit_id(args.circuit)
        if kind is not CircuitKind.POREP:
            p.error("--random-witness is for PoRep circuits")
        inputs, aux = porep_witness(random_stacked_circuit(PRODUCTION_CONFIGS[size.sector_bytes], seed=32))
    else:
        inputs, aux = sample_compound(args.circuit, 3).partition_circuit(0).witness_arrays()
    rows = min(args.rows or compiled.num_constraints, compiled.num_constraints)
    # A leading row range's pointers index the whole cols and coefficients as they are.
    mats = tuple((m.row_ptr[:rows + 1], m.cols, m.coeff_idx) for m in (compiled.a, compiled.b, compiled.c))
    table, canonical = compiled.coeff_table, compiled.coeff_table_canonical
    outs = tuple(np.empty((rows, 4), dtype=np.uint64) for _ in range(3))

    def three_passes() -> tuple[np.ndarray, ...]:
        a, b, c = (spmv_table(*m, table, inputs, aux, o, table_canonical=canonical)
                   for m, o in zip(mats, outs, strict=True))
        return a, b, c, check_rows(a, b, c)

    def one_pass() -> tuple[np.ndarray, ...]:
        return spmv3_table(mats, table, inputs, aux, outs, check=True, table_canonical=canonical)

    forms = {"one_pass": one_pass} if args.forms == "one" else {"three_passes": three_passes, "one_pass": one_pass}
    got = one_pass()
    if got[3].size and not args.random_witness:
        raise SystemExit(f"the witness does not satisfy the circuit (rows {got[3][:8].tolist()} ...)")
    if "three_passes" in forms and not all(np.array_equal(x, y) for x, y in zip(three_passes(), got, strict=True)):
        raise SystemExit("the two forms differ")
    results = []
    for threads in args.threads:
        numba.set_num_threads(threads)
        samples: dict[str, list[float]] = {name: [] for name in forms}
        for _ in range(args.reps):
            for name, fn in forms.items():
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
        med = {k: statistics.median(v) for k, v in samples.items()}
        entry = {"threads": threads, "median_s": med, "samples_s": samples,
                 "ns_per_row": {k: v / rows * 1e9 for k, v in med.items()}}
        line = (f"{threads} thread(s): one pass {med['one_pass'] * 1e3:.1f} ms "
                f"({entry['ns_per_row']['one_pass']:.1f} ns a row)")
        if "three_passes" in med:
            entry["ratio_one_over_three"] = med["one_pass"] / med["three_passes"]
            line += f", three passes {med['three_passes'] * 1e3:.1f} ms ({entry['ratio_one_over_three']:.2f}x)"
        results.append(entry)
        print(line, flush=True)
    nonzeros = {name: int(m[0][rows]) for name, m in zip("abc", mats, strict=True)}
    payload = envelope("bench_host_products", results, circuit=args.circuit, rows=rows,
                       circuit_rows=compiled.num_constraints, nonzeros=nonzeros, reps=args.reps,
                       witness="random well-formed values (random_stacked_circuit seed 32)" if args.random_witness
                       else "sample_compound seed 3, partition 0", unsatisfied_rows=int(got[3].size))
    print(write(f"host-products-{args.circuit}-cpu", payload, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
