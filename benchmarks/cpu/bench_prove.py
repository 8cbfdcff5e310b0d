"""CPU proof time for 2^k constraints, broken into synthesis, NTTs and each MSM.

For each size: insecure parameters are generated (timed), the MiMC circuit is synthesised (timed),
then `--reps` rounds each time one proof and, right after it, the bare kernels the proof is made
of, alone: the NTT-type passes of the H polynomial and the MSM engine's calls (blst's tiles and
bulk additions, or py-arkworks multiexp; `--engine`, default the prover's) on exactly the scalars the
prover feeds them. `overhead` = the median over rounds of proof time / sum
of that round's bare kernels, i.e. what the Python around the kernels costs; interleaving keeps a
change in machine load from landing on one side of the ratio only.

    python benchmarks/cpu/bench_prove.py --sizes 10,12,14,16 --reps 3 [--engine arkworks]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import wait
from itertools import pairwise
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write

from cuzk.circuits.registry import lookup
from cuzk.curve import blst
from cuzk.curve.bases import G1Bases, G2Bases
from cuzk.curve.msm import (
    ENGINE_ENV,
    _split_by_value,
    cpu_count,
    msm_engine,
    msm_pool,
    prepare_bases,
    scalars_to_native,
)
from cuzk.curve.points import G1Point, G2Point
from cuzk.field import fr_vec
from cuzk.field.ntt import Domain
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.prover import compute_h, prove, select_query_scalars
from cuzk.groth16.setup import ToxicWaste, generate_insecure_parameters
from cuzk.groth16.synthesis import synthesize_for_proving
from cuzk.groth16.verifier import verify_proof


def bare_msm(bases: G1Bases | G2Bases, scalars: np.ndarray) -> Callable[[], None]:
    """The MSM engine's calls alone, split over the cores exactly like the prover does."""
    ones, big = _split_by_value(scalars)
    if msm_engine() == "blst":
        layout = blst.G2 if bases.group is G2Point else blst.G1
        affine = bases.affine()
        rows = None if len(big) == len(bases) else big
        big_scalars = np.ascontiguousarray(scalars[big])

        def run_blst() -> None:
            pool, threads = msm_pool(), cpu_count()
            wait(blst.msm_tasks(pool, layout, affine, rows, big_scalars, threads)
                 + blst.sum_tasks(pool, layout, affine, ones, threads))

        return run_blst
    points = bases.points()
    pts = [points[i] for i in big.tolist()]
    native = scalars_to_native(scalars[big])
    multiexp = G1Point.multiexp_unchecked if bases.group is G1Point else G2Point.multiexp_unchecked
    bounds = np.linspace(0, len(pts), cpu_count() + 1).astype(int)

    def run() -> None:
        futs = [msm_pool().submit(multiexp, pts[lo:hi], native[lo:hi])
                for lo, hi in pairwise(bounds.tolist()) if hi > lo]
        wait(futs)

    return run


def bare_ntt(domain: Domain) -> Callable[[], None]:
    """Three inverse NTTs, three coset NTTs and one inverse coset NTT (the H polynomial's passes)."""
    rng = np.random.default_rng(1)
    data = fr_vec.to_montgomery(rng.integers(0, 2**63, size=(domain.size, 4), dtype=np.uint64) >> np.uint64(2))

    def run() -> None:
        for _ in range(3):
            domain.intt(data)
            domain.coset_ntt(data)
        domain.icoset_ntt(data)

    return run


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_size(k: int, reps: int) -> dict:
    spec = lookup(f"mimc-{k}")
    t0 = time.perf_counter()
    pk = generate_insecure_parameters(spec.blank(), waste=ToxicWaste.random(random.Random(k)))
    keygen = time.perf_counter() - t0
    t0 = time.perf_counter()
    for bases in (pk.h, pk.l, pk.a, pk.b_g1, pk.b_g2):
        prepare_bases(bases)
    decode = time.perf_counter() - t0

    circuit = spec.example(random.Random(k))
    synth_samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        asg = Assignment.from_proving_assignment(synthesize_for_proving(circuit))
        synth_samples.append(time.perf_counter() - t0)

    q = select_query_scalars(pk, asg)
    h = compute_h(pk, asg)
    kernels = {
        "ntt": bare_ntt(Domain(k)),
        "msm_h": bare_msm(pk.h, h),
        "msm_l": bare_msm(pk.l, q.l),
        "msm_a": bare_msm(pk.a, q.a),
        "msm_b_g1": bare_msm(pk.b_g1, q.b),
        "msm_b_g2": bare_msm(pk.b_g2, q.b),
    }
    runs, bare_runs = [], []
    for _ in range(reps):
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        proof = prove(pk, asg, timings=timings)
        timings["total"] = time.perf_counter() - t0
        runs.append(timings)
        bare_runs.append({name: timed(fn) for name, fn in kernels.items()})
    assert verify_proof(pk.vk, proof, asg.public_inputs()), "benchmark proof does not verify"
    prove_median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    bare = {key: statistics.median(r[key] for r in bare_runs) for key in kernels}
    ratios = [r["total"] / sum(b.values()) for r, b in zip(runs, bare_runs, strict=True)]
    return {
        "circuit": spec.circuit_id,
        "constraints": asg.num_constraints,
        "aux": int(asg.aux.shape[0]),
        "keygen_s": keygen,
        "key_decode_s": decode,
        "synthesis_s": statistics.median(synth_samples),
        "prove_s": prove_median,
        "prove_samples_s": [r["total"] for r in runs],
        "bare_kernels_s": bare,
        "overhead": statistics.median(ratios),
        "overhead_samples": ratios,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,12,14,16,18", help="log2 constraint counts")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--engine", choices=("blst", "arkworks"), help="CPU MSM engine (default: the prover's default)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.engine:
        os.environ[ENGINE_ENV] = args.engine
    results = []
    for k in (int(x) for x in args.sizes.split(",")):
        row = bench_size(k, args.reps)
        results.append(row)
        p = row["prove_s"]
        print(f"2^{k}: synth {row['synthesis_s']:.2f}s  prove {p['total']:.2f}s  (h {p['h']:.2f}, "
              f"msm h/l/a/b1/b2 {p['msm_h']:.2f}/{p['msm_l']:.2f}/{p['msm_a']:.2f}/{p['msm_b_g1']:.2f}/"
              f"{p['msm_b_g2']:.2f})  overhead x{row['overhead']:.3f}  keygen {row['keygen_s']:.1f}s", flush=True)
    path = write("prove-cpu", envelope("prove-cpu", results, reps=args.reps, msm_engine=msm_engine()), args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
