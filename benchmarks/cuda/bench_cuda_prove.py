"""Groth16 proof time, CUDA backend against CPU backend, for 2^16..2^24 constraints, in one run on one host.

Each size is a synthetic circuit with the proportions of a PoRep-32GiB partition and porep-2k's 0/1
witness statistics (bench_cuda_partition.py says how), constraints = 2^k - 2^(k-6) so that the domain
is 2^k. Both backends prove the same assignment with the same key and the same r, s; the two proofs
must be equal (the key's bases are random points tiled from a pool, so the proof is not verifiable,
but equality with the CPU prover checks the whole GPU path). Keys are loaded before timing (CUDA:
resident on the device; CPU: converted for its MSM engine, `cpu_load_key_s`). Times are the median
of `--reps` proofs (after one warm-up proof on the GPU); the CPU takes `--cpu-reps` at the sizes of
`--cpu-single`.

    python benchmarks/cuda/bench_cuda_prove.py --out results.json
    python benchmarks/cuda/bench_cuda_prove.py --sizes 12,14 --reps 2       # a small smoke test
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write
from bench_cuda_partition import POREP_32G, point_pool, synthetic_assignment, synthetic_key

from cuzk.backends.cpu import CpuBackend, cpu_model
from cuzk.curve.msm import cpu_count, msm_engine


def timed_proofs(backend: Any, pk: Any, asg: Any, reps: int) -> tuple[list[float], list[dict[str, float]], Any]:
    walls, phases, proof = [], [], None
    for _ in range(reps):
        t: dict[str, float] = {}
        start = time.perf_counter()
        proof = backend.prove(pk, asg, r=11, s=13, timings=t)
        walls.append(time.perf_counter() - start)
        phases.append(t)
    return walls, phases, proof


def median_phases(phases: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(p[k] for p in phases), 4) for k in phases[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="16,18,20,22,24", help="log2 domain sizes")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cpu-reps", type=int, default=1, help="CPU proofs at the sizes of --cpu-single")
    ap.add_argument("--cpu-single", default="24", help="sizes where the CPU runs only --cpu-reps proofs")
    ap.add_argument("--no-cpu", default="", help="sizes where the CPU backend is not run (time budget)")
    ap.add_argument("--distinct", type=int, default=4096)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from cuzk.backends.cuda import CudaBackend
    from cuzk.backends.cuda.device import properties

    sizes = [int(x) for x in args.sizes.split(",") if x]
    cpu_single = {int(x) for x in args.cpu_single.split(",") if x}
    no_cpu = {int(x) for x in args.no_cpu.split(",") if x}
    pool = point_pool(args.distinct, 7)
    gpu, cpu = CudaBackend(0), CpuBackend()
    p = properties()
    rows: list[dict[str, Any]] = []
    for k in sizes:
        shape = POREP_32G.scaled((1 << k) - (1 << max(0, k - 6)))
        rng = np.random.default_rng(k)
        asg, stats = synthetic_assignment(shape, rng)
        pk, _ = synthetic_key(shape, asg, pool, rng, host_bases=True)
        start = time.perf_counter()
        gpu.load_key(pk)
        load_s = time.perf_counter() - start
        gpu.prove(pk, asg, r=11, s=13)  # warm-up
        g_walls, g_phases, g_proof = timed_proofs(gpu, pk, asg, args.reps)
        row: dict[str, Any] = {"log_domain": k, "constraints": shape.constraints, "aux": shape.aux,
                               "witness_classes": {n: stats[n] for n in ("l_classes", "b_classes")},
                               "gpu_load_key_s": round(load_s, 3), "gpu_s": round(statistics.median(g_walls), 4),
                               "gpu_samples_s": [round(x, 4) for x in g_walls], "gpu_phases_s": median_phases(g_phases)}
        gpu.unload_key(pk)
        if k not in no_cpu:
            start = time.perf_counter()
            cpu.load_key(pk)   # bases converted for the CPU MSM engine before timing, as the daemon does
            cpu_load_s = time.perf_counter() - start
            c_walls, c_phases, c_proof = timed_proofs(cpu, pk, asg, args.cpu_reps if k in cpu_single else args.reps)
            cpu.unload_key(pk)
            row.update(cpu_load_key_s=round(cpu_load_s, 3),
                       cpu_s=round(statistics.median(c_walls), 4), cpu_samples_s=[round(x, 4) for x in c_walls],
                       cpu_phases_s=median_phases(c_phases), speedup=round(statistics.median(c_walls)
                                                                           / statistics.median(g_walls), 1),
                       proofs_equal=bool(c_proof == g_proof))
        rows.append(row)
        print(json.dumps({key: v for key, v in row.items() if not key.endswith("phases_s")}), flush=True)
        del pk, asg
        # Written after every size, so that a run cut short by its time limit keeps what it measured.
        payload = envelope("cuda-prove", rows, gpu={"name": p.name, "multiprocessors": p.multiprocessors},
                           cpu={"model": cpu_model(), "msm_threads": cpu_count(), "msm_engine": msm_engine()},
                           reps=args.reps,
                           measured=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
        path = write("cuda-prove-h200", payload, args.out)
    print(f"{'2^k':>5} {'constraints':>12} {'GPU s':>8} {'CPU s':>8} {'x':>6} equal")
    for r in rows:
        print(f"{r['log_domain']:>5} {r['constraints']:>12} {r['gpu_s']:>8.3f} {r.get('cpu_s', float('nan')):>8.2f} "
              f"{r.get('speedup', float('nan')):>6} {r.get('proofs_equal', '-')}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
