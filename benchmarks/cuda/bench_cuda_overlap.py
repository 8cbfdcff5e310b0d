"""How much of a proof's H transforms an MSM on another stream can hide (issue 30's concurrency lever).

H's transforms and pointwise step (`DeviceNtt.h_quotient`) sweep memory; the MSMs compute. A
partition's device phase runs them one after the other on one stream (`cuda/phase.py`), so the
question before moving the L, A and B MSMs beside H is what the two cost run at once on this card,
against each alone. With data resident, per size and MSM kind, in interleaved rounds:

* `h`: h_quotient on its own stream (CUDA events), a, b, c refilled from copies before each run;
* `msm`: the MSM on a second stream from a second host thread (host wall clock, as the phase times
  its MSMs; its host round trips included);
* `both`: the two started together from their two threads; the wall clock until both are done, and
  each one's own time inside it.

`hidden_ms` = h + msm - both: the device time the overlap saves; `hidden_of_h` is that over h alone.
`--priority` repeats each pair with one stream at the device's highest priority (`msm` or `h`): the
block scheduler then starts that stream's blocks first wherever a multiprocessor frees up, the other's
filling what is left.
`--ntt-blocks B` repeats them with H's NTT passes on at most B blocks (`CappedPasses`: the passes of
kernels/ntt.cu looping over their tiles), a share of the device planned for H, the rest left to the
MSM; its H, alone and beside, is checked equal to the uncapped one.
MSM kinds: `l` (G1, scalars distributed as a PoRep-32GiB partition's L vector, about half zeros, half
ones and 1.5% others, split 0/1 as the phase does), `dense` (G1, uniform below r, as H's own MSM) and
`g2` (B's G2 MSM: a quarter of the size, as B's 33M scalars against the 2^27 domain, 4.3% others;
benchmarks/results/cuda-partition-h200-2026-12-01h.json). Each run's result is checked equal to the one alone:
running beside must not change what either computes.

    python benchmarks/cuda/bench_cuda_overlap.py --log 26 --reps 5
    CUZK_EMULATED_GPUS=4GiB python benchmarks/cuda/bench_cuda_overlap.py --log 10 --reps 1 --pool 16 --out /tmp/o.json
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, nvidia_smi, write

R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
#: A PoRep-32GiB partition's scalars: shares of zeros and ones (the rest uniform below r), per vector.
CLASSES = {"l": (0.51264, 0.47186), "g2": (0.47847, 0.47811)}
#: Each kind's group, size (log2 below the domain's) and whether the phase splits off its 0/1 scalars.
KINDS = {"l": ("g1", 0, True), "dense": ("g1", 0, False), "g2": ("g2", 2, True)}


def scalars(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 8) uint32 canonical scalars of `kind` (`KINDS`)."""
    out = rng.integers(0, 2**32, size=(n, 8), dtype=np.uint32)
    out[:, 7] %= np.uint32(R >> 224)  # below r's top word: below r
    if kind in CLASSES:
        z, o = CLASSES[kind]
        u = rng.random(n)
        zero, one = u < z, (u >= z) & (u < z + o)
        out[zero | one] = 0
        out[one, 0] = 1
    return out


#: The NTT pass kernels of kernels/ntt.cu looping over their tiles, so that a pass may run on fewer
#: blocks than it has tiles; compiled with the curve unit into this benchmark's own module.
CAPPED_PASSES = r"""
#define OVER_TILES(...) \
    for (u32 tile = blockIdx.x; tile < (1u << (log_n - S - logC)); tile += gridDim.x) { __VA_ARGS__; SYNC(); }
BLOCK_KERNEL LAUNCH_BOUNDS(512) ntt_dif_pass_capped(NTT_DIF_PARAMS) { OVER_TILES(dif_pass<0>(tile, NTT_DIF_ARGS)) }
BLOCK_KERNEL LAUNCH_BOUNDS2(512, 3) ntt_dif_pass_1024_capped(NTT_DIF_PARAMS) {
    OVER_TILES(NTT_PASS_1024_BY_STAGES(dif_pass, tile, NTT_DIF_ARGS))
}
BLOCK_KERNEL LAUNCH_BOUNDS2(512, 2) ntt_dit_pass_capped(NTT_DIT_PARAMS) { OVER_TILES(dit_pass<0>(tile, NTT_DIT_ARGS)) }
BLOCK_KERNEL LAUNCH_BOUNDS2(512, 3) ntt_dit_pass_1024_capped(NTT_DIT_PARAMS) {
    OVER_TILES(NTT_PASS_1024_BY_STAGES(dit_pass, tile, NTT_DIT_ARGS))
}
"""


def capped_passes(blocks: int) -> Any:
    """A kernel module for DeviceNtt whose NTT passes run on at most `blocks` blocks (CAPPED_PASSES);
    every other launch is the curve unit's."""
    from cuzk.backends.cuda.module import NVRTC_OPTIONS, KernelModule
    from cuzk.backends.cuda.runtime import get_cupy
    from cuzk.backends.cuda.sources import kernel_source

    class CappedPasses(KernelModule):
        PASSES = ("ntt_dif_pass", "ntt_dif_pass_1024", "ntt_dit_pass", "ntt_dit_pass_1024")

        def __init__(self) -> None:  # the parent's __init__ would build the curve unit alone
            cp = get_cupy()
            self.xp, self.device_id, self.unit, self.source = cp, 0, "curve+capped", "nvrtc"
            with cp.cuda.Device(0):
                self.num_sms = int(cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"])
                self._module = cp.RawModule(code=kernel_source("curve") + CAPPED_PASSES, options=NVRTC_OPTIONS)
                self._module.compile()
            self._functions: dict[str, Any] = {}

        def launch(self, name: str, grid: int, block: int, args: tuple | list, shared_mem: int = 0) -> None:
            if name in self.PASSES:
                name, grid = name + "_capped", min(grid, blocks)
            super().launch(name, grid, block, args, shared_mem)

    return CappedPasses()


class Rig:
    """The kernels, two streams and the data of one size, resident."""

    def __init__(self, log_n: int, pool: int, seed: int) -> None:
        from cuzk.backends.cuda.module import get_module
        from cuzk.backends.cuda.msm import DeviceMsm
        from cuzk.backends.cuda.ntt import DeviceNtt
        from cuzk.backends.cuda.runtime import get_cupy

        cp = self.cp = get_cupy()
        self.device = cp.cuda.Device(0)
        self.device.use()
        kernels = get_module(0)
        self.plain_ntt = self.ntt = DeviceNtt(kernels)
        self.msm = DeviceMsm(kernels)
        self.ntt_blocks = 0
        self.set_priority("none")
        self.log_n, n = log_n, 1 << log_n
        self.rng = np.random.default_rng(seed)
        self.pool, self.seed = pool, seed
        self._bases: dict[str, Any] = {}
        self.masters = [cp.asarray(scalars("dense", n, self.rng)) for _ in range(3)]
        self.abc = [cp.empty_like(m) for m in self.masters]
        cp.cuda.Device().synchronize()

    def set_ntt_blocks(self, blocks: int) -> None:
        """H's NTT passes on at most `blocks` blocks (0: as many as they have tiles, the curve unit's)."""
        from cuzk.backends.cuda.ntt import DeviceNtt

        self.ntt_blocks = blocks
        self.ntt = DeviceNtt(capped_passes(blocks)) if blocks else self.plain_ntt

    def set_priority(self, priority: str) -> None:
        """New streams for H and the MSM, `priority` naming the one at the device's highest priority."""
        cp = self.cp
        self.priority = priority
        if priority == "none":
            self.s_h, self.s_msm = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
            return
        ranges = getattr(cp.cuda.runtime, "deviceGetStreamPriorityRange", None)
        if ranges is None:  # the emulated device has one queue per stream and no block scheduler
            raise SystemExit("--priority needs a real GPU: this device has no stream priorities")
        _, high = ranges()  # (least, greatest): the greatest is numerically the least
        self.s_h = cp.cuda.Stream(non_blocking=True, priority=high if priority == "h" else 0)
        self.s_msm = cp.cuda.Stream(non_blocking=True, priority=high if priority == "msm" else 0)

    def bases(self, group: str, n: int) -> Any:
        """n bases of `group`: point values do not change Pippenger's work, so a pool of random points
        spread over the n slots."""
        from cuzk.curve.encoding import g1_points_to_uncompressed, g2_points_to_uncompressed
        from cuzk.curve.points import G1Point, G2Point, Scalar

        if group not in self._bases:
            cls, enc = (G1Point, g1_points_to_uncompressed) if group == "g1" else (G2Point, g2_points_to_uncompressed)
            prng = random.Random(self.seed)
            points = [cls() * Scalar.from_le_bytes(prng.randrange(1, R).to_bytes(32, "little"))
                      for _ in range(self.pool)]
            dev_pool = self.msm.upload_bases(group, enc(points))
            self._bases[group] = dev_pool[self.cp.asarray(self.rng.integers(0, self.pool, size=n))]
        return self._bases[group]

    def refill(self) -> None:
        for dst, src in zip(self.abc, self.masters, strict=True):
            dst[...] = src
        self.cp.cuda.Device().synchronize()

    def run_h(self, out: dict[str, Any]) -> None:
        cp = self.cp
        with self.device, self.s_h:
            begin = self.s_h.record()
            h = self.ntt.h_quotient(*self.abc, self.log_n, canonical=True)
            end = self.s_h.record()
            end.synchronize()
        out["h_ms"] = cp.cuda.get_elapsed_time(begin, end)
        out["h"] = h

    def run_msm(self, kind: str, sc: Any, out: dict[str, Any]) -> None:
        group, _, split = KINDS[kind]
        bases = self.bases(group, sc.shape[0])
        start = time.perf_counter()
        with self.device, self.s_msm:
            part = self.msm.msm_split(group, bases, sc) if split else self.msm.msm(group, bases, sc)
            self.s_msm.synchronize()
        out["msm_ms"] = (time.perf_counter() - start) * 1e3
        out["point"] = self.msm.to_points(group, [part])[0]

    def both(self, kind: str, sc: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        gate = threading.Barrier(3)

        def go(fn: Any, *args: Any) -> None:
            gate.wait()
            fn(*args)

        threads = [threading.Thread(target=go, args=(self.run_h, out)),
                   threading.Thread(target=go, args=(self.run_msm, kind, sc, out))]
        for t in threads:
            t.start()
        gate.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        out["both_ms"] = (time.perf_counter() - start) * 1e3
        return out


def bench(rig: Rig, kind: str, reps: int) -> dict[str, Any]:
    cp = rig.cp
    n = 1 << (rig.log_n - KINDS[kind][1])
    sc = cp.asarray(scalars(kind, n, rig.rng))
    # Warm-up, and the results alone that every later run must equal (H's as the uncapped passes give it).
    rig.refill()
    alone_h: dict[str, Any] = {}
    rig.run_h(alone_h)
    h_ref = cp.asnumpy(alone_h.pop("h"))
    if rig.ntt is not rig.plain_ntt:
        capped = rig.ntt
        rig.ntt = rig.plain_ntt
        rig.refill()
        rig.run_h(alone_h)
        rig.ntt = capped
        assert np.array_equal(cp.asnumpy(alone_h.pop("h")), h_ref), "H with capped NTT passes differs"
    alone_m: dict[str, Any] = {}
    rig.run_msm(kind, sc, alone_m)
    p_ref = alone_m["point"]
    samples: dict[str, list[float]] = {"h": [], "msm": [], "both": [], "h_inside": [], "msm_inside": []}
    for _ in range(reps):
        rig.refill()
        one: dict[str, Any] = {}
        rig.run_h(one)
        samples["h"].append(one["h_ms"])
        one = {}
        rig.run_msm(kind, sc, one)
        samples["msm"].append(one["msm_ms"])
        assert one["point"] == p_ref, "the MSM alone gave another point than its first run"
        rig.refill()
        out = rig.both(kind, sc)
        samples["both"].append(out["both_ms"])
        samples["h_inside"].append(out["h_ms"])
        samples["msm_inside"].append(out["msm_ms"])
        assert out["point"] == p_ref, "the MSM beside H gave another point than alone"
        assert np.array_equal(cp.asnumpy(out["h"]), h_ref), "H beside the MSM differs from H alone"
    med = {k: round(statistics.median(v), 3) for k, v in samples.items()}
    hidden = med["h"] + med["msm"] - med["both"]
    return {"log_n": rig.log_n, "msm": kind, "priority": rig.priority, "ntt_blocks": rig.ntt_blocks,
            "msm_log_n": n.bit_length() - 1,
            "reps": reps, "median_ms": med,
            "hidden_ms": round(hidden, 3), "hidden_of_h": round(hidden / med["h"], 3) if med["h"] else None,
            "samples_ms": {k: [round(x, 3) for x in v] for k, v in samples.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log", type=int, action="append", help="log2 of the size (repeatable; default 26)")
    p.add_argument("--kinds", default="l,dense,g2", help="MSM kinds beside H: l, dense, g2")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--pool", type=int, default=1024, help="distinct random bases spread over the slots")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--priority", action="append", choices=("none", "msm", "h"),
                   help="the stream at the highest priority (repeatable; default none)")
    p.add_argument("--ntt-blocks", type=int, action="append",
                   help="H's NTT passes on at most this many blocks (repeatable; 0: uncapped, the default)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    rows = []
    for log_n in args.log or [26]:
        rig = Rig(log_n, args.pool, args.seed)
        for blocks in args.ntt_blocks or [0]:
            rig.set_ntt_blocks(blocks)
            for priority in args.priority or ["none"]:
                rig.set_priority(priority)
                for kind in args.kinds.split(","):
                    row = bench(rig, kind, args.reps)
                    print(row["log_n"], row["msm"], f"blocks={blocks}", priority, row["median_ms"], "hidden",
                          row["hidden_ms"], flush=True)
                    rows.append(row)
        del rig
    path = write("cuda-overlap", envelope("cuda-overlap", rows, gpu=nvidia_smi()), args.out)
    print(path)


if __name__ == "__main__":
    main()
