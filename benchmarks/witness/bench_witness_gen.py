"""SHA-256 witness generation: the batched generator (cuzk.witness_gen) against the WitnessCS path.

Workloads, each in the exact message shape a Filecoin circuit hashes (captured from the circuit code):

* ``hash2``: two field elements (tree_d nodes, SnapDeals apex rows): 512 bits, 2 compressions;
* ``label-1`` / ``label-2``: a PoRep label of layer 1 / 2 (the layer index is a constant, so the two
  layers are two configurations): 9,984 bits, 20 compressions.

Per workload, ``--cs-instances`` instances go through the real circuit function on a ``WitnessCS``; only
the ``hash_circuit`` call is timed (the message bits were allocated earlier by the circuit). The
generator then runs on exactly those instances (timed, and its aux must equal the WitnessCS slices
bit for bit, packed digest included), and on ``--batch`` random instances of the same configuration
for throughput. ``partition``: the SHA-256 share of one 32GiB PoRep partition (18 challenges, each 11
labels and 30 tree_d levels of hash2 = 5,040 compressions), generated plan by plan, one run.

Numbers are compressions per second of wall time; the generator uses numba's thread pool (all cores),
the WitnessCS path one core.

    python benchmarks/witness/bench_witness_gen.py --batch 512
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write

import cuzk.circuits.filecoin.porep as porep
import cuzk.gadgets.sha256 as sha256_gadget
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import limbs_to_int
from cuzk.gadgets.boolean import Boolean, reverse_bit_numbering, u64_into_boolean_vec_le
from cuzk.gadgets.num import AllocatedNum
from cuzk.r1cs import ConstraintSystem, WitnessCS
from cuzk.witness_gen import Sha256WitnessPlan

#: A 32GiB PoRep partition: challenges, layers, tree_d levels (docs/circuits.md §7).
PARTITION_CHALLENGES, PARTITION_LAYERS, TREE_D_LEVELS = 18, 11, 30


class Capture:
    """Replaces `module.hash_circuit` with a timed wrapper recording each call's message and aux range."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.calls: list[tuple[list[Boolean], WitnessCS, int, int]] = []
        self.seconds = 0.0
        self._real: Callable[..., Any] = sha256_gadget.hash_circuit

    def __enter__(self) -> Capture:
        def recording(cs: ConstraintSystem, bits: Sequence[Boolean]) -> Any:
            before = cs.num_aux
            start = time.perf_counter()
            out = self._real(cs, bits)
            self.seconds += time.perf_counter() - start
            self.calls.append((list(bits), cs, before, cs.num_aux))  # type: ignore[arg-type]
            return out

        self.module.hash_circuit = recording
        return self

    def __exit__(self, *exc: object) -> None:
        self.module.hash_circuit = self._real


def _fr_bits(cs: WitnessCS, rng: np.random.Generator) -> list[Boolean]:
    num = AllocatedNum.alloc(cs, "x", int.from_bytes(rng.bytes(32), "little") % R_MODULUS)
    return reverse_bit_numbering(num.to_bits_le(cs))


def run_hash2(rng: np.random.Generator) -> None:
    cs = WitnessCS()
    left, right = (AllocatedNum.alloc(cs, "x", int.from_bytes(rng.bytes(32), "little") % R_MODULUS) for _ in range(2))
    sha256_gadget.hash2_circuit(cs, left, right)


def run_label(rng: np.random.Generator, layer: int) -> None:
    cs = WitnessCS()
    replica = _fr_bits(cs, rng)
    node = u64_into_boolean_vec_le(cs, int(rng.integers(0, 1 << 62)))[::-1]
    degree = porep.BASE_DEGREE if layer == 1 else porep.BASE_DEGREE + porep.EXP_DEGREE
    base = [_fr_bits(cs, rng) for _ in range(degree)]
    parents = base * 6 + base[:1] if layer == 1 else base * 2 + base[:9]
    porep._create_label(cs, replica, parents, layer, node)


WORKLOADS: dict[str, tuple[Any, Callable[[np.random.Generator], None]]] = {
    "hash2": (sha256_gadget, run_hash2),
    "label-1": (porep, lambda rng: run_label(rng, 1)),
    "label-2": (porep, lambda rng: run_label(rng, 2)),
}


def random_messages(plan: Sha256WitnessPlan, n: int, rng: np.random.Generator) -> np.ndarray:
    messages = rng.integers(0, 2, (n, plan.message_bits), dtype=np.uint8)
    messages[:, plan.constant_positions] = plan.constant_values
    return messages


def bench_workload(name: str, cs_instances: int, batch: int, rng: np.random.Generator) -> dict[str, Any]:
    module, run = WORKLOADS[name]
    with Capture(module) as capture:
        for _ in range(cs_instances):
            run(rng)
    plan = Sha256WitnessPlan.for_booleans(capture.calls[0][0])
    messages = np.stack([Sha256WitnessPlan.values_of(bits) for bits, *_ in capture.calls])
    plan.generate_hash_circuit(messages[:1])  # numba kernels from their cache (or compiled): the serial one,
    plan.generate_hash_circuit(random_messages(plan, 64, rng))  # and the parallel one
    start = time.perf_counter()
    same = plan.generate_hash_circuit(messages)
    same_s = time.perf_counter() - start
    identical = all(
        np.array_equal(same.aux[i], np.array(cs.aux_assignment[before:after - 1], dtype=np.uint8))
        and limbs_to_int(same.packed[i]) == cs.aux_assignment[after - 1]
        for i, (_, cs, before, after) in enumerate(capture.calls))
    big = random_messages(plan, batch, rng)
    start = time.perf_counter()
    plan.generate_hash_circuit(big)
    batch_s = time.perf_counter() - start
    per = plan.num_blocks
    return {
        "workload": name, "message_bits": plan.message_bits, "constant_bits": int(plan.constant_positions.size),
        "compressions_per_instance": per, "aux_per_instance": plan.num_aux + 1, "identical": identical,
        "witness_cs": {"instances": cs_instances, "wall_s": capture.seconds,
                       "compressions_per_s": cs_instances * per / capture.seconds},
        "generator_same_instances": {"instances": cs_instances, "wall_s": same_s,
                                     "compressions_per_s": cs_instances * per / same_s},
        "generator_batch": {"instances": batch, "wall_s": batch_s, "compressions_per_s": batch * per / batch_s,
                            "aux_bytes_per_s": batch * plan.num_aux / batch_s},
        "speedup_same_instances": capture.seconds / same_s,
        "speedup_batch_per_compression": (batch * per / batch_s) / (cs_instances * per / capture.seconds),
    }


def bench_partition(rng: np.random.Generator) -> dict[str, Any]:
    """Every SHA-256 of one 32GiB PoRep partition: per layer one plan and 18 labels, then 540 hash2."""
    plans: list[tuple[Sha256WitnessPlan, int]] = []
    for layer in range(1, PARTITION_LAYERS + 1):
        with Capture(porep) as capture:
            run_label(rng, layer)
        plans.append((Sha256WitnessPlan.for_booleans(capture.calls[0][0]), PARTITION_CHALLENGES))
    with Capture(sha256_gadget) as capture:
        run_hash2(rng)
    plans.append((Sha256WitnessPlan.for_booleans(capture.calls[0][0]), PARTITION_CHALLENGES * TREE_D_LEVELS))
    inputs = [random_messages(plan, n, rng) for plan, n in plans]
    start = time.perf_counter()
    aux_bytes = 0
    for (plan, _), messages in zip(plans, inputs, strict=True):
        aux_bytes += plan.generate_hash_circuit(messages).aux.nbytes
    wall = time.perf_counter() - start
    compressions = sum(plan.num_blocks * n for plan, n in plans)
    return {"compressions": compressions, "aux_bits": aux_bytes, "wall_s": wall,
            "compressions_per_s": compressions / wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--cs-instances", type=int, default=3, help="instances through WitnessCS per workload")
    ap.add_argument("--batch", type=int, default=512, help="instances of the generator's throughput run")
    ap.add_argument("--no-partition", action="store_true", help="skip the 32GiB-partition figure")
    ap.add_argument("--json", type=Path, help="output file (default: results/witness-gen-sha256-cpu-<date>.json)")
    ap.add_argument("--note", default="", help="free text stored with the results (e.g. machine load)")
    args = ap.parse_args()
    rng = np.random.default_rng(2026)
    results = []
    for name in args.workloads:
        r = bench_workload(name, args.cs_instances, args.batch, rng)
        results.append(r)
        print(f"{name}: {r['compressions_per_instance']} compressions, {r['aux_per_instance']:,} aux, "
              f"identical={r['identical']}; WitnessCS {r['witness_cs']['compressions_per_s']:.1f} compr/s, "
              f"generator same instances {r['generator_same_instances']['compressions_per_s']:,.0f}, "
              f"batch of {args.batch} {r['generator_batch']['compressions_per_s']:,.0f} compr/s "
              f"({r['speedup_batch_per_compression']:,.0f}x)", flush=True)
    partition = None
    if not args.no_partition:
        partition = bench_partition(rng)
        print(f"32GiB PoRep partition SHA-256: {partition['compressions']:,} compressions, "
              f"{partition['aux_bits']:,} aux bits in {partition['wall_s']:.3f} s", flush=True)
    payload = envelope("witness-gen-sha256", results, partition=partition, numba_threads=numba.get_num_threads(),
                       cs_instances=args.cs_instances, batch=args.batch, note=args.note)
    print(write("witness-gen-sha256-cpu", payload, args.json))


if __name__ == "__main__":
    main()
