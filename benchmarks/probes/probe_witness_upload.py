"""Probe: why a PoRep-32GiB partition's witness uploads slowly during the CUDA device phase.

The witness (4.4 GB: aux, inputs, the A/B density masks) goes up on the proof's copy stream while
the compute stream runs H and the H MSM. This script times that upload with the device idle (the
pinned double buffer, then CuPy's pageable `ndarray.set`), then two proofs each with the default
uploader, with the interpreter's thread switch interval at 0.1 ms, with 256 MiB staging chunks, and
with 16 staging threads, reporting the proofs' h2d_witness / upload_wait / device times. One JSON
line per step is printed and appended to OUT (no hardware envelope: the benchmarks README names the
machine and date of the committed run).

    python benchmarks/probes/probe_witness_upload.py OUT.jsonl     # ~60 s on an H200
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))  # bench_cuda_partition, bench_cuda


def main() -> None:
    import bench_cuda_partition as part
    import cupy as cp

    import cuzk.backends.cuda.uploader as uploader_module

    log = part.json_lines(sys.argv[1])

    backend, pk, asg = part.resident_partition()
    log(step="setup done")

    def words(v: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(v).view(np.uint32).reshape(-1, 8)

    host_wit = {"inputs": words(asg.inputs), "aux": words(asg.aux), "a_mask": asg.a_aux_density,
                "b_mask": asg.b_aux_density, "b_in_mask": asg.b_input_density}
    nbytes = sum(v.nbytes for v in host_wit.values())
    with backend._device:
        lane = backend.lanes.take()
        dst = {k: cp.empty(v.shape, dtype=cp.bool_ if v.dtype == np.bool_ else cp.uint32) for k, v in host_wit.items()}
        for _ in range(2):
            t0 = time.perf_counter()
            for k, v in host_wit.items():
                lane.uploader.upload(dst[k], v)
            lane.copy.synchronize()
            s = time.perf_counter() - t0
            log(step="witness upload, device idle", bytes=nbytes, s=round(s, 3), gbps=round(nbytes / s / 1e9, 2))
        t0 = time.perf_counter()
        for k, v in host_wit.items():
            dst[k].set(v, stream=lane.copy)
        lane.copy.synchronize()
        s = time.perf_counter() - t0
        log(step="witness upload by ndarray.set (pageable), device idle", s=round(s, 3),
            gbps=round(nbytes / s / 1e9, 2))
        backend.lanes.give(lane)
        del dst

    keys = ("h2d_witness", "upload_wait", "h2d_abc", "device", "h", "msm_h", "gather", "stage_ahead")

    def proofs(label: str, n: int = 2) -> None:
        for _ in range(n):
            t: dict[str, float] = {}
            t0 = time.perf_counter()
            backend.prove(pk, asg, r=1, s=2, timings=t)
            log(step=label, wall_ms=round((time.perf_counter() - t0) * 1e3, 1),
                **{k: round(v * 1e3, 1) for k, v in t.items() if k in keys})

    proofs("default")
    sys.setswitchinterval(1e-4)
    proofs("switchinterval 1e-4")
    sys.setswitchinterval(5e-3)
    uploader_module.PinnedUploader.__init__.__defaults__ = (256 << 20, 8)
    backend.lanes.idle.clear()
    proofs("256 MiB chunks")
    uploader_module.PinnedUploader.__init__.__defaults__ = (64 << 20, 16)
    backend.lanes.idle.clear()
    proofs("16 threads")


if __name__ == "__main__":
    main()
