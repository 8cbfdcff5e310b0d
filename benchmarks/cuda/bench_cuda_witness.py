"""A 32GiB partition's witness on the GPU against the CPU generator, in one run on one host.

Workloads (`--circuit`), random well-formed values, production layouts; times are medians of
`--reps` after a warm-up:

- porep-32g: one PoRep partition (`random_stacked_circuit`, 18 challenges, 130,169,893 aux), its
  SHA-256 gadgets (98% of the aux) deferred to the device;
- wpost-32g: one WindowPoSt partition (`random_post_circuit`, 2,349 sectors x 10
  challenges, 126,902,376 aux), its 23,490 tree_r_last openings (99% of the aux) deferred;
- snap-32g: one SnapDeals partition (`bench_post_witness.random_snap`, 86 challenges, 80,978,488
  aux), its tree_r_old / tree_r_new openings and its tree_d openings' SHA-256 hashes deferred.

Contenders:

- cpu: the circuit's generator (`witness_arrays`) writing the whole aux vector (numba, all cores)
  into a reused host buffer: the synthesis processes' path with `device_witness = "off"`, before
  the vector goes to the device.
- gpu: the same generator with a `DeferredWitness` (`cuzk.witness_gen.deferred`: the host writes the
  rest), then `cuzk.backends.cuda.deferred.complete_on_device`: the host's rows uploaded and
  scattered, the deferred gadgets written by their kernels into a device aux vector; device
  synchronised. Reported as its two parts and their sum (`gpu_s`, run back to back).
- upload: the full ~4 GB aux vector copied to the device from pageable host memory (`cupy`), what
  the CPU path must add before the device has the witness.

The device's aux vector is checked equal to the CPU generator's, element for element.
(results/archive/cuda-porep-witness-h200-2026-11-30.json came from this file's PoRep-only predecessor,
bench_cuda_porep_witness.py.)

    python benchmarks/cuda/bench_cuda_witness.py --circuit wpost-32g --out results.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "witness"))  # bench_post_witness
from _common import envelope, median_time, write
from bench_post_witness import GIB32, random_snap

from cuzk.backends.cuda.deferred import complete_on_device
from cuzk.backends.cuda.module import get_module
from cuzk.backends.cuda.poseidon_witness import DevicePoseidonPaths
from cuzk.backends.cuda.sha256_witness import DeviceSha256Witness
from cuzk.circuits.filecoin.porep import PRODUCTION_CONFIGS, random_stacked_circuit
from cuzk.circuits.filecoin.post import FallbackPoStConfig, random_post_circuit
from cuzk.circuits.filecoin.snap import EmptySectorUpdateConfig
from cuzk.witness_gen.deferred import DeferredWitness


def samples(fn: Callable[[], object], reps: int) -> list[float]:
    fn()  # warm-up
    return median_time(fn, reps)[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--circuit", choices=("porep-32g", "wpost-32g", "snap-32g"), default="porep-32g")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    start = time.perf_counter()
    if args.circuit == "porep-32g":
        circuit = random_stacked_circuit(PRODUCTION_CONFIGS[GIB32], seed=args.seed)
        what = f"{circuit.config.challenges} challenges"
    elif args.circuit == "wpost-32g":
        circuit = random_post_circuit(FallbackPoStConfig.window(GIB32), args.seed)
        what = f"{circuit.config.sector_count} sectors x {circuit.config.challenge_count} challenges"
    else:
        circuit = random_snap(EmptySectorUpdateConfig.for_sector_size(GIB32), args.seed)
        what = f"{circuit.config.challenge_count} challenges"
    build_s = time.perf_counter() - start
    num_inputs, num_aux = circuit.witness_shape()
    kernels = get_module(0, "witness")
    sha256 = DeviceSha256Witness(kernels)
    paths = DevicePoseidonPaths(get_module(0, "poseidon"))
    xp = kernels.xp
    sync = xp.cuda.Device().synchronize

    full = np.empty((num_aux, 4), dtype=np.uint64)
    host = np.empty_like(full)
    device = xp.empty((num_aux, 8), dtype=xp.uint32)
    last: dict[str, DeferredWitness] = {}

    def cpu() -> None:
        circuit.witness_arrays(out=full)

    def gpu_host() -> None:
        last["deferred"] = DeferredWitness()
        circuit.witness_arrays(out=host, deferred=last["deferred"])

    def complete(deferred: DeferredWitness) -> None:
        complete_on_device(deferred, host, device, kernels, lambda: sha256, lambda: paths)

    def gpu_device() -> None:
        complete(last["deferred"])
        sync()

    def gpu() -> None:
        gpu_host()
        gpu_device()

    def upload() -> None:
        device.set(full.view(np.uint32).reshape(-1, 8))
        sync()

    cpu_samples = samples(cpu, args.reps)
    gpu_host_samples = samples(gpu_host, args.reps)
    gpu_device_samples = samples(gpu_device, args.reps)
    gpu_samples = samples(gpu, args.reps)
    deferred = DeferredWitness()
    circuit.witness_arrays(out=host, deferred=deferred)
    complete(deferred)
    got = kernels.to_host(device).view(np.uint64).reshape(-1, 4)
    differing = int((got != full).any(axis=1).sum())
    if differing:
        raise SystemExit(f"{differing} device aux differ from the CPU generator's")
    upload_samples = samples(upload, args.reps)
    starts, lengths = deferred.host_ranges(num_aux)

    results = {
        "partition": f"{args.circuit}, seed {args.seed}: {what}, {num_aux} aux, {num_inputs} inputs",
        "build_circuit_s": build_s,
        "cpu_s": statistics.median(cpu_samples), "cpu_samples_s": cpu_samples,
        "gpu_s": statistics.median(gpu_samples), "gpu_samples_s": gpu_samples,
        "gpu_host_part_s": statistics.median(gpu_host_samples), "gpu_host_part_samples_s": gpu_host_samples,
        "gpu_device_part_s": statistics.median(gpu_device_samples),
        "gpu_device_part_samples_s": gpu_device_samples,
        "full_upload_s": statistics.median(upload_samples), "full_upload_samples_s": upload_samples,
        "deferred_rows": deferred.num_rows, "host_rows": int(lengths.sum()), "host_ranges": int(starts.size),
        "sha256_jobs": len(deferred.sha256_jobs), "path_jobs": len(deferred.path_jobs),
        "equal_to_cpu": True,
    }
    results["speedup_vs_cpu"] = results["cpu_s"] / results["gpu_s"]
    results["speedup_vs_cpu_plus_upload"] = (results["cpu_s"] + results["full_upload_s"]) / results["gpu_s"]
    print(results)
    name = f"cuda-{args.circuit.split('-')[0]}-witness"
    write(name, envelope(name, results, reps=args.reps), args.out)


if __name__ == "__main__":
    main()
