"""Poseidon and Merkle-path witness generation: batched generators against the WitnessCS path.

The WitnessCS path is how a partition's witness is produced today: the gadget runs per instance,
allocating every value through `WitnessCS.alloc` (its hash values come from the gadget's numba
kernel, one hash at a time). The generators (`cuzk.witness_gen.poseidon` / `.merkle`) compute the
same values for all instances in one parallel call. Both see the same random instances; after
timing, every generated aux row is compared with the WitnessCS one, so a figure is only written
for identical output.

Hashes: every (arity, tag) the Filecoin circuits use. Paths: PoRep's tree_c / tree_r_last openings
(`enforce_inclusion`) of the 2KiB (8), 32GiB (8-8) and 64GiB (8-8-2) trees, and a 2KiB tree_d
(binary SHA-256) opening, with random siblings (a witness does not need a real tree; the
generator's root is what the circuit would compute).

Figures are wall-clock medians over ``--reps`` runs, the two contenders alternating; the generator
uses numba's threads (all cores by default; recorded). One untimed warm-up of each contender loads
the compiled kernels first. On a loaded machine each parallel call also pays the thread pool's
wake-up (~12 ms was seen on a busy 2-core box), which dominates calls of a few instances.

    python benchmarks/witness/bench_witness_gen_poseidon.py --hashes 1024 --paths 128 --sha-paths 4 --reps 3
"""

from __future__ import annotations

import argparse
import os
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
from _common import envelope, median_time, write

from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs, limbs_to_ints
from cuzk.gadgets.num import AllocatedNum
from cuzk.gadgets.por import PathLevel, TreeShape, enforce_inclusion
from cuzk.gadgets.poseidon import poseidon_hash_circuit
from cuzk.hashes.poseidon_constants import custom_tag, merkle_tree_tag, poseidon_constants
from cuzk.r1cs import WitnessCS
from cuzk.witness_gen.merkle import PathLayout, merkle_path_witness
from cuzk.witness_gen.poseidon import poseidon_witness

HASH_CASES = [("2 merkle", 2, merkle_tree_tag(2)), ("2 custom(1)", 2, custom_tag(1)),
              ("4 merkle", 4, merkle_tree_tag(4)), ("8 merkle", 8, merkle_tree_tag(8)),
              ("11 merkle", 11, merkle_tree_tag(11))]
PATH_CASES = [("2KiB 8", TreeShape(64, 8)), ("32GiB 8-8", TreeShape(1 << 30, 8, 8)),
              ("64GiB 8-8-2", TreeShape(1 << 31, 8, 8, 2))]
#: tree_d (binary SHA-256) openings: ~45,000 aux per level, so fewer of them (`--sha-paths`).
SHA_PATH_CASES = [("2KiB tree_d", TreeShape.binary_sha256(64))]


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def _row(name: str, count: int, reps: int, cs_fn: Callable[[], list[list[int]]],
         gen_fn: Callable[[], np.ndarray], unit: str) -> dict[str, Any]:
    """Time both contenders (after a warm-up), alternating so that both see the same machine state,
    and check that their outputs are identical."""
    cs_fn(), gen_fn()
    cs_samples, gen_samples = [], []
    for _ in range(reps):
        cs_samples.append(median_time(cs_fn, 1)[0])
        gen_samples.append(median_time(gen_fn, 1)[0])
    cs_s, gen_s = statistics.median(cs_samples), statistics.median(gen_samples)
    reference, generated = cs_fn(), gen_fn()
    for i, expected in enumerate(reference):
        if limbs_to_ints(generated[i]) != expected:
            raise SystemExit(f"{name}: instance {i}: the generator's aux differs from WitnessCS's")
    row = {"case": name, unit: count, "aux_per_instance": generated.shape[1],
           "witnesscs_s": cs_s, "generator_s": gen_s,
           f"witnesscs_{unit}_per_s": _rate(count, cs_s), f"generator_{unit}_per_s": _rate(count, gen_s),
           "speedup": cs_s / gen_s, "witnesscs_samples_s": cs_samples, "generator_samples_s": gen_samples}
    print(f"{name:<14} {count:>6} {row[f'witnesscs_{unit}_per_s']:>14,.0f} {row[f'generator_{unit}_per_s']:>14,.0f} "
          f"{row['speedup']:>8.1f}x", flush=True)
    return row


def bench_hashes(count: int, reps: int, rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    print(f"{'hash':<14} {'count':>6} {'WitnessCS h/s':>14} {'generator h/s':>14} {'speed-up':>9}")
    for name, arity, tag in HASH_CASES:
        constants = poseidon_constants(arity)
        values = [[rng.randrange(R_MODULUS) for _ in range(arity)] for _ in range(count)]
        batch = ints_to_limbs([v for inst in values for v in inst]).reshape(count, arity, 4)

        def via_cs(values: list[list[int]] = values, constants: Any = constants, tag: int = tag,
                   arity: int = arity) -> list[list[int]]:
            cs = WitnessCS()
            cs.alloc_input("ONE", 1)
            spans = []
            for inst in values:
                inputs = [cs.alloc("x", v) for v in inst]
                start = cs.num_aux
                poseidon_hash_circuit(cs, inputs, constants, tag, inst)
                spans.append((start, cs.num_aux))
            return [cs.aux_assignment[a:b] for a, b in spans]

        def via_generator(batch: np.ndarray = batch, constants: Any = constants, tag: int = tag) -> np.ndarray:
            return poseidon_witness(batch, constants, tag).aux

        rows.append(_row(name, count, reps, via_cs, via_generator, "hashes"))
    return rows


def bench_paths(cases: list[tuple[str, TreeShape]], count: int, reps: int,
                rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    print(f"{'path':<14} {'count':>6} {'WitnessCS p/s':>14} {'generator p/s':>14} {'speed-up':>9}")
    for name, shape in cases:
        per_path = sum(a - 1 for a in shape.arities)
        indices = np.array([rng.randrange(shape.leaves) for _ in range(count)], dtype=np.int64)
        leaf_values = [rng.randrange(R_MODULUS) for _ in range(count)]
        sibling_values = [[rng.randrange(R_MODULUS) for _ in range(per_path)] for _ in range(count)]
        leaves = ints_to_limbs(leaf_values)
        siblings = ints_to_limbs([v for s in sibling_values for v in s]).reshape(count, per_path, 4)
        paths = []
        for index, flat in zip(indices.tolist(), sibling_values, strict=True):
            path, offset = [], 0
            for arity in shape.arities:
                path.append(PathLevel(flat[offset:offset + arity - 1], index % arity))
                offset += arity - 1
                index //= arity
            paths.append(path)

        def via_cs(shape: TreeShape = shape, paths: list[list[PathLevel]] = paths,
                   leaf_values: list[int] = leaf_values) -> list[list[int]]:
            cs = WitnessCS()
            cs.alloc_input("ONE", 1)
            root = AllocatedNum.alloc(cs, "root", 0)  # WitnessCS checks no rows
            spans = []
            for path, value in zip(paths, leaf_values, strict=True):
                leaf = AllocatedNum.alloc(cs, "leaf", value)
                start = cs.num_aux
                enforce_inclusion(cs, shape, path, leaf, root)
                spans.append((start, cs.num_aux))
            return [cs.aux_assignment[a:b] for a, b in spans]

        def via_generator(shape: TreeShape = shape, leaves: np.ndarray = leaves, indices: np.ndarray = indices,
                          siblings: np.ndarray = siblings) -> np.ndarray:
            return merkle_path_witness(shape, PathLayout.INCLUSION, leaves, indices, siblings).aux

        rows.append(_row(name, count, reps, via_cs, via_generator, "paths"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hashes", type=int, default=1024, help="hashes per (arity, tag) case")
    ap.add_argument("--paths", type=int, default=128, help="openings per Poseidon tree shape")
    ap.add_argument("--sha-paths", type=int, default=4, help="openings of the SHA-256 tree_d")
    ap.add_argument("--reps", type=int, default=3, help="timed runs per contender; the median is reported")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, help="where to write the JSON record (default: results/)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    started = time.perf_counter()
    results = {"hashes": bench_hashes(args.hashes, args.reps, rng),
               "paths": bench_paths(PATH_CASES, args.paths, args.reps, rng)
               + bench_paths(SHA_PATH_CASES, args.sha_paths, args.reps, rng)}
    payload = envelope("witness-gen-poseidon", results, reps=args.reps, seed=args.seed, clock="wall",
                       numba_threads=numba.get_num_threads(), loadavg=os.getloadavg(),
                       total_s=time.perf_counter() - started)
    print(f"wrote {write('witness-gen-poseidon', payload, args.json)}")


if __name__ == "__main__":
    main()
