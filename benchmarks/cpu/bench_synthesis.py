"""Synthesis time of one Filecoin partition on the CPU: PoRep-2KiB and WinningPoSt-2KiB.

This is the figure later compiled-synthesis work must beat. Each circuit is partition 0 of a real
proof over a freshly sealed 2KiB test sector (`cuzk.circuits.filecoin.compound.sample_compound`),
built before any timing. Three paths are timed, each into a fresh constraint system:

* ``witness``: the witness only (`WitnessCS`, bellperson's witness back end): every gadget computes
  its values, no row is evaluated. What a compiled circuit needs from the Python side.
* ``proving``: `synthesize_for_proving` into a `ProvingAssignment`: values plus every row's A, B, C
  evaluation and the A/B densities — what the prover consumes today.
* ``export``: `Assignment.from_proving_assignment` on that result: the limb arrays handed to the
  prover (and, in the daemon, to shared memory); timed separately, after ``proving``.

Both clocks are recorded: wall time (the printed figures) and process CPU time (in the JSON; on a
shared machine it is the steadier of the two). Figures are medians over ``--reps`` samples; the
samples and the load average before and after are in the JSON. Every sample is checked: the
witness path's values equal the proving path's, and the allocated public inputs are the ones the
verifier derives.

    python benchmarks/cpu/bench_synthesis.py --reps 3
    python benchmarks/cpu/bench_synthesis.py --circuits winning-2k --reps 5 --json /tmp/synthesis.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write

from cuzk.circuits.filecoin.compound import PartitionInstance, sample_compound
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import synthesize_for_proving
from cuzk.r1cs import LinearCombination, ProvingAssignment, Variable, WitnessCS

DEFAULT_CIRCUITS = ("porep-2k", "winning-2k")


def synthesize_witness(instance: PartitionInstance) -> WitnessCS:
    """The witness path run as bellperson runs it: ONE first, the circuit, then one row per input
    (counted only, as WitnessCS evaluates nothing)."""
    cs = WitnessCS()
    cs.alloc_input("ONE", 1)
    instance.synthesize(cs)
    for i in range(cs.num_inputs):
        cs.enforce("input constraint", LinearCombination.of(Variable.input(i)), LinearCombination(),
                   LinearCombination())
    return cs


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float, float]:
    """fn(*args), its wall seconds and its process CPU seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def bench_circuit(circuit_id: str, reps: int, seed: int) -> dict[str, Any]:
    build_start = time.perf_counter()
    instance = sample_compound(circuit_id, seed).instance(0)
    build_s = time.perf_counter() - build_start
    expected_inputs = [1, *instance.public_inputs()]
    samples: dict[str, dict[str, list[float]]] = {p: {"wall": [], "cpu": []} for p in ("witness", "proving", "export")}
    rows = aux = 0
    for _ in range(reps):
        witness, wall, cpu = timed(synthesize_witness, instance)
        samples["witness"]["wall"].append(wall)
        samples["witness"]["cpu"].append(cpu)
        proving, wall, cpu = timed(synthesize_for_proving, instance)
        samples["proving"]["wall"].append(wall)
        samples["proving"]["cpu"].append(cpu)
        assert isinstance(proving, ProvingAssignment)
        if proving.input_assignment != expected_inputs:
            raise SystemExit(f"{circuit_id}: the witness allocates other public inputs than the verifier derives")
        if witness.aux_assignment != proving.aux_assignment or witness.input_assignment != proving.input_assignment:
            raise SystemExit(f"{circuit_id}: the witness-only path computed other values than the proving path")
        if witness.num_constraints != proving.num_constraints:
            raise SystemExit(f"{circuit_id}: the two paths saw different row counts")
        rows, aux = proving.num_constraints, proving.num_aux
        del witness
        _, wall, cpu = timed(Assignment.from_proving_assignment, proving)
        samples["export"]["wall"].append(wall)
        samples["export"]["cpu"].append(cpu)
        del proving
    result: dict[str, Any] = {"circuit_id": circuit_id, "constraints": rows, "public_inputs": len(expected_inputs),
                              "aux": aux, "instance_build_s": build_s}
    for path, clocks in samples.items():
        wall_s, cpu_s = statistics.median(clocks["wall"]), statistics.median(clocks["cpu"])
        result[path] = {"median_wall_s": wall_s, "median_cpu_s": cpu_s, "rows_per_s_wall": rows / wall_s,
                        "rows_per_s_cpu": rows / cpu_s, "wall_samples_s": clocks["wall"],
                        "cpu_samples_s": clocks["cpu"]}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--circuits", default=",".join(DEFAULT_CIRCUITS),
                    help=f"comma-separated Filecoin circuit ids (default {','.join(DEFAULT_CIRCUITS)})")
    ap.add_argument("--reps", type=int, default=3, help="samples per figure; the median is reported (default 3)")
    ap.add_argument("--seed", type=int, default=0, help="test sector seed (default 0)")
    ap.add_argument("--json", type=Path, help="where to write the JSON record (default: results/)")
    args = ap.parse_args()
    if args.reps < 1:
        ap.error("--reps must be at least 1")

    load_before = os.getloadavg()
    print(f"wall seconds per partition, median of {args.reps} (rows/s in parentheses)")
    print(f"{'circuit':<12} {'rows':>11} {'witness':>20} {'proving':>20} {'export':>10}")
    results = []
    for circuit_id in args.circuits.split(","):
        r = bench_circuit(circuit_id.strip(), args.reps, args.seed)
        results.append(r)
        w, p, e = r["witness"], r["proving"], r["export"]
        print(f"{r['circuit_id']:<12} {r['constraints']:>11,} "
              f"{w['median_wall_s']:>8.2f} s ({w['rows_per_s_wall']:>7,.0f}) "
              f"{p['median_wall_s']:>8.2f} s ({p['rows_per_s_wall']:>7,.0f}) {e['median_wall_s']:>8.2f} s", flush=True)
    path = write("synthesis-cpu", envelope("synthesis-cpu", results, reps=args.reps, seed=args.seed,
                                           loadavg_before=load_before, loadavg_after=os.getloadavg()), args.json)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
