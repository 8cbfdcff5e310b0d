"""A PoRep-32GiB partition's witness on the GPU against the CPU generator, in one run on one host.

Workload: one 32GiB partition of random well-formed values (`random_stacked_circuit`, production
layout, 18 challenges, 130,169,893 aux). Times are medians of `--reps` after a warm-up.

- cpu: `porep_witness` writing the whole aux vector (numba, all cores) into a reused host buffer:
  the synthesis processes' path today, before the vector goes to the device.
- gpu: the same generator with its SHA-256 gadgets deferred (`cuzk.witness_gen.deferred`: the host
  writes the ~2% of rows that are not SHA-256 bits and hashes with hashlib), then
  `DeviceSha256Witness.complete`: those rows uploaded and scattered, the 5,040 compressions' bits
  written by the kernel into a device aux vector; device synchronised. Reported as its two parts
  and their sum (`gpu_s`, run back to back).
- upload: the full 4.2 GB aux vector copied to the device from pageable host memory (`cupy`), what
  the CPU path must add before the device has the witness.

The device's aux vector is checked equal to the CPU generator's, element for element.

    python benchmarks/bench_cuda_porep_witness.py --out results.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import envelope, median_time, write

from cuzk.backends.cuda.module import get_module
from cuzk.backends.cuda.sha256_witness import DeviceSha256Witness
from cuzk.circuits.filecoin.porep import PRODUCTION_CONFIGS
from cuzk.circuits.filecoin.porep_witness import PorepLayout, porep_witness, random_stacked_circuit
from cuzk.witness_gen.deferred import DeferredSha256


def samples(fn: Callable[[], object], reps: int) -> list[float]:
    fn()  # warm-up
    return median_time(fn, reps)[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    start = time.perf_counter()
    circuit = random_stacked_circuit(PRODUCTION_CONFIGS[32 << 30], seed=args.seed)
    build_s = time.perf_counter() - start
    layout = PorepLayout.of(circuit.config)
    gen = DeviceSha256Witness(get_module(0, "witness"))
    xp = gen.xp
    sync = xp.cuda.Device().synchronize

    full = np.empty((layout.num_aux, 4), dtype=np.uint64)
    host = np.empty_like(full)
    device = xp.empty((layout.num_aux, 8), dtype=xp.uint32)
    last: dict[str, DeferredSha256] = {}

    def cpu() -> None:
        porep_witness(circuit, out=full)

    def gpu_host() -> None:
        last["deferred"] = DeferredSha256()
        porep_witness(circuit, out=host, deferred=last["deferred"])

    def gpu_device() -> None:
        gen.complete(last["deferred"], host, device)
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
    timings: dict[str, float] = {}
    porep_witness(circuit, timings, out=host, deferred=(deferred := DeferredSha256()))
    gen.complete(deferred, host, device)
    got = gen.kernels.to_host(device).view(np.uint64).reshape(-1, 4)
    differing = int((got != full).any(axis=1).sum())
    if differing:
        raise SystemExit(f"{differing} device aux differ from the CPU generator's")
    upload_samples = samples(upload, args.reps)
    starts, lengths = deferred.host_ranges(layout.num_aux)

    results = {
        "partition": f"porep-32g, random_stacked_circuit seed {args.seed}: {circuit.config.challenges} challenges, "
                     f"{layout.num_aux} aux, {layout.num_inputs} inputs",
        "build_circuit_s": build_s,
        "cpu_s": statistics.median(cpu_samples), "cpu_samples_s": cpu_samples,
        "gpu_s": statistics.median(gpu_samples), "gpu_samples_s": gpu_samples,
        "gpu_host_part_s": statistics.median(gpu_host_samples), "gpu_host_part_samples_s": gpu_host_samples,
        "gpu_device_part_s": statistics.median(gpu_device_samples),
        "gpu_device_part_samples_s": gpu_device_samples,
        "gpu_host_part_per_kind_s": timings,
        "full_upload_s": statistics.median(upload_samples), "full_upload_samples_s": upload_samples,
        "deferred_rows": deferred.num_rows, "host_rows": int(lengths.sum()), "host_ranges": int(starts.size),
        "sha256_jobs": len(deferred.jobs),
        "equal_to_cpu": True,
    }
    results["speedup_vs_cpu"] = results["cpu_s"] / results["gpu_s"]
    results["speedup_vs_cpu_plus_upload"] = (results["cpu_s"] + results["full_upload_s"]) / results["gpu_s"]
    print(results)
    write("cuda-porep-witness", envelope("cuda-porep-witness", results, reps=args.reps), args.out)


if __name__ == "__main__":
    main()
