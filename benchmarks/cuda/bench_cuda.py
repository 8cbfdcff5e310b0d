"""CUDA backend kernels and a whole proof on one GPU, side by side with sppark on the same GPU model.

Measures, with data already on the device (sppark's "resident" variants):

* NTTs over Fr: forward, inverse, forward coset and inverse coset, natural order in and out;
* G1 and G2 MSMs of dense random scalars uniform below r (the worst case, as sppark's runs);
* a whole Groth16 proof of a MiMC circuit on the CudaBackend (keys resident), phase by phase;

and from pinned host memory, result back on the host (sppark's "pinned" columns; `*_pinned` rows,
host wall clock, each result checked equal to the resident one):

* the forward NTT and forward coset NTT: copy in, transform, copy out, on one stream (every pass
  needs the whole input, so nothing overlaps within one call);
* the MSMs: the scalars, then the bases (in device form) copied on a copy stream; the sort waits only
  for the scalars and the base upload runs beside it; the result is copied back and finished into a
  point on the host (`DeviceMsm.to_points`).

Every time is the median (min, max) of `--reps` runs after one warm-up: CUDA events around the NTTs,
host wall clock around each MSM call (it includes its small device-to-host reads and the final
window combination, like sppark's `msm_t::invoke` figures). The sppark figures (`SPPARK_MS`) are
sppark's medians on the same GPU model (benchmarks/README.md, "The sppark reference").

    python benchmarks/cuda/bench_cuda.py --out results.json
    python benchmarks/cuda/bench_cuda.py --quick          # small sizes, a smoke test
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, nvidia_smi, write

#: sppark on an H200, data already on the GPU, median ms (benchmarks/README.md, "The sppark reference").
SPPARK_MS = {
    "ntt_fwd_NN": {20: 0.278, 24: 4.745, 27: 44.40},
    "ntt_inv_NN": {20: 0.294, 24: 4.997, 27: 46.95},
    "ntt_fwd_NN_coset": {20: 0.319, 24: 5.346, 27: 49.14},
    "ntt_inv_NN_coset": {20: 0.334, 24: 5.596, 27: 51.69},
    "msm_g1": {20: 20.06, 22: 53.12, 24: 153.85, 26: 557.28, 27: 1099.93},
    "msm_g2": {20: 46.68, 22: 137.48},
    # pinned host memory in, result out: NTT::Base (alloc, H2D, NTT, D2H, free), mult_pippenger (oneshot_pinned)
    "ntt_fwd_NN_pinned": {20: 1.514, 24: 24.58, 27: 201.8},
    "msm_g1_pinned": {20: 20.82, 22: 56.71, 24: 169.62, 26: 623.23},
    "msm_g2_pinned": {20: 47.73, 22: 145.52},
}
#: sppark measured its pinned coset NTT in RN order only (bit-reversed in): not the same operation as
#: ntt_fwd_NN_coset_pinned, so it is kept beside it rather than as its ratio.
SPPARK_RN_COSET_PINNED_MS = {20: 1.539, 24: 24.61, 27: 203.2}
R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
#: What the --sweep picked, handed to the whole-proof benchmark.
TUNING: dict[str, Any] = {"accumulate_variant": {}, "acc_threads": {}}


def stats_ms(samples: list[float]) -> dict[str, Any]:
    return {"median_ms": round(statistics.median(samples), 4), "min_ms": round(min(samples), 4),
            "max_ms": round(max(samples), 4), "samples_ms": [round(x, 4) for x in samples]}


def random_scalars(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 4) uint64 canonical scalars, uniform below r (rejection on the top limbs)."""
    limbs = [(R >> (64 * i)) & (2**64 - 1) for i in range(4)]
    out = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    out[:, 3] %= np.uint64(limbs[3] + 1)
    while True:
        ge = np.zeros(len(out), bool)
        eq = np.ones(len(out), bool)
        for i in (3, 2, 1, 0):
            ge |= eq & (out[:, i] > np.uint64(limbs[i]))
            eq &= out[:, i] == np.uint64(limbs[i])
        bad = np.flatnonzero(ge | eq)
        if not len(bad):
            return out
        fresh = rng.integers(0, 2**64, size=(len(bad), 4), dtype=np.uint64)
        fresh[:, 3] %= np.uint64(limbs[3] + 1)
        out[bad] = fresh


def time_events(cp: Any, fn: Callable[[], Any], reps: int) -> list[float]:
    fn()
    cp.cuda.Device().synchronize()
    samples = []
    for _ in range(reps):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(cp.cuda.get_elapsed_time(start, end))
    return samples


def time_wall(cp: Any, fn: Callable[[], Any], reps: int) -> list[float]:
    fn()
    cp.cuda.Device().synchronize()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def with_sppark(row: dict[str, Any], key: str, log_n: int) -> dict[str, Any]:
    ref = SPPARK_MS.get(key, {}).get(log_n)
    if ref is not None:
        row["sppark_median_ms"] = ref
        row["ratio_vs_sppark"] = round(row["median_ms"] / ref, 3)
    return row


def random_fr_words(cp: Any, log_n: int) -> Any:
    """2^log_n random (n, 8) u32 field elements on the device: valid (below r), any values will do
    for timing."""
    if hasattr(cp, "random"):
        data = cp.random.randint(0, 2**31, size=(1 << log_n, 8), dtype=cp.int64).astype(cp.uint32)
    else:  # the emulated device's CuPy has no generator
        data = cp.asarray(np.random.default_rng(log_n).integers(0, 2**31, size=(1 << log_n, 8), dtype=np.uint32))
    data[:, 7] &= 0x0FFFFFFF
    return data


def bench_ntt(cp: Any, sizes: list[int], reps: int) -> list[dict[str, Any]]:
    """The four natural-order transforms at each size, and the two parts of the forward one."""
    from cuzk.backends.cuda.module import get_module
    from cuzk.backends.cuda.ntt import DIRECT_TWIDDLE_LOG, DeviceNtt

    ntt = DeviceNtt(get_module())

    def no_direct(fn: Callable[..., Any], d: Any, log_n: int) -> None:
        ntt.direct_twiddle_log = 0
        try:
            fn(d, log_n, ntt.default_root(log_n))
        finally:
            ntt.direct_twiddle_log = DIRECT_TWIDDLE_LOG

    rows = []
    for log_n in sizes:
        data = random_fr_words(cp, log_n)
        for key, fn in (("ntt_fwd_NN", lambda d=data, L=log_n: ntt.ntt(d, L)),
                        ("ntt_inv_NN", lambda d=data, L=log_n: ntt.intt(d, L)),
                        ("ntt_fwd_NN_coset", lambda d=data, L=log_n: ntt.coset_ntt(d, L)),
                        ("ntt_inv_NN_coset", lambda d=data, L=log_n: ntt.icoset_ntt(d, L)),
                        # the two parts of ntt_fwd_NN: the transform passes, the permutation
                        ("ntt_fwd_dif_only", lambda d=data, L=log_n: ntt.dif(d, L, ntt.default_root(L))),
                        ("ntt_bitrev_only", lambda d=data, L=log_n: ntt.bitrev(d, L)),
                        # the other transform kernel (the H polynomial's bit-reversed-in half)
                        ("ntt_fwd_dit_only", lambda d=data, L=log_n: ntt.dit(d, L, ntt.default_root(L))),
                        # the transform passes without the direct twiddle tables (ntt.py DIRECT_TWIDDLE_LOG)
                        ("ntt_fwd_dif_only_no_direct_twiddles", lambda d=data, L=log_n: no_direct(ntt.dif, d, L))):
            row = {"op": key, "log_n": log_n, **stats_ms(time_events(cp, fn, reps))}
            rows.append(with_sppark(row, key, log_n))
            print(json.dumps({k: v for k, v in row.items() if k != "samples_ms"}), flush=True)
        rows += bench_ntt_pinned(cp, ntt, data, log_n, reps)
        del data
        ntt.clear_tables()
        cp.get_default_memory_pool().free_all_blocks()
    return rows


#: bench_h's variants: (label, DeviceNtt.quotient_transforms, .fuse_coset, .fuse_product): every fusion,
#: the product's sweep apart, both apart, and "seven", H as the backend ran it before the six-transform
#: quotient and the fusions.
H_VARIANTS = (("six", 6, True, True), ("six_product_apart", 6, True, False), ("six_apart", 6, False, False),
              ("seven", 7, False, False))


def bench_h(cp: Any, sizes: list[int], reps: int) -> list[dict[str, Any]]:
    """H's quotient (`DeviceNtt.h_quotient`, canonical in and out as the backend runs it) under each of
    `H_VARIANTS`, alternating within each repetition (CUDA events) on the same a, b and c = a·b (every
    constraint holding: where they do not, six and seven transforms differ); outputs checked equal."""
    from cuzk.backends.cuda.module import get_module
    from cuzk.backends.cuda.ntt import DeviceNtt

    ntt = DeviceNtt(get_module())
    rows = []
    for log_n in sizes:
        n = 1 << log_n
        a, b = random_fr_words(cp, log_n), random_fr_words(cp, log_n)
        c = a.copy()
        ntt.k.launch1d("fr_h_combine", n, (c, b, None, n, None), 256)  # c = a·b: satisfied rows
        work = [cp.empty_like(a) for _ in range(3)]
        outs: dict[str, Any] = {}
        samples: dict[str, list[float]] = {label: [] for label, *_ in H_VARIANTS}
        for rep in range(reps + 1):  # the first round warms the tables up and is not counted
            for label, transforms, fuse, fuse_product in H_VARIANTS:
                for w, v in zip(work, (a, b, c), strict=True):
                    w[...] = v
                ntt.quotient_transforms, ntt.fuse_coset, ntt.fuse_product = transforms, fuse, fuse_product
                start, end = cp.cuda.Event(), cp.cuda.Event()
                start.record()
                out = ntt.h_quotient(*work, log_n, canonical=True)
                end.record()
                end.synchronize()
                if rep:
                    samples[label].append(cp.cuda.get_elapsed_time(start, end))
                else:
                    outs[label] = out.copy()
        for label, transforms, fuse, fuse_product in H_VARIANTS:
            row = {"op": "h_quotient", "variant": label, "transforms": transforms, "fuse_coset": fuse,
                   "fuse_product": fuse_product,
                   "log_n": log_n, **stats_ms(samples[label]),
                   "equal_to_seven": bool((outs[label] == outs["seven"]).all())}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "samples_ms"}), flush=True)
        del a, b, c, work, outs
        ntt.clear_tables()
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def bench_ntt_ab(cp: Any, sizes: list[int], reps: int, builds: dict[str, Any]) -> list[dict[str, Any]]:
    """The transforms under each build of the curve unit (label -> KernelModule: the current one and
    the --ab cubins), alternating within each repetition on the same data; every build's output checked
    equal to the current build's."""
    from cuzk.backends.cuda.ntt import DeviceNtt

    ntts = {label: DeviceNtt(module) for label, module in builds.items()}
    rows = []
    for log_n in sizes:
        src = random_fr_words(cp, log_n)
        data = src.copy()
        ops = (("ntt_fwd_NN", lambda t, d, L: t.ntt(d, L)), ("ntt_inv_NN", lambda t, d, L: t.intt(d, L)),
               ("ntt_fwd_NN_coset", lambda t, d, L: t.coset_ntt(d, L)),
               ("ntt_fwd_dif_only", lambda t, d, L: t.dif(d, L, t.default_root(L))),
               ("ntt_fwd_dit_only", lambda t, d, L: t.dit(d, L, t.default_root(L))))
        for key, fn in ops:
            outs = {}
            for label, t in ntts.items():
                outs[label] = src.copy()
                fn(t, outs[label], log_n)
            equal = {label: bool(cp.array_equal(out, outs["current"])) for label, out in outs.items()}
            del outs
            samples: dict[str, list[float]] = {label: [] for label in ntts}
            for _ in range(reps):
                for label, t in ntts.items():
                    samples[label] += time_events(cp, lambda f=fn, t=t, L=log_n, d=data: f(t, d, L), 1)
            for label in ntts:
                row = {"op": key, "log_n": log_n, "variant": label, "equal_to_current": equal[label],
                       **stats_ms(samples[label])}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "samples_ms"}), flush=True)
        del src, data
        for t in ntts.values():
            t.clear_tables()
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def bench_ntt_plans(cp: Any, specs: list[str], reps: int) -> list[dict[str, Any]]:
    """DIF and DIT passes under other pass plans ("27:9,8,10": sizes from the top bits down for DIF,
    the same plan reversed for DIT; "20:7,7,6@7": with blocks of 2^7 points, `DeviceNtt.block_log`)
    against the default one, alternating within each repetition on the same data; every output
    checked equal to the default plan's."""
    from cuzk.backends.cuda.module import get_module
    from cuzk.backends.cuda.ntt import MAX_PASS_LOG, DeviceNtt

    ntt = DeviceNtt(get_module())
    plans: dict[int, list[tuple[tuple[int, ...], int]]] = {}
    for spec in specs:
        log_s, _, rest = spec.partition(":")
        sizes, _, block = rest.partition("@")
        plan = tuple(int(x) for x in sizes.split(",") if x.strip().isdigit())
        block_log = int(block) if block.isdigit() else MAX_PASS_LOG
        if (not log_s.isdigit() or sum(plan) != int(log_s) or len(plan) != len(sizes.split(","))
                or (block and not block.isdigit()) or not all(1 <= s <= min(block_log, MAX_PASS_LOG) for s in plan)):
            raise SystemExit(f"--ntt-plans: expected log_n:s1,s2,...[@block_log] summing to log_n, each at most "
                             f"the block's log ({MAX_PASS_LOG} unless given), got {spec!r}")
        plans.setdefault(int(log_s), []).append((plan, block_log))
    rows = []
    for log_n, candidates in plans.items():
        src = random_fr_words(cp, log_n)
        data = src.copy()
        for kind in ("dif", "dit"):
            run = getattr(ntt, kind)
            ntt.pass_plans.clear()
            ntt.block_log = MAX_PASS_LOG
            default = tuple(ntt._passes(log_n, kind))  # in run order
            variants = {"default": (default if kind == "dif" else tuple(reversed(default)), MAX_PASS_LOG),
                        **{",".join(map(str, p)) + (f"@{b}" if b != MAX_PASS_LOG else ""): (p, b)
                           for p, b in candidates}}

            def use(variant: tuple[tuple[int, ...], int], kind: str = kind, log_n: int = log_n) -> None:
                plan, ntt.block_log = variant
                ntt.pass_plans[(kind, log_n)] = plan if kind == "dif" else tuple(reversed(plan))

            outs = {}
            for label, plan in variants.items():
                use(plan)
                outs[label] = src.copy()
                run(outs[label], log_n, ntt.default_root(log_n))
            equal = {label: bool(cp.array_equal(out, outs["default"])) for label, out in outs.items()}
            del outs
            samples: dict[str, list[float]] = {label: [] for label in variants}
            for _ in range(reps):
                for label, plan in variants.items():
                    use(plan)
                    samples[label] += time_events(
                        cp, lambda r=run, d=data, L=log_n: r(d, L, ntt.default_root(L)), 1)
            ntt.pass_plans.clear()
            ntt.block_log = MAX_PASS_LOG
            for label, (plan, block_log) in variants.items():
                order = plan if kind == "dif" else tuple(reversed(plan))
                row = {"op": f"ntt_{kind}_passes", "log_n": log_n, "plan": label, "passes_in_run_order": order,
                       "block_log": block_log, "equal_to_default": equal[label], **stats_ms(samples[label])}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "samples_ms"}), flush=True)
        del src, data
        ntt.clear_tables()
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def pinned_copy(dev: Any) -> np.ndarray:
    """A device array's copy in pinned host memory."""
    import cupyx

    host = cupyx.empty_pinned(dev.shape, dtype=dev.dtype)
    dev.get(out=host)
    return host


def bench_ntt_pinned(cp: Any, ntt: Any, data: Any, log_n: int, reps: int) -> list[dict[str, Any]]:
    """The forward and forward coset NTTs from pinned host memory back to pinned host memory: device
    buffer from CuPy's pool, H2D, transform, D2H, on the current stream (host wall clock)."""
    import cupyx

    rt = cp.cuda.runtime
    host_in = pinned_copy(data)
    host_out = cupyx.empty_pinned(data.shape, dtype=np.uint32)
    rows = []
    for key, transform in (("ntt_fwd_NN_pinned", ntt.ntt), ("ntt_fwd_NN_coset_pinned", ntt.coset_ntt)):
        def run(transform: Callable[..., Any] = transform) -> None:
            stream = cp.cuda.get_current_stream().ptr
            dev = cp.empty(host_in.shape, dtype=cp.uint32)
            rt.memcpyAsync(dev.data.ptr, host_in.ctypes.data, host_in.nbytes, rt.memcpyHostToDevice, stream)
            result = transform(dev, log_n)
            rt.memcpyAsync(host_out.ctypes.data, result.data.ptr, host_in.nbytes, rt.memcpyDeviceToHost, stream)

        row = {"op": key, "log_n": log_n, **stats_ms(time_wall(cp, run, reps))}
        want = transform(cp.asarray(host_in), log_n)
        row["checked_equal_to_resident"] = bool(np.array_equal(cp.asnumpy(want), host_out))
        del want
        if key == "ntt_fwd_NN_coset_pinned" and log_n in SPPARK_RN_COSET_PINNED_MS:
            row["sppark_fwd_RN_coset_pinned_ms"] = SPPARK_RN_COSET_PINNED_MS[log_n]
        rows.append(with_sppark(row, key, log_n))
        print(json.dumps({k: v for k, v in row.items() if k != "samples_ms"}), flush=True)
    return rows


def bench_msm_pinned(cp: Any, eng: Any, group: str, bases: Any, scalars: Any, reps: int,
                     want: Any) -> dict[str, Any]:
    """One MSM from pinned host memory to a point on the host (see the module docstring); `want` is
    the resident MSM's point, which the result must equal."""
    rt = cp.cuda.runtime
    n = scalars.shape[0]
    host_bases, host_scalars = pinned_copy(bases), pinned_copy(scalars)
    copy = cp.cuda.Stream(non_blocking=True)
    out: list[Any] = []

    def run() -> None:
        compute = cp.cuda.get_current_stream()
        dev_scalars = cp.empty(host_scalars.shape, dtype=cp.uint32)
        dev_bases = cp.empty(host_bases.shape, dtype=cp.uint32)
        copy.wait_event(compute.record())  # the pool's memory may still be read by the last call's kernels
        rt.memcpyAsync(dev_scalars.data.ptr, host_scalars.ctypes.data, host_scalars.nbytes, rt.memcpyHostToDevice,
                       copy.ptr)
        scalars_ready = copy.record()
        rt.memcpyAsync(dev_bases.data.ptr, host_bases.ctypes.data, host_bases.nbytes, rt.memcpyHostToDevice, copy.ptr)
        bases_ready = copy.record()
        compute.wait_event(scalars_ready)
        out[:] = eng.to_points(group, [eng.msm(group, dev_bases, dev_scalars, bases_ready=bases_ready)])

    row = {"op": f"msm_{group}_pinned", "log_n": n.bit_length() - 1,
           **stats_ms(time_wall(cp, run, reps))}
    row["checked_equal_to_resident"] = bool(out[0] == want)
    return with_sppark(row, f"msm_{group}_pinned", row["log_n"])


def bench_msm(cp: Any, group: str, sizes: list[int], reps: int, check_log: int | None,
              sweep_log: int | None = None, window_logs: tuple[int, ...] = (),
              window_bits: tuple[int, ...] = (), reduce_log: int | None = None,
              tree_logs: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """Bases: 2^12 distinct random points, spread over the n slots in random order (point values do
    not change Pippenger's work); scalars uniform below r. With `sweep_log`, every occupancy variant
    of the accumulation kernel (and grid size) is timed at that size first and the fastest is used for
    the rest; at each size of `window_logs`, every window size of `window_bits` is timed (with its
    phases), for choosing the per-size windows of msm.py; at `reduce_log`, every running-sum length of
    the bucket reduction, the fastest (by the reduction's own time) being used for the rest; at each
    size of `tree_logs`, the batch-affine tree rounds off and at several thresholds (TREE_SETTINGS),
    timed in alternation, each result checked equal to the one without tree rounds."""
    from cuzk.backends.cuda.module import get_module
    from cuzk.backends.cuda.msm import ACCUMULATE_VARIANTS, DeviceMsm
    from cuzk.curve.encoding import g1_points_to_uncompressed, g2_points_to_uncompressed
    from cuzk.curve.msm import msm as cpu_msm
    from cuzk.curve.points import G1Point, G2Point, Scalar

    cls = G1Point if group == "g1" else G2Point
    eng = DeviceMsm(get_module())
    prng = random.Random(7)
    distinct = 1 << 12
    pool = [cls() * Scalar.from_le_bytes(prng.randrange(1, R).to_bytes(32, "little")) for _ in range(distinct)]
    enc = g1_points_to_uncompressed if group == "g1" else g2_points_to_uncompressed
    dev_pool = eng.upload_bases(group, enc(pool))
    rng = np.random.default_rng(1)
    rows = []
    if sweep_log is not None:
        n = 1 << sweep_log
        bases = dev_pool[cp.asarray(rng.integers(0, distinct, size=n))]
        scalars = cp.asarray(random_scalars(n, rng).view(np.uint32).reshape(n, 8))
        best = None
        for variant, spec in ACCUMULATE_VARIANTS[group].items():
            for per_sm in (spec.threads_per_sm, 2 * spec.threads_per_sm):
                eng.accumulate_variant[group] = variant
                eng.acc_threads[group] = eng.k.num_sms * per_sm
                samples = time_wall(cp, lambda b=bases, s=scalars: eng.msm(group, b, s), 3)
                row = {"op": f"msm_{group}_accumulate{variant}", "threads_per_sm": per_sm, "log_n": sweep_log,
                       **stats_ms(samples)}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "samples_ms"}), flush=True)
                if best is None or row["median_ms"] < best[2]:
                    best = (variant, per_sm, row["median_ms"])
        eng.accumulate_variant[group] = best[0]
        eng.acc_threads[group] = eng.k.num_sms * best[1]
        TUNING["accumulate_variant"][group] = best[0]
        TUNING["acc_threads"][group] = eng.acc_threads[group]
        del bases, scalars
    for wlog in window_logs:
        n = 1 << wlog
        bases = dev_pool[cp.asarray(rng.integers(0, distinct, size=n))]
        scalars = cp.asarray(random_scalars(n, rng).view(np.uint32).reshape(n, 8))
        for bits in window_bits:
            eng.window_bits = bits
            samples = time_wall(cp, lambda b=bases, s=scalars: eng.msm(group, b, s), 3)
            eng.profile = {}
            eng.msm(group, bases, scalars)
            row = {"op": f"msm_{group}_window", "window_bits": bits, "log_n": wlog, **stats_ms(samples),
                   "phases_ms": {k: round(v, 3) for k, v in eng.profile.items()}}
            eng.profile = None
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "samples_ms"}), flush=True)
        eng.window_bits = None
        del bases, scalars
        cp.get_default_memory_pool().free_all_blocks()
    for tlog in tree_logs:
        rows += _tree_sweep(cp, eng, group, dev_pool, rng, tlog)
    if reduce_log is not None:
        n = 1 << reduce_log
        bases = dev_pool[cp.asarray(rng.integers(0, distinct, size=n))]
        scalars = cp.asarray(random_scalars(n, rng).view(np.uint32).reshape(n, 8))
        best_l = None
        for log_l in (1, 2, 3, 4, 5):
            eng.reduce_log_l[group] = log_l
            samples = time_wall(cp, lambda b=bases, s=scalars: eng.msm(group, b, s), 3)
            eng.profile = {}
            eng.msm(group, bases, scalars)
            row = {"op": f"msm_{group}_reduce_log_l", "reduce_log_l": log_l, "log_n": reduce_log,
                   **stats_ms(samples), "phases_ms": {k: round(v, 3) for k, v in eng.profile.items()}}
            eng.profile = None
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "samples_ms"}), flush=True)
            if best_l is None or row["phases_ms"]["reduce"] < best_l[1]:
                best_l = (log_l, row["phases_ms"]["reduce"])
        eng.reduce_log_l[group] = best_l[0]
        TUNING.setdefault("reduce_log_l", {})[group] = best_l[0]
        del bases, scalars
    for log_n in sizes:
        n = 1 << log_n
        idx = rng.integers(0, distinct, size=n)
        bases = dev_pool[cp.asarray(idx)]
        host_scalars = random_scalars(n, rng)
        scalars = cp.asarray(host_scalars.view(np.uint32).reshape(n, 8))
        result: list[Any] = []

        def run(b: Any = bases, s: Any = scalars, out: list[Any] = result) -> None:
            out[:] = [eng.msm(group, b, s)]

        row = {"op": f"msm_{group}", "log_n": log_n, "window_bits": eng.window(n),
               "accumulate_variant": eng.accumulate_variant[group],
               "threads_per_sm": eng.acc_threads[group] // eng.k.num_sms, "max_window": eng.max_window,
               "reduce_log_l": eng.reduce_log_l[group],
               **stats_ms(time_wall(cp, run, reps if log_n < 26 else max(3, reps - 2)))}
        eng.profile = {}
        run()
        row["phases_ms"] = {k: round(v, 3) for k, v in eng.profile.items()}
        eng.profile = None
        resident_point = eng.to_points(group, [result[0]])[0]
        if check_log is not None and log_n == check_log:
            want = cpu_msm([pool[i] for i in idx.tolist()], host_scalars, group=cls)
            row["checked_against_cpu"] = bool(resident_point == want)
        rows.append(with_sppark(row, f"msm_{group}", log_n))
        print(json.dumps({k: v for k, v in row.items() if k != "samples_ms"}), flush=True)
        del result
        pinned = bench_msm_pinned(cp, eng, group, bases, scalars, reps if log_n < 26 else max(3, reps - 2),
                                  resident_point)
        rows.append(pinned)
        print(json.dumps({k: v for k, v in pinned.items() if k != "samples_ms"}), flush=True)
        del bases, scalars
        cp.get_default_memory_pool().free_all_blocks()
    return rows


#: Thresholds of the batch-affine tree rounds the sweep compares (DeviceMsm.tree_min_pairs; None: off).
TREE_SETTINGS: tuple[int | None, ...] = (None, 32, 64, 128, 256)


def _tree_sweep(cp: Any, eng: Any, group: str, pool: Any, rng: np.random.Generator, log_n: int) -> list[dict[str, Any]]:
    """The MSM at 2^log_n with each of TREE_SETTINGS, the settings alternating within each repetition."""
    n = 1 << log_n
    bases = pool[cp.asarray(rng.integers(0, pool.shape[0], size=n))]
    scalars = cp.asarray(random_scalars(n, rng).view(np.uint32).reshape(n, 8))
    keep = eng.tree_min_pairs[group]
    samples: dict[int | None, list[float]] = {t: [] for t in TREE_SETTINGS}
    results: dict[int | None, Any] = {}
    phases: dict[int | None, dict[str, float]] = {}
    for t in TREE_SETTINGS:
        eng.tree_min_pairs[group] = t
        results[t] = eng.to_points(group, [eng.msm(group, bases, scalars)])[0]
    for _ in range(5 if log_n < 26 else 3):
        for t in TREE_SETTINGS:
            eng.tree_min_pairs[group] = t
            cp.cuda.Device().synchronize()
            start = time.perf_counter()
            eng.msm(group, bases, scalars)
            cp.cuda.Device().synchronize()
            samples[t].append((time.perf_counter() - start) * 1e3)
    for t in TREE_SETTINGS:
        eng.tree_min_pairs[group] = t
        eng.profile = {}
        eng.msm(group, bases, scalars)
        phases[t] = {k: round(v, 3) for k, v in eng.profile.items()}
        eng.profile = None
    rows = []
    for t in TREE_SETTINGS:
        row = {"op": f"msm_{group}_tree", "tree_min_pairs": t, "log_n": log_n, **stats_ms(samples[t]),
               "phases_ms": phases[t], "equal_to_no_tree": bool(results[t] == results[None])}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "samples_ms"}), flush=True)
    eng.tree_min_pairs[group] = keep
    del bases, scalars
    cp.get_default_memory_pool().free_all_blocks()
    return rows


def cubin_module(path: Path, device_id: int = 0) -> Any:
    """A KernelModule running another build of the curve unit (a cubin file, e.g. the committed
    source's), for timing it side by side with the current one in one process."""
    import cupy

    from cuzk.backends.cuda.module import KernelModule

    class CubinModule(KernelModule):
        def __init__(self) -> None:  # the parent's __init__ would load the current source's build
            self.xp = cupy
            self.device_id = device_id
            self.unit = "curve"
            with cupy.cuda.Device(device_id):
                self.num_sms = int(cupy.cuda.runtime.getDeviceProperties(device_id)["multiProcessorCount"])
                self._module = cupy.RawModule(path=str(path))
            self.source = f"cubin {path.name}"
            self._functions = {}

    if not path.is_file():
        raise SystemExit(f"--ab: no cubin at {path}")
    return CubinModule()


#: DeviceMsm attributes --ab-settings may set (int values).
AB_SETTINGS = ("window_bits", "smem_sort_max_pairs", "scatter_by_window", "tree_threads_per_sm", "tree_min_pairs",
               "tree_waves", "ones_tree")


def apply_settings(eng: Any, group: str, settings: dict[str, int]) -> None:
    """Set --ab-settings on a DeviceMsm (the tree's are per group: set for `group`)."""
    for attr, value in settings.items():
        if attr == "tree_threads_per_sm":
            eng.tree_threads[group] = eng.k.num_sms * value
        elif attr in ("tree_min_pairs", "tree_waves"):
            getattr(eng, attr)[group] = value
        else:
            setattr(eng, attr, value)


AbVariant = tuple[str, Path | None, int | None, dict[str, int]]


def parse_ab(spec: str, thresholds: str, settings: str = "") -> list[AbVariant]:
    """--ab 'label=path,...', --ab-thresholds '16,32' and --ab-settings 'label:attr=v;attr=v,...' ->
    (label, cubin or None for the current build, G1/G2 tree threshold or None for the defaults,
    DeviceMsm attributes to set): the current build first, then the others."""
    variants: list[AbVariant] = [("current", None, None, {})]
    for item in (x for x in spec.split(",") if x):
        label, sep, rest = item.partition("=")
        path, _, body = rest.partition(":")
        if not sep or not label or not path:
            raise SystemExit(f"--ab: expected label=path[:attr=int;...], got {item!r}")
        variants.append((label, Path(path), None, _parse_settings(item, body)))
    variants += [(f"current@{t}", None, int(t), {}) for t in thresholds.split(",") if t]
    for item in (x for x in settings.split(",") if x):
        label, sep, body = item.partition(":")
        if not sep or not label or not body:
            raise SystemExit(f"--ab-settings: expected label:attr=int;..., got {item!r}")
        variants.append((label, None, None, _parse_settings(item, body)))
    return variants


def _parse_settings(item: str, body: str) -> dict[str, int]:
    """'attr=int;attr=int' -> {attr: int}, attrs from AB_SETTINGS."""
    attrs = dict(kv.partition("=")[::2] for kv in body.split(";") if kv)
    if any(k not in AB_SETTINGS or not v.isdigit() for k, v in attrs.items()):
        raise SystemExit(f"--ab / --ab-settings: settings are attr=int with attr in {AB_SETTINGS}, got {item!r}")
    return {k: int(v) for k, v in attrs.items()}


def bench_ab(cp: Any, group: str, sizes: list[int], reps: int,
             variants: list[AbVariant], split: bool = False) -> list[dict[str, Any]]:
    """The MSM at each size under every variant (a build of the kernels, a tree threshold, settings), the
    variants alternating within each repetition (the same bases and scalars, host wall clock as in
    bench_msm); every variant's result checked equal to the current build's. `split`: scalars shaped as
    a PoRep-32GiB partition's L (G1) or B (G2) vector, mostly 0s and 1s, through `msm_split`."""
    from bench_cuda_overlap import scalars as partition_scalars

    from cuzk.backends.cuda.module import get_module
    from cuzk.backends.cuda.msm import DeviceMsm
    from cuzk.curve.encoding import g1_points_to_uncompressed, g2_points_to_uncompressed
    from cuzk.curve.points import G1Point, G2Point, Scalar

    cls = G1Point if group == "g1" else G2Point
    engines: dict[str, Any] = {}
    for label, path, threshold, settings in variants:
        eng = DeviceMsm(get_module() if path is None else cubin_module(path))
        if threshold is not None:
            eng.tree_min_pairs[group] = threshold
        apply_settings(eng, group, settings)
        engines[label] = eng
    current = engines["current"]
    prng = random.Random(11)
    distinct = 1 << 12
    pool = [cls() * Scalar.from_le_bytes(prng.randrange(1, R).to_bytes(32, "little")) for _ in range(distinct)]
    enc = g1_points_to_uncompressed if group == "g1" else g2_points_to_uncompressed
    dev_pool = current.upload_bases(group, enc(pool))
    rng = np.random.default_rng(3)
    rows = []
    for log_n in sizes:
        n = 1 << log_n
        bases = dev_pool[cp.asarray(rng.integers(0, distinct, size=n))]
        if split:
            scalars = cp.asarray(partition_scalars("l" if group == "g1" else "g2", n, rng))
        else:
            scalars = cp.asarray(random_scalars(n, rng).view(np.uint32).reshape(n, 8))

        def run(eng: Any, b: Any = bases, s: Any = scalars) -> Any:
            return eng.msm_split(group, b, s) if split else eng.msm(group, b, s)

        results = {label: eng.to_points(group, [run(eng)])[0] for label, eng in engines.items()}
        samples: dict[str, list[float]] = {label: [] for label in engines}
        for _ in range(reps if log_n < 26 else max(2, reps - 2)):
            for label, eng in engines.items():
                cp.cuda.Device().synchronize()
                start = time.perf_counter()
                run(eng)
                cp.cuda.Device().synchronize()
                samples[label].append((time.perf_counter() - start) * 1e3)
        for label, eng in engines.items():
            eng.profile = {}
            run(eng)
            row = {"op": f"msm_{group}_{'split_' if split else ''}ab", "variant": label, "source": eng.k.source,
                   "log_n": log_n, "ones_tree": eng.ones_tree,
                   "tree_min_pairs": eng.tree_min_pairs[group], "window_bits": eng.window(n),
                   "tree_threads_per_sm": eng.tree_threads[group] // eng.k.num_sms, "tree_waves": eng.tree_waves[group],
                   **stats_ms(samples[label]),
                   "phases_ms": {k: round(v, 3) for k, v in eng.profile.items()},
                   "equal_to_current": bool(results[label] == results["current"])}
            eng.profile = None
            rows.append(row if split else with_sppark(row, f"msm_{group}", log_n))  # sppark's are dense
            print(json.dumps({k: v for k, v in row.items() if k != "samples_ms"}), flush=True)
        del bases, scalars, results
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def bench_prove(circuit_id: str, reps: int, tuning: dict[str, Any] | None = None) -> dict[str, Any]:
    from cuzk.backends.cuda import CudaBackend
    from cuzk.circuits.registry import lookup
    from cuzk.groth16.assignment import Assignment
    from cuzk.groth16.setup import ToxicWaste, generate_insecure_parameters
    from cuzk.groth16.synthesis import synthesize_for_proving
    from cuzk.groth16.verifier import verify_proof

    spec = lookup(circuit_id)
    t0 = time.perf_counter()
    pk = generate_insecure_parameters(spec.blank(), waste=ToxicWaste.random(random.Random(1)))
    keygen = time.perf_counter() - t0
    t0 = time.perf_counter()
    asg = Assignment.from_proving_assignment(synthesize_for_proving(spec.example(random.Random(2))))
    synth = time.perf_counter() - t0
    backend = CudaBackend(0)
    if tuning:
        backend.msm.accumulate_variant.update(tuning["accumulate_variant"])
        backend.msm.acc_threads.update(tuning["acc_threads"])
        backend.msm.max_window = tuning.get("max_window", backend.msm.max_window)
    t0 = time.perf_counter()
    backend.load_key(pk)
    load = time.perf_counter() - t0
    proof = backend.prove(pk, asg)  # warm-up (twiddle tables, pools)
    verified = verify_proof(pk.vk, proof, asg.public_inputs())
    walls, phases = [], []
    for _ in range(reps):
        t: dict[str, float] = {}
        t0 = time.perf_counter()
        backend.prove(pk, asg, timings=t)
        walls.append((time.perf_counter() - t0) * 1e3)
        phases.append(t)
    median_phases = {k: round(statistics.median(p[k] for p in phases) * 1e3, 3) for k in phases[0]
                     if k != "device_begin"}  # a clock reading, not a duration
    return {"circuit": circuit_id, "constraints": asg.num_constraints, "domain": pk.domain_size,
            "keygen_s": round(keygen, 2), "synthesis_s": round(synth, 2), "load_key_s": round(load, 3),
            "verified": bool(verified), **stats_ms(walls), "phases_median_ms": median_phases,
            "resident": backend.resident(pk), "accumulate_variant": dict(backend.msm.accumulate_variant),
            "threads_per_sm": {g: t // backend.msm.k.num_sms for g, t in backend.msm.acc_threads.items()},
            "max_window": backend.msm.max_window}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ntt", default="20,24,27", help="log2 sizes of the NTTs")
    ap.add_argument("--g1", default="20,22,24,26", help="log2 sizes of the G1 MSMs")
    ap.add_argument("--g2", default="20,22", help="log2 sizes of the G2 MSMs")
    ap.add_argument("--prove", default="mimc-18", help="circuit id for the whole proof ('' to skip)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--check", type=int, default=20, help="log2 size of the MSM checked against the CPU")
    ap.add_argument("--sweep", type=int, default=None,
                    help="log2 size at which the accumulation-kernel variants are compared first")
    ap.add_argument("--window-sweep", default="",
                    help="G1 log2 sizes at which the window sizes of --windows are timed first, e.g. 24,26")
    ap.add_argument("--g2-window-sweep", default="", help="the same for G2")
    ap.add_argument("--windows", default="16,18,20", help="window sizes (bits) the sweeps time")
    ap.add_argument("--reduce-sweep", type=int, default=None,
                    help="log2 size at which the reduction's running-sum lengths are compared first (G1 and G2)")
    ap.add_argument("--tree-sweep", default="",
                    help="G1 log2 sizes at which the batch-affine tree thresholds are compared first, e.g. 24,26")
    ap.add_argument("--g2-tree-sweep", default="", help="the same for G2")
    ap.add_argument("--ab", default="",
                    help="other builds of the curve unit timed side by side with the current one, "
                         "label=cubin[:attr=int;...],...")
    ap.add_argument("--ab-thresholds", default="",
                    help="tree thresholds (additions per thread) also timed with the current build, e.g. 16,32")
    ap.add_argument("--ab-settings", default="",
                    help="DeviceMsm settings also timed with the current build, e.g. w22:window_bits=22")
    ap.add_argument("--ab-g1", default="", help="G1 log2 sizes of the side-by-side runs, e.g. 20,24,26")
    ap.add_argument("--ab-g2", default="", help="G2 log2 sizes of the side-by-side runs")
    ap.add_argument("--ab-split", action="store_true",
                    help="side-by-side runs of split MSMs (msm_split) on scalars shaped as a PoRep-32GiB "
                         "partition's L (G1) and B (G2) vectors, instead of dense ones")
    ap.add_argument("--ntt-ab", default="",
                    help="log2 sizes at which the NTTs of the current build and the --ab builds are timed side by side")
    ap.add_argument("--ntt-plans", default="",
                    help="NTT pass plans timed against the default, log_n:sizes top-down[@block_log];...: "
                         "e.g. 27:9,8,10;27:10,8,9;20:7,7,6@7")
    ap.add_argument("--h", default="", help="log2 sizes at which H's quotient is timed: six transforms (fused and "
                                            "apart, H_VARIANTS) against seven")
    ap.add_argument("--note", default="", help="what code was measured (kept in the JSON)")
    ap.add_argument("--quick", action="store_true", help="small sizes only (a smoke test)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.quick:
        args.ntt, args.g1, args.g2, args.prove, args.reps, args.check = "16", "16", "14", "mimc-10", 3, 16

    from cuzk.backends.cuda.device import properties
    from cuzk.backends.cuda.module import get_module, source_digest
    from cuzk.backends.cuda.runtime import get_cupy

    cp = get_cupy()  # the emulated device's under CUZK_EMULATED_GPUS (a smoke run; its times mean nothing)

    t0 = time.perf_counter()
    mod = get_module()
    compile_s = time.perf_counter() - t0
    sizes = {k: [int(x) for x in v.split(",") if x] for k, v in (("ntt", args.ntt), ("g1", args.g1),
                                                                 ("g2", args.g2))}
    results: dict[str, Any] = {"module_load_s": round(compile_s, 2), "module_source": mod.source}
    if args.note:
        results["note"] = args.note
    if args.ab or args.ab_thresholds or args.ab_settings:
        variants = parse_ab(args.ab, args.ab_thresholds, args.ab_settings)
        current = f"{mod.source} of the source digest {source_digest()}"
        results["ab_variants"] = [{"variant": v[0], "cubin": str(v[1]) if v[1] else current,
                                   "tree_min_pairs": v[2], "settings": v[3]} for v in variants]
        results["ab"] = [row for g, spec in (("g1", args.ab_g1), ("g2", args.ab_g2))
                         for row in bench_ab(cp, g, [int(x) for x in spec.split(",") if x], args.reps, variants,
                                             args.ab_split)]
    if args.ntt_ab:
        builds = {"current": mod, **{label: cubin_module(path) for label, path, _, _ in parse_ab(args.ab, "")
                                     if path is not None}}
        results["ntt_ab"] = bench_ntt_ab(cp, [int(x) for x in args.ntt_ab.split(",") if x], args.reps, builds)
    if args.h:
        results["h"] = bench_h(cp, [int(x) for x in args.h.split(",") if x], args.reps)
    if args.ntt_plans:
        results["ntt_plans"] = bench_ntt_plans(cp, [x for x in args.ntt_plans.split(";") if x], args.reps)
    results["ntt"] = bench_ntt(cp, sizes["ntt"], args.reps)
    bits = tuple(int(x) for x in args.windows.split(",") if x)
    sweeps = {g: tuple(int(x) for x in v.split(",") if x) for g, v in (("g1", args.window_sweep),
                                                                      ("g2", args.g2_window_sweep))}
    trees = {g: tuple(int(x) for x in v.split(",") if x) for g, v in (("g1", args.tree_sweep),
                                                                     ("g2", args.g2_tree_sweep))}
    results["msm"] = []
    for g, check in (("g1", args.check), ("g2", None)):
        if sizes[g] or sweeps[g] or trees[g] or args.sweep is not None or args.reduce_sweep is not None:
            results["msm"] += bench_msm(cp, g, sizes[g], args.reps, check, args.sweep, sweeps[g], bits,
                                        args.reduce_sweep, trees[g])
    results["tuning"] = TUNING
    if args.prove:
        results["prove"] = bench_prove(args.prove, args.reps, TUNING)
        print(json.dumps({k: v for k, v in results["prove"].items() if k != "samples_ms"}), flush=True)
    p = properties()
    payload = envelope("cuda", results, gpu={"name": p.name, "multiprocessors": p.multiprocessors,
                                             "compute_capability": p.compute_capability,
                                             "total_memory": p.total_memory, **nvidia_smi()},
                       sppark_reference="benchmarks/README.md, The sppark reference (H200, median ms)",
                       measured=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    path = write("cuda-h200", payload, args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
