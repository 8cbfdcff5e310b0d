"""Synthesis of one Filecoin partition: the constraint-system path against a compiled circuit.

Per circuit (default winning-2k and porep-2k), on partition 0 of a fresh test sector's proof:

* ``constraint system``: ``synthesize_for_proving`` + ``Assignment.from_proving_assignment``, the
  path the engine takes without a compiled file (every row's A, B, C evaluated in Python);
* ``compiled``: ``synthesize_witness`` (WitnessCS: allocations only) + ``Assignment.from_compiled``
  (witness to limbs, a = A·w, b = B·w, c = C·w with the numba SpMV, and the a·b = c check), split
  into its parts: ``witness``, ``to_limbs``, ``spmv`` (the three products) and ``check``.

Both paths' results are compared array by array once (they must be identical). One-off costs are
reported separately: recording and compiling the blank circuit, writing the file and loading it
back (memory-mapped, every digest verified). Figures are medians over ``--reps`` repetitions, the
two paths alternating within each repetition; wall and process CPU seconds are both recorded (the
SpMV runs on numba's thread pool, so its CPU time exceeds its wall time).

    python benchmarks/cpu/bench_compiled.py --reps 3 --circuits winning-2k porep-2k
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write

from cuzk.circuits.filecoin.compound import blank_circuit, sample_compound
from cuzk.field.limbs import ints_to_limbs
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import compile_circuit, synthesize_for_proving, synthesize_witness
from cuzk.r1cs.compiled_file import load_compiled, write_compiled

FIELDS = ("a", "b", "c", "inputs", "aux", "a_aux_density", "b_input_density", "b_aux_density")


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def compiled_sample(compiled: Any, instance: Any) -> dict[str, tuple[float, float]]:
    """(wall, cpu) seconds of each step of the compiled path, as `Assignment.from_compiled` runs them."""
    witness, w_wall, w_cpu = timed(lambda: synthesize_witness(instance))
    (inputs, aux), l_wall, l_cpu = timed(lambda: (ints_to_limbs(witness.input_assignment),
                                                  ints_to_limbs(witness.aux_assignment)))
    (a, b, c), s_wall, s_cpu = timed(lambda: compiled.evaluate(inputs, aux))
    _, c_wall, c_cpu = timed(lambda: compiled.check_satisfied(a, b, c))
    return {"witness": (w_wall, w_cpu), "to_limbs": (l_wall, l_cpu), "spmv": (s_wall, s_cpu),
            "check": (c_wall, c_cpu)}


def bench_circuit(circuit_id: str, reps: int, workdir: Path) -> dict[str, Any]:
    instance = sample_compound(circuit_id, 3).instance(0)
    compiled, compile_wall, compile_cpu = timed(lambda: compile_circuit(blank_circuit(circuit_id), circuit_id))
    path = workdir / f"{circuit_id}.cuzk-r1cs"
    _, write_wall, _ = timed(lambda: write_compiled(compiled, path))
    loaded, load_wall, _ = timed(lambda: load_compiled(path, expect_circuit_id=circuit_id))
    # warm-up (numba kernels from their cache) and the identity check
    ref = Assignment.from_proving_assignment(synthesize_for_proving(instance))
    got = Assignment.from_compiled(loaded, synthesize_witness(instance))
    identical = all(np.array_equal(getattr(ref, f), getattr(got, f)) for f in FIELDS)
    del ref, got
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in (
        "constraint system", "compiled", "witness", "to_limbs", "spmv", "check")}
    for _ in range(reps):
        _, wall, cpu = timed(lambda: Assignment.from_proving_assignment(synthesize_for_proving(instance)))
        samples["constraint system"].append((wall, cpu))
        parts = compiled_sample(loaded, instance)
        for name, t in parts.items():
            samples[name].append(t)
        samples["compiled"].append((sum(w for w, _ in parts.values()), sum(c for _, c in parts.values())))
    medians = {k: {"wall_s": statistics.median(w for w, _ in v), "cpu_s": statistics.median(c for _, c in v),
                   "samples_wall_s": [round(w, 4) for w, _ in v]} for k, v in samples.items()}
    rows = compiled.num_constraints
    cs_wall, comp_wall = medians["constraint system"]["wall_s"], medians["compiled"]["wall_s"]
    return {
        "circuit_id": circuit_id, "constraints": rows, "inputs": compiled.num_inputs, "aux": compiled.num_aux,
        "nnz": {"a": compiled.a.nnz, "b": compiled.b.nnz, "c": compiled.c.nnz},
        "coefficients": int(compiled.coeff_table.shape[0]), "file_bytes": path.stat().st_size,
        "identical": identical,
        "one_off": {"record_and_compile_wall_s": compile_wall, "record_and_compile_cpu_s": compile_cpu,
                    "write_wall_s": write_wall, "load_verified_wall_s": load_wall},
        "median": medians,
        "rows_per_s": {"constraint system": rows / cs_wall, "compiled": rows / comp_wall,
                       "spmv": rows / medians["spmv"]["wall_s"]},
        "speedup_wall": cs_wall / comp_wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--circuits", nargs="+", default=["winning-2k", "porep-2k"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", type=Path, help="output file (default: results/compiled-cpu-<date>.json)")
    ap.add_argument("--note", default="", help="free text stored with the results (e.g. machine load)")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for cid in args.circuits:
            r = bench_circuit(cid, args.reps, Path(tmp))
            results.append(r)
            m = r["median"]
            print(f"{cid}: {r['constraints']:,} rows, identical={r['identical']}; constraint system "
                  f"{m['constraint system']['wall_s']:.2f} s, compiled {m['compiled']['wall_s']:.2f} s "
                  f"(witness {m['witness']['wall_s']:.2f}, to_limbs {m['to_limbs']['wall_s']:.2f}, spmv "
                  f"{m['spmv']['wall_s']:.3f}, check {m['check']['wall_s']:.3f}): {r['speedup_wall']:.2f}x; "
                  f"one-off compile {r['one_off']['record_and_compile_wall_s']:.1f} s", flush=True)
    payload = envelope("compiled-synthesis", results, reps=args.reps, numba_threads=numba.get_num_threads(),
                       note=args.note)
    print(write("compiled-cpu", payload, args.json))


if __name__ == "__main__":
    main()
