"""Probe: where a 12.5 GB host -> device upload (a PoRep-32GiB partition's a, b, c) loses its speed
while the device computes.

The backend's uploader copies pageable numpy arrays chunk by chunk into two pinned staging buffers
(8 host threads a chunk) and queues one cudaMemcpyAsync per chunk on its copy stream. Here that loop
is timed part by part: `wait` (for the staging buffer's previous copy), `stage` (the host copies),
`api` (the memcpyAsync and event calls), the whole upload, and a variant without the device copies
(`stage only`). Each runs with the device idle and beside three loads started just before it:

* ntt: thirty 2^27 DIF transforms queued on the compute stream at once (no host synchronisation);
* msm: the partition's dense H MSM (2^27 - 1 points) on the compute stream from another thread,
  with its host round trips (bucket offsets read back between kernels);
* proof: a whole proof of the partition on another thread (what a second prover worker runs).

One JSON line per run is printed and appended to OUT.

    python benchmarks/probes/probe_upload_load.py OUT.jsonl
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))  # bench_cuda_partition, bench_cuda


def main() -> None:
    import bench_cuda_partition as part
    import cupy as cp


    log = part.json_lines(sys.argv[1])

    backend, pk, asg = part.resident_partition()
    log(step="setup done")
    rt = cp.cuda.runtime
    m = pk.domain_size
    host = [np.ascontiguousarray(v).reshape(-1).view(np.uint8) for v in (asg.a, asg.b, asg.c)]
    nbytes = sum(h.nbytes for h in host)

    with backend._device:
        lane = backend.lanes.take()
        up = lane.uploader
        dst = [cp.empty(h.nbytes, dtype=cp.uint8) for h in host]
        ntt_buf = cp.zeros((m, 8), dtype=cp.uint32)
        scalars = cp.zeros((m, 8), dtype=cp.uint32)
        scalars[: asg.a.shape[0]] = cp.asarray(np.ascontiguousarray(asg.a).view(np.uint32).reshape(-1, 8))
        h_bases = backend.keys.loaded[pk].bases["h"]
        root = backend.ntt.default_root(27)
        backend.ntt.dif(ntt_buf, 27, root)
        cp.cuda.Device().synchronize()

    def upload(copy: bool) -> dict[str, float]:
        parts = {"wait": 0.0, "stage": 0.0, "api": 0.0}
        clock = time.perf_counter
        begin = clock()
        for d, flat in zip(dst, host, strict=True):
            for k, off in enumerate(range(0, flat.nbytes, up.chunk)):
                slot = k & 1
                t0 = clock()
                if up._done[slot] is not None:
                    up._done[slot].synchronize()
                t1 = clock()
                size = min(up.chunk, flat.nbytes - off)
                up.host_copy(up._host[slot], flat[off:off + size])
                t2 = clock()
                if copy:
                    rt.memcpyAsync(d.data.ptr + off, up._host[slot].ctypes.data, size, rt.memcpyHostToDevice,
                                   lane.copy.ptr)
                up._done[slot] = lane.copy.record()
                parts["wait"] += t1 - t0
                parts["stage"] += t2 - t1
                parts["api"] += clock() - t2
        t0 = clock()
        lane.copy.synchronize()
        parts["wait"] += clock() - t0
        parts["total"] = clock() - begin
        return {k: round(v * 1e3, 1) for k, v in parts.items()}

    def load_ntt() -> None:
        with backend._device, backend.gpu.compute:
            for _ in range(30):
                backend.ntt.dif(ntt_buf, 27, root)
            backend.gpu.compute.synchronize()

    def load_msm() -> None:
        with backend._device, backend.gpu.compute:
            backend.msm.msm("g1", h_bases, scalars[: m - 1])
            backend.gpu.compute.synchronize()

    def load_proof() -> None:
        backend.prove(pk, asg, r=1, s=2)

    loads = {"idle": None, "ntt": load_ntt, "msm": load_msm, "proof": load_proof}
    for _ in range(2):
        for name, fn in loads.items():
            for copy in (True, False):
                box: dict[str, float] = {}

                def timed(fn: Any = fn, box: dict[str, float] = box) -> None:
                    t0 = time.perf_counter()
                    fn()
                    box["load"] = time.perf_counter() - t0

                th = threading.Thread(target=timed) if fn is not None else None
                if th is not None:
                    th.start()
                    time.sleep(0.02)  # let the load queue its first kernels
                with backend._device:
                    res = upload(copy)
                if th is not None:
                    th.join()
                load_ms = round(box.get("load", 0.0) * 1e3, 1)
                log(step="upload", load=name, mode="copy" if copy else "stage only", bytes=nbytes,
                    gbps=round(nbytes / res["total"] / 1e6, 2), load_ms=load_ms, **res)


if __name__ == "__main__":
    main()
