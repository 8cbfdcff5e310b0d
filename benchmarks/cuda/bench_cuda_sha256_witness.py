"""SHA-256 witness generation on the GPU (cuzk.backends.cuda.sha256_witness) against the CPU plan
(cuzk.witness_gen.sha256, numba, all cores), in one run on one host, outputs checked equal.

Workload: the SHA-256 share of one 32GiB PoRep partition, plan by plan: 18 challenges x 11 labels
(layer 1 and layers 2-11 are two configurations, 20 compressions each) and 18 x 30 tree_d nodes
(`sha256_node_plan(2)`: 2 compressions) = 5,040 compressions, ~131M aux bits. Also the label plan at
`--batch` instances, for throughput. Times are medians of `--reps` after a warm-up. GPU: every aux
written as a field element (eight u32 words) into one device aux vector, device synchronised. CPU:
the plan's `generate` (aux as bytes), and the same plus writing them as (n, 4) uint64 limbs into a
preallocated host vector (numpy), what a partition's aux vector needs.

    python benchmarks/cuda/bench_cuda_sha256_witness.py --out results.json
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

from cuzk.backends.cuda.module import get_module
from cuzk.backends.cuda.sha256_witness import DeviceSha256Witness
from cuzk.circuits.filecoin.porep_witness import label_plan
from cuzk.witness_gen.merkle import sha256_node_plan
from cuzk.witness_gen.sha256 import Sha256WitnessPlan

CHALLENGES, LAYERS, TREE_D_LEVELS = 18, 11, 30


def messages(plan: Sha256WitnessPlan, n: int, rng: np.random.Generator) -> np.ndarray:
    bits = rng.integers(0, 2, size=(n, plan.message_bits), dtype=np.uint8)
    bits[:, plan.constant_positions] = plan.constant_values
    return bits


def median_s(fn, reps: int) -> float:
    fn()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    gen = DeviceSha256Witness(get_module(0, "witness"))
    sync = gen.xp.cuda.Device().synchronize

    partition = [(label_plan(1), CHALLENGES), (label_plan(2), CHALLENGES * (LAYERS - 1)),
                 (sha256_node_plan(2), CHALLENGES * TREE_D_LEVELS)]
    work = [(plan, messages(plan, n, rng)) for plan, n in partition]
    for plan, bits in work:  # equality first
        cpu = plan.generate(bits)
        aux, digest = gen.generate(plan, bits)
        aux = gen.kernels.to_host(aux)
        if not np.array_equal(aux[..., 0], cpu.aux) or aux[..., 1:].any():
            raise SystemExit(f"GPU aux differ from the CPU plan's ({plan!r})")
        if not np.array_equal(np.unpackbits(gen.kernels.to_host(digest).astype(">u4").view(np.uint8), axis=1),
                              cpu.digest_bits):
            raise SystemExit(f"GPU digests differ ({plan!r})")

    starts = np.cumsum([0] + [plan.num_aux * bits.shape[0] for plan, bits in work])
    total = int(starts[-1])
    device_aux = gen.xp.empty((total, 8), dtype=gen.xp.uint32)
    host_aux = np.empty((total, 4), dtype=np.uint64)

    def gpu_partition() -> None:
        for (plan, bits), start in zip(work, starts.tolist(), strict=False):
            gen.generate_into(plan, bits, device_aux, start + np.arange(bits.shape[0]) * plan.num_aux)
        sync()

    def cpu_partition() -> None:
        for plan, bits in work:
            plan.generate(bits)

    def cpu_partition_limbs() -> None:
        for (plan, bits), start in zip(work, starts.tolist(), strict=False):
            rows = host_aux[start:start + plan.num_aux * bits.shape[0]]
            rows[:, 1:] = 0
            rows[:, 0] = plan.generate(bits).aux.reshape(-1)

    compressions = sum(plan.num_blocks * bits.shape[0] for plan, bits in work)
    aux_bits = sum(plan.num_aux * bits.shape[0] for plan, bits in work)
    label = label_plan(2)
    batch = messages(label, args.batch, rng)

    def gpu_batch() -> None:
        gen.generate(label, batch)
        sync()

    results = {
        "partition": {"compressions": compressions, "aux_bits": aux_bits,
                      "gpu_s": median_s(gpu_partition, args.reps), "cpu_s": median_s(cpu_partition, args.reps),
                      "cpu_with_limbs_s": median_s(cpu_partition_limbs, args.reps)},
        "label_batch": {"instances": args.batch, "compressions": label.num_blocks * args.batch,
                        "gpu_s": median_s(gpu_batch, args.reps),
                        "cpu_s": median_s(lambda: label.generate(batch), args.reps)},
        "equal_to_cpu": True,
    }
    for row in results.values():
        if isinstance(row, dict):
            row["gpu_compressions_per_s"] = row["compressions"] / row["gpu_s"]
            row["cpu_compressions_per_s"] = row["compressions"] / row["cpu_s"]
    print(results)
    write("cuda-sha256-witness", envelope("cuda-sha256-witness", results, reps=args.reps, batch=args.batch),
          args.out)


if __name__ == "__main__":
    main()
