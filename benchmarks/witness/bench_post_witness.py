"""PoSt and SnapDeals partition witnesses: the batched generators against the WitnessCS path.

Per partition, two ways to the (inputs, aux) limb arrays a compiled circuit takes:

* ``witness_cs``: ``synthesize_witness`` (the circuit through `WitnessCS`, one ``alloc`` at a time)
  plus ``to_limbs`` (its Python ints to (n, 4) uint64), which is what ``synthesize_compiled`` and
  the engine's compiled path did before the generators, and still do for circuits without one;
* ``generator``: ``circuit.witness_arrays()`` (`cuzk.circuits.filecoin.post_witness` /
  ``snap_witness``): a few batched calls over all sectors and challenges, limbs directly.

Circuits: the published 2KiB partitions from ``sample_compound`` (winning-2k, wpost-2k, snap-2k),
and 32GiB-shaped partitions with random, well-formed values (a witness needs no real sector):
WinningPoSt-32GiB whole (66 openings of the 8-8 tree); ``--wpost-sectors`` sectors of a
WindowPoSt-32GiB partition (10 openings each; the published partition has 2,349 sectors of the same
work, so per-sector figures scale linearly to it; the scaled figure is labelled as such); and, on
request, ``snap-32g-1`` (the SnapDeals-32GiB layout with 1 of its 86 challenges; both paths) and
``snap-32g`` (a whole SnapDeals-32GiB partition, 81M aux: the generator alone, as WitnessCS would
need tens of GB of Python ints).

Both outputs are compared element by element once per circuit (``identical``); figures are
wall-clock medians over ``--reps`` runs, the two contenders alternating, after one untimed warm-up
of each (numba kernels load from their cache).

    python benchmarks/witness/bench_post_witness.py --reps 3
    python benchmarks/witness/bench_post_witness.py --reps 1 --circuits snap-32g-1 snap-32g
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write

from cuzk.circuits.filecoin.compound import sample_compound
from cuzk.circuits.filecoin.post import FallbackPoStConfig, random_post_circuit
from cuzk.circuits.filecoin.snap import EmptySectorUpdateCircuit, EmptySectorUpdateConfig, UpdateChallengeProof
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs
from cuzk.groth16.synthesis import synthesize_witness

GIB32 = 32 << 30


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def random_snap(config: EmptySectorUpdateConfig, seed: int) -> EmptySectorUpdateCircuit:
    """Partition 1 with the middle allowed h; the challenges' tree_d paths share their partition part."""
    rng = random.Random(seed)

    def fr() -> int:
        return rng.randrange(R_MODULUS)

    top = [[fr()] for _ in range(config.partition_bit_len)]
    tree_r = config.tree_r.arities
    proofs = [UpdateChallengeProof(fr(), [[fr() for _ in range(a - 1)] for a in tree_r], fr(),
                                   [[fr()] for _ in range(config.challenge_bit_len - len(top))] + top, None,
                                   [[fr() for _ in range(a - 1)] for a in tree_r])
              for _ in range(config.challenge_count)]
    return EmptySectorUpdateCircuit(config, 1, config.hs[len(config.hs) // 2], fr(), fr(), fr(), fr(), fr(), fr(),
                                    [fr() for _ in range(config.apex_leaf_count)], proofs)


def bench(name: str, circuit: Any, reps: int, *, scale: tuple[str, float] | None = None,
          witness_cs: bool = True) -> dict[str, Any]:
    # warm-up and identity
    inputs, aux = circuit.witness_arrays()
    if not witness_cs:
        generator = [timed(circuit.witness_arrays)[1] for _ in range(reps)]
        return {"circuit": name, "inputs": int(inputs.shape[0]), "aux": int(aux.shape[0]), "identical": None,
                "median_wall_s": {"generator": statistics.median(generator)},
                "samples_wall_s": {"generator": [round(x, 4) for x in generator]},
                "aux_per_s": {"generator": aux.shape[0] / statistics.median(generator)}}
    reference = synthesize_witness(circuit)
    identical = (np.array_equal(inputs, ints_to_limbs(reference.input_assignment))
                 and np.array_equal(aux, ints_to_limbs(reference.aux_assignment)))
    num_constraints = reference.num_constraints
    del reference
    samples: dict[str, list[float]] = {"generator": [], "witness_cs": [], "to_limbs": []}
    for _ in range(reps):
        _, t = timed(circuit.witness_arrays)
        samples["generator"].append(t)
        cs, t = timed(lambda: synthesize_witness(circuit))
        samples["witness_cs"].append(t)
        _, t = timed(lambda cs=cs: (ints_to_limbs(cs.input_assignment), ints_to_limbs(cs.aux_assignment)))
        samples["to_limbs"].append(t)
        del cs
    med = {k: statistics.median(v) for k, v in samples.items()}
    old = med["witness_cs"] + med["to_limbs"]
    result: dict[str, Any] = {
        "circuit": name, "inputs": int(inputs.shape[0]), "aux": int(aux.shape[0]),
        "constraints_without_input_rows": num_constraints, "identical": identical,
        "median_wall_s": {**med, "witness_cs_total": old},
        "samples_wall_s": {k: [round(x, 4) for x in v] for k, v in samples.items()},
        "speedup": old / med["generator"],
        "aux_per_s": {"generator": aux.shape[0] / med["generator"], "witness_cs_total": aux.shape[0] / old},
    }
    if scale is not None:
        label, factor = scale
        result["scaled"] = {"to": label, "factor": factor,
                            "generator_s": med["generator"] * factor, "witness_cs_total_s": old * factor}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--circuits", nargs="+", default=["winning-2k", "wpost-2k", "snap-2k", "winning-32g",
                                                      "wpost-32g-sectors"],
                    help="also: snap-32g-1 (one challenge, both paths), snap-32g (generator only)")
    ap.add_argument("--wpost-sectors", type=int, default=20,
                    help="sectors of the WindowPoSt-32GiB-shaped partition (published: 2349)")
    ap.add_argument("--json", type=Path, help="output file (default: results/post-witness-cpu-<date>.json)")
    ap.add_argument("--note", default="", help="free text stored with the results (e.g. machine load)")
    args = ap.parse_args()
    window = FallbackPoStConfig.window(GIB32)
    results = []
    for name in args.circuits:
        scale, witness_cs = None, True
        snap32 = EmptySectorUpdateConfig.for_sector_size(GIB32)
        if name == "snap-32g-1":
            circuit = random_snap(dataclasses.replace(snap32, challenge_count=1), 3)
        elif name == "snap-32g":
            circuit, witness_cs = random_snap(snap32, 3), False
        elif name == "winning-32g":
            circuit = random_post_circuit(FallbackPoStConfig.winning(GIB32), 1)
        elif name == "wpost-32g-sectors":
            circuit = random_post_circuit(dataclasses.replace(window, sector_count=args.wpost_sectors), 2)
            name = f"wpost-32g-{args.wpost_sectors}-sectors"
            scale = (f"wpost-32g ({window.sector_count} sectors)", window.sector_count / args.wpost_sectors)
        else:
            circuit = sample_compound(name, 1).partition_circuit(0)
        r = bench(name, circuit, args.reps, scale=scale, witness_cs=witness_cs)
        results.append(r)
        m = r["median_wall_s"]
        if not witness_cs:
            print(f"{name}: {r['aux']:,} aux; generator {m['generator']:.2f} s (WitnessCS not run)", flush=True)
            continue
        line = (f"{name}: {r['aux']:,} aux, identical={r['identical']}; generator {m['generator']:.3f} s, WitnessCS "
                f"{m['witness_cs']:.3f} s + to_limbs {m['to_limbs']:.3f} s: {r['speedup']:.1f}x")
        if scale is not None:
            s = r["scaled"]
            line += (f"; scaled to {s['to']}: generator {s['generator_s']:.1f} s, "
                     f"WitnessCS {s['witness_cs_total_s']:.0f} s")
        print(line, flush=True)
    payload = envelope("post-snap-witness", results, reps=args.reps, numba_threads=numba.get_num_threads(),
                       note=args.note)
    print(write("post-witness-cpu", payload, args.json))


if __name__ == "__main__":
    main()
