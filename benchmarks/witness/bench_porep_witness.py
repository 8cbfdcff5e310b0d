"""A whole PoRep partition's witness: the batched generators (`porep_witness`) against `WitnessCS`.

The WitnessCS path runs `StackedCircuit.synthesize` and allocates every aux value through a Python
`alloc` call; `porep_witness` produces the same (inputs, aux) limb arrays with one generator call
per gadget kind per step over all challenges of the partition. Two partitions:

* porep-2k: partition 0 of `sample_compound("porep-2k")` (a real test sector, 2 challenges); both
  contenders timed (WitnessCS including the conversion of its Python ints to limb arrays, the
  generator's output format), and their outputs compared element by element.
* 32GiB: the production circuit (18 challenges, 11 layers, tree_d of 2^30 leaves, 8-8 tree_c) over
  random well-formed values (`random_stacked_circuit`: no consistent sector, which no witness
  needs). The generator runs the whole partition (130M aux, 4.2 GB of limbs). WitnessCS runs the
  same circuit with ONE challenge (7.2M aux, 30-60 s on a loaded 2-core box), compared element by
  element with the generator's output for that circuit; its time x 18 is `witness_cs_s_scaled`
  (the 571 header aux, allocated once per partition, are a negligible part of the one-challenge run).

Per gadget kind, the generator's seconds (`porep_witness`'s `timings`): inputs (reading the
circuit's Python values), poseidon (column hashes and comm_r), merkle_poseidon (tree_c /
tree_r_last paths), merkle_sha256 (tree_d paths), bits (LE decompositions and label messages),
sha256_label (the SHA-256 kernel), assemble (spreading the label aux bits into limb rows; it also
takes the first-touch page faults of a fresh aux array). The 32GiB generator is timed twice: a fresh
aux array per run (`generator_s`), and one array refilled through `out=` (`generator_reused_out_s`),
as a pipeline keeping its buffers would.

    python benchmarks/witness/bench_porep_witness.py --reps 3
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write

from cuzk.circuits.filecoin.compound import sample_compound
from cuzk.circuits.filecoin.porep import PRODUCTION_CONFIGS, StackedCircuit, random_stacked_circuit
from cuzk.circuits.filecoin.porep_witness import GADGET_KINDS, PorepLayout, porep_witness
from cuzk.field.limbs import ints_to_limbs
from cuzk.groth16.synthesis import synthesize_witness


def _generator_runs(circuit: StackedCircuit, reps: int, *, reuse: bool = False) -> tuple[list[float],
                                                                                      dict[str, float]]:
    """Wall seconds of `reps` runs (after one untimed warm-up) and the median run's per-kind seconds;
    with `reuse`, every run fills the warm-up's aux array again (`out=`) instead of a fresh one."""
    _, buffer = porep_witness(circuit)
    if not reuse:
        del buffer
        buffer = None
    samples: list[tuple[float, dict[str, float]]] = []
    for _ in range(reps):
        timings: dict[str, float] = {}
        gc.collect()
        start = time.perf_counter()
        result = porep_witness(circuit, timings, out=buffer)
        samples.append((time.perf_counter() - start, timings))
        del result
    samples.sort(key=lambda s: s[0])
    return [s for s, _ in samples], samples[len(samples) // 2][1]


def _witness_cs(circuit: StackedCircuit) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Seconds of `synthesize_witness` with the conversion to limb arrays (the generator's output
    format), seconds of the conversion alone, and the arrays."""
    gc.collect()
    start = time.perf_counter()
    cs = synthesize_witness(circuit)
    converting = time.perf_counter()
    inputs, aux = ints_to_limbs(cs.input_assignment), ints_to_limbs(cs.aux_assignment)
    done = time.perf_counter()
    return done - start, done - converting, inputs, aux


def _identical(circuit: StackedCircuit, inputs: np.ndarray, aux: np.ndarray) -> bool:
    got_inputs, got_aux = porep_witness(circuit)
    return bool(np.array_equal(got_inputs, inputs) and np.array_equal(got_aux, aux))


def _shares(timings: dict[str, float]) -> dict[str, dict[str, float]]:
    total = sum(timings.values())
    return {kind: {"s": timings[kind], "share": timings[kind] / total} for kind in GADGET_KINDS}


def bench_2k(reps: int, cs_reps: int) -> dict[str, Any]:
    circuit = sample_compound("porep-2k", 1).partition_circuit(0)
    assert isinstance(circuit, StackedCircuit)
    generator, timings = _generator_runs(circuit, reps)
    via_cs, conversion = [], []
    for _ in range(cs_reps):
        seconds, converting, inputs, aux = _witness_cs(circuit)
        via_cs.append(seconds)
        conversion.append(converting)
    identical = _identical(circuit, inputs, aux)
    assert identical, "porep-2k: the generator's witness differs from WitnessCS's"
    layout = PorepLayout.of(circuit.config)
    result = {"partition": "porep-2k (sample_compound seed 1, partition 0)", "challenges": circuit.config.challenges,
              "aux": layout.num_aux, "inputs": layout.num_inputs, "identical": identical,
              "generator_s": statistics.median(generator), "generator_samples_s": generator,
              "witness_cs_s": statistics.median(via_cs), "witness_cs_samples_s": via_cs,
              "witness_cs_limb_conversion_s": statistics.median(conversion),
              "per_kind": _shares(timings)}
    result["speedup"] = result["witness_cs_s"] / result["generator_s"]
    return result


def bench_32g(reps: int, witness_cs: bool) -> dict[str, Any]:
    config = PRODUCTION_CONFIGS[32 << 30]
    layout = PorepLayout.of(config)
    circuit = random_stacked_circuit(config, seed=32)
    reused, reused_timings = _generator_runs(circuit, reps, reuse=True)
    generator, timings = _generator_runs(circuit, reps)
    result: dict[str, Any] = {
        "partition": "32GiB production layout, random well-formed values (random_stacked_circuit seed 32)",
        "challenges": config.challenges, "layers": config.layers, "aux": layout.num_aux,
        "aux_per_challenge": layout.per_challenge, "inputs": layout.num_inputs,
        "aux_limb_bytes": layout.num_aux * 32, "generator_s": statistics.median(generator),
        "generator_samples_s": generator, "per_kind": _shares(timings),
        "generator_reused_out_s": statistics.median(reused), "generator_reused_out_samples_s": reused,
        "per_kind_reused_out": _shares(reused_timings)}
    del circuit
    if witness_cs:
        one = random_stacked_circuit(dataclasses.replace(config, challenges=1), seed=33)
        one_generator, _ = _generator_runs(one, 1)
        seconds, converting, inputs, aux = _witness_cs(one)
        identical = _identical(one, inputs, aux)
        assert identical, "32GiB, 1 challenge: the generator's witness differs from WitnessCS's"
        scaled = seconds * config.challenges
        result.update({"witness_cs_one_challenge_s": seconds, "witness_cs_one_challenge_limb_conversion_s": converting,
                       "generator_one_challenge_s": one_generator[0],
                       "one_challenge_identical": identical, "witness_cs_s_scaled": scaled,
                       "speedup": scaled / result["generator_s"],
                       "scaling": f"WitnessCS on 1 challenge x {config.challenges} challenges (the header, "
                                  f"{layout.header} aux, is counted {config.challenges} times: negligible)"})
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3, help="timed generator runs per partition (median reported)")
    ap.add_argument("--reps-2k-cs", type=int, default=1, help="WitnessCS runs on porep-2k")
    ap.add_argument("--no-witness-cs-32g", action="store_true",
                    help="skip the 1-challenge 32GiB WitnessCS run (~2 minutes on 2 cores)")
    ap.add_argument("--note", default="", help="free text stored with the record (e.g. what else ran)")
    ap.add_argument("--json", type=Path, help="where to write the JSON record (default: results/)")
    args = ap.parse_args()
    started = time.perf_counter()
    load_before = os.getloadavg()
    results = {"porep_2k": bench_2k(args.reps, max(args.reps_2k_cs, 1)),
               "porep_32g": bench_32g(args.reps, not args.no_witness_cs_32g)}
    for name, row in results.items():
        print(f"{name}: generator {row['generator_s']:.3f} s for {row['aux']:,} aux; "
              + (f"WitnessCS {row.get('witness_cs_s', row.get('witness_cs_s_scaled', 0)):.1f} s; "
                 if "speedup" in row else "")
              + ", ".join(f"{k} {v['share']:.0%}" for k, v in row["per_kind"].items()))
    payload = envelope("porep-witness-cpu", results, reps=args.reps, clock="wall",
                       numba_threads=numba.get_num_threads(), loadavg_before=load_before,
                       loadavg_after=os.getloadavg(), note=args.note, total_s=time.perf_counter() - started)
    print(f"wrote {write('porep-witness-cpu', payload, args.json)}")


if __name__ == "__main__":
    main()
