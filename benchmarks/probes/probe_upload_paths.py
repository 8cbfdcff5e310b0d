"""Probe: host -> device upload paths for a PoRep-32GiB partition, alone and beside another proof.

Compares the backend's pinned double buffer (pageable numpy arrays copied chunk by chunk into two
pinned staging buffers on 8 threads) with registering the numpy arrays themselves as pinned memory
(cudaHostRegister) and copying each with one cudaMemcpyAsync, no staging copy:

1. with the device idle: each path's time for a, b, c (12.5 GB) and the witness (4.4 GB), and the
   registration / unregistration times;
2. proofs one at a time with each path (h2d_abc, h2d_witness, device);
3. two threads proving two partitions each at once with each path: wall time per proof, the gaps
   between one device phase and the next.

Run it with and without CUDA_DEVICE_MAX_CONNECTIONS=32 (the number of hardware work queues streams are
spread over: 8 by default, so a copy stream may share one with the compute stream and wait behind its
kernels). One JSON line per step is printed and appended to OUT.

    python benchmarks/probes/probe_upload_paths.py OUT.jsonl
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))  # bench_cuda_partition, bench_cuda


def main() -> None:
    import bench_cuda_partition as part
    import cupy as cp

    import cuzk.backends.cuda.uploader as uploader_module

    log = part.json_lines(sys.argv[1], connections=os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "default"))

    backend, pk, asg = part.resident_partition()
    log(step="setup done")
    rt = cp.cuda.runtime
    staged_upload = uploader_module.PinnedUploader.upload
    reg_log: list[tuple[float, float, float]] = []

    def registered_upload(self: Any, dst: Any, src: np.ndarray) -> None:
        flat = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
        if flat.nbytes == 0:
            return
        t0 = time.perf_counter()
        rt.hostRegister(flat.ctypes.data, flat.nbytes, 0)
        t1 = time.perf_counter()
        rt.memcpyAsync(dst.data.ptr, flat.ctypes.data, flat.nbytes, rt.memcpyHostToDevice, self.stream.ptr)
        self.stream.synchronize()
        t2 = time.perf_counter()
        rt.hostUnregister(flat.ctypes.data)
        reg_log.append((t1 - t0, t2 - t1, time.perf_counter() - t2))

    def words(v: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(v).view(np.uint32).reshape(-1, 8)

    groups = {"abc": {"a": words(asg.a), "b": words(asg.b), "c": words(asg.c)},
              "witness": {"inputs": words(asg.inputs), "aux": words(asg.aux), "a_mask": asg.a_aux_density,
                          "b_mask": asg.b_aux_density, "b_in_mask": asg.b_input_density}}
    with backend._device:
        lane = backend.lanes.take()
        for gname, host in groups.items():
            nbytes = sum(v.nbytes for v in host.values())
            dst = {k: cp.empty(v.shape, dtype=cp.bool_ if v.dtype == np.bool_ else cp.uint32) for k, v in host.items()}
            for path, fn in (("staged", staged_upload), ("registered", registered_upload)):
                for _ in range(2):
                    reg_log.clear()
                    t0 = time.perf_counter()
                    for k, v in host.items():
                        fn(lane.uploader, dst[k], v)
                    lane.copy.synchronize()
                    s = time.perf_counter() - t0
                    log(step="idle upload", group=gname, path=path, bytes=nbytes, s=round(s, 3),
                        gbps=round(nbytes / s / 1e9, 2),
                        register_s=round(sum(r[0] for r in reg_log), 3), copy_s=round(sum(r[1] for r in reg_log), 3),
                        unregister_s=round(sum(r[2] for r in reg_log), 3))
            del dst
        backend.lanes.give(lane)

    keys = ("h2d_witness", "upload_wait", "h2d_abc", "device", "h", "msm_h", "stage_ahead", "lock_wait")

    def use(path: str) -> None:
        uploader_module.PinnedUploader.upload = staged_upload if path == "staged" else registered_upload

    for path in ("staged", "registered", "staged", "registered"):
        use(path)
        reg_log.clear()
        t: dict[str, float] = {}
        t0 = time.perf_counter()
        backend.prove(pk, asg, r=1, s=2, timings=t)
        log(step="one proof", path=path, wall_ms=round((time.perf_counter() - t0) * 1e3, 1),
            register_ms=round(sum(r[0] for r in reg_log) * 1e3, 1),
            unregister_ms=round(sum(r[2] for r in reg_log) * 1e3, 1),
            **{k: round(v * 1e3, 1) for k, v in t.items() if k in keys})

    for path in ("staged", "registered", "staged", "registered"):
        use(path)
        try:
            timings, start, wall = part.prove_in_threads(backend, pk, asg, 2, 3)
        except Exception as exc:  # registering: both threads prove the same arrays, the second one fails
            log(step="two workers", path=path, failed=str(exc))
            continue
        steady, gaps = part.steady_state(timings)
        log(step="two workers", path=path, proofs=len(timings), per_proof_ms=round(wall / len(timings) * 1e3, 1),
            steady_per_proof_ms=round(steady * 1e3, 1),
            first_device_begin_ms=round((timings[0]["device_begin"] - start) * 1e3, 1),
            gaps_ms=[round(g * 1e3, 1) for g in gaps],
            median_device_ms=round(statistics.median(t["device"] for t in timings) * 1e3, 1),
            stage_ahead_ms=[round(t["stage_ahead"] * 1e3, 1) for t in timings],
            h2d_witness_ms=[round(t["h2d_witness"] * 1e3, 1) for t in timings])


if __name__ == "__main__":
    main()
