"""G1/G2 multi-scalar multiplication on the device (driving kernels/msm.cu).

Data on the device:

* bases: (n, 24) u32 for G1, (n, 48) for G2 — affine Montgomery coordinates (x, y), G2 as
  (x.c0, x.c1, y.c0, y.c1); infinity is (0, 0). Made from blstrs bytes by `upload_bases`.
* scalars: (n, 8) u32 canonical little-endian (the CPU's (n, 4) uint64 arrays, viewed).
* results: `Partial` sums, a few XYZZ points (k, 48) / (k, 96) u32 with a doubling count each,
  standing for sum_i 2^shift_i * P_i. `to_points` brings them to the host in one copy, divides by
  ZZ/ZZZ with Python integers and finishes the sum with py-arkworks (Horner over the window
  shifts: a serial chain of doublings, which one GPU thread would run much slower than the host).

`msm` is Pippenger with signed windows and a counting sort of (bucket, base) pairs (large MSMs shorten
the buckets' lists with batch-affine tree rounds before the XYZZ accumulation); `msm_split`
first sums the bases whose scalar is 1 by plain additions, drops the 0s, and runs `msm` on the rest
(a tail that is small for the mostly-binary witnesses of SHA-256 circuits).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from cuzk.curve.encoding import g1_from_uncompressed, g2_from_uncompressed
from cuzk.curve.points import G1Point, G2Point, Scalar
from cuzk.field.constants import P_MODULUS

GROUPS = ("g1", "g2")
AFFINE_WORDS = {"g1": 24, "g2": 48}
XYZZ_WORDS = {"g1": 48, "g2": 96}
RAW_BYTES = {"g1": 96, "g2": 192}
_FP_BYTES = 48
_FP_WORDS = 12
#: Window sizes considered by the cost model (c bits; 2^(c-1) buckets per window).
MIN_WINDOW, MAX_WINDOW = 4, 22
#: The caps DeviceMsm applies by default: DEFAULT_MAX_WINDOW up to LARGE_MSM scalars, LARGE_MAX_WINDOW
#: above. Fewer windows mean fewer additions, but more keys make the sort and the bucket reduction
#: dearer, which only large MSMs repay; the caps also keep the model off windows whose top window is a
#: few bits wide (c = 17, 18, 21), which crowd a handful of buckets. H200:
#: benchmarks/results/cuda-msm-windows-h200-2026-11-30.json (history: benchmarks/HISTORY.md).
DEFAULT_MAX_WINDOW = 16
LARGE_MAX_WINDOW = 20
LARGE_MSM = 1 << 24
#: Points converted per launch when bases are uploaded (bounds the staging memory).
UPLOAD_CHUNK = 1 << 22
_BLOCK = 256
_ACC_BLOCK = 128
#: The sort with its counters in shared memory (kernels/msm.cu msm_count_smem) holds one window's
#: 2^(c-1) counters: up to c = 16 (128 KiB). Each block takes a chunk of one window's digits, sized so
#: that about SORT_BLOCKS blocks fill the device, within [SORT_MIN_CHUNK, SORT_MAX_CHUNK] digits.
SMEM_SORT_MAX_WINDOW = 16
#: ... and only up to this many (scalar, window) pairs: beyond them the global-atomic sort is the faster
#: one (H200, c = 16; benchmarks/HISTORY.md, "The shared-memory sort's limit").
SMEM_SORT_MAX_PAIRS = 1 << 26
SORT_BLOCKS = 1024
SORT_MIN_CHUNK, SORT_MAX_CHUNK = 1 << 10, 1 << 18
_SORT_THREADS = 1024
_DEFAULT_SMEM = 48 << 10


class AccVariant(NamedTuple):
    """One compiled accumulation kernel (kernels/msm.cu): its block size (fixed at compile time for
    the shared-memory kernels), the shared-memory words it needs per thread, and the grid that fills
    the device once (threads per multiprocessor that can be resident together)."""

    block: int
    smem_words: int
    threads_per_sm: int


#: Variants of the accumulation kernel by suffix. _oB keep the XYZZ accumulator in registers (B blocks
#: of 128 per multiprocessor asked of the compiler; the first kernels, kept as a baseline). _sB keep
#: the accumulator and the point being added in shared memory and gather the next point with cp.async
#: (accumulate_smem), so that B blocks fit: G1 in 128-thread blocks (_s4 128 registers, _s5 96), G2 in
#: 64-thread blocks (its Fp2 state is twice as large).
ACCUMULATE_VARIANTS: dict[str, dict[str, AccVariant]] = {
    "g1": {"_o3": AccVariant(128, 0, 1024), "_s4": AccVariant(128, 76, 512), "_s5": AccVariant(128, 76, 640)},
    "g2": {"_o1": AccVariant(128, 0, 256), "_s4": AccVariant(64, 148, 256), "_s5": AccVariant(64, 148, 320)},
}
DEFAULT_ACCUMULATE = {"g1": "_s4", "g2": "_s4"}
#: Bucket reduction: running sums over 2^REDUCE_LOG_L buckets per thread, tree sums of SUM_CHUNK
#: points per thread and level. Short serial chains: these kernels run few threads, so each
#: thread's chain of dependent additions is what they take.
REDUCE_LOG_L = 4
SUM_CHUNK = 8
#: Batch-affine tree rounds before the accumulation (kernels/msm.cu tree_round): a round runs while it
#: gives each of TREE_THREADS_PER_SM[group] * SMs threads at least TREE_MIN_PAIRS[group] additions (each
#: thread pays one inversion per round: a binary GCD, kernels/mont.cuh inv_binary, by its instruction
#: count about 100 products against Fermat's ~570), at most TREE_MAX_ROUNDS rounds; windows are taken in
#: groups whose first round writes at most TREE_GROUP_BYTES of points (bounds the extra memory).
#: TREE_MIN_PAIRS: the fastest thresholds on an H200 with the binary GCD (G2: 16 and 32 measured alike):
#: benchmarks/results/cuda-msm-ab-h200-2026-11-30.json (history: benchmarks/HISTORY.md).
TREE_MIN_PAIRS = {"g1": 16, "g2": 32}
TREE_MAX_ROUNDS = 8
TREE_THREADS_PER_SM = {"g1": 512, "g2": 256}
#: A round large enough to give each of up to TREE_WAVES[group] times those threads at least
#: TREE_WAVE_PAIRS additions runs on that many: the device then takes the blocks in several waves,
#: which evens out the SMs' finishing times of the large early rounds (the round threshold above is
#: unchanged). Several waves only for G1 rounds with at least TREE_WAVE_PAIRS additions per thread (the
#: first rounds of a large MSM): elsewhere, and for G2, they were slower
#: (benchmarks/results/cuda-msm-tree-waves-h200-2026-11-30.json; history: benchmarks/HISTORY.md).
TREE_WAVES = {"g1": 4, "g2": 1}
TREE_WAVE_PAIRS = 256
TREE_GROUP_BYTES = 6 << 30
_TREE_BLOCK = 128


def window_size(n: int, max_window: int = MAX_WINDOW) -> int:
    """The c minimising the additions W*(n + 4*2^(c-1)), W = ceil(256/c): accumulation plus the bucket
    reduction (running sums and per-bit sums, about 4 additions per bucket); ties to the smaller c."""
    best, best_cost = MIN_WINDOW, None
    for c in range(MIN_WINDOW, max(MIN_WINDOW, max_window) + 1):
        cost = -(-256 // c) * (n + 4 * (1 << (c - 1)))
        if best_cost is None or cost < best_cost:
            best, best_cost = c, cost
    return best


def default_max_window(n: int) -> int:
    """The window cap DeviceMsm applies to a batch of n scalars unless told otherwise."""
    return LARGE_MAX_WINDOW if n > LARGE_MSM else DEFAULT_MAX_WINDOW


def num_windows(c: int) -> int:
    return -(-256 // c)


def sort_chunk(n: int, w: int) -> int:
    """Digits per block of the shared-memory sort of n scalars in w windows."""
    return min(max(SORT_MIN_CHUNK, n * w // SORT_BLOCKS), SORT_MAX_CHUNK)


def tree_group_entries(group: str, tree_group_bytes: int) -> int:
    """Entries whose first tree round writes at most `tree_group_bytes` of points (half as many)."""
    return 2 * tree_group_bytes // (4 * AFFINE_WORDS[group])


def working_bytes(group: str, n: int, tree_group_bytes: int = TREE_GROUP_BYTES) -> int:
    """Device memory one MSM batch of n scalars needs beyond bases and scalars: sorted entries,
    counts/offsets/cursors, the shared-memory sort's digits and per-block bases, buckets, segment
    pieces (at most 2^18 threads), the 0/1 split's flags, indices and gathered tail, the batch-affine
    tree rounds' points (two rounds of one window group of at most `tree_group_bytes`, plus the
    indices of the last), and 64 MiB of slack."""
    c = window_size(n, default_max_window(n))
    w = num_windows(c)
    keys = w << (c - 1)
    xyzz = XYZZ_WORDS[group] * 4
    smem_sort = c <= SMEM_SORT_MAX_WINDOW and n * w <= SMEM_SORT_MAX_PAIRS
    sort = 4 * n * w + 4 * keys * -(-n // sort_chunk(n, w)) if smem_sort else 0
    # A group holds whole windows, so at least one window's n pairs whatever the limit.
    pairs = min(n * w, max(n, tree_group_entries(group, tree_group_bytes)))
    tree = (3 * pairs // 4 + 2 * keys) * 4 * AFFINE_WORDS[group] + 4 * pairs // 2
    return 4 * n * w + 12 * keys + keys * xyzz + 2 * (1 << 18) * xyzz + 37 * n + sort + tree + (64 << 20)


@dataclass(frozen=True)
class Partial:
    """sum_i 2^shifts[i] * points[i]: an MSM result still on the device (points: (k, words) XYZZ)."""

    points: Any
    shifts: tuple[int, ...]


@dataclass(frozen=True)
class HostPartial:
    """A `Partial` copied to the host: rows are its XYZZ points as u32 words."""

    rows: np.ndarray
    shifts: tuple[int, ...]


@dataclass(frozen=True)
class ScalarSplit:
    """The 0/1 split of one scalar vector (shared by the MSMs that use the same scalars)."""

    flags: Any  #: u8 per scalar: 0, 1 or 2 (other)
    tail_index: Any  #: u32 indices of the "other" scalars
    tail_scalars: Any  #: (len(tail_index), 8) u32


class DeviceMsm:
    """MSMs on one device. `threads_per_sm` sizes the accumulation grid (segments of equal work; None:
    the per-group defaults), `max_window` caps the window size (None: default_max_window of each batch's
    size), `max_batch` the scalars per batch."""

    def __init__(self, kernels: Any, *, threads_per_sm: int | None = None, max_batch: int | None = None,
                 max_window: int | None = None) -> None:
        self.k = kernels
        self.xp = kernels.xp
        per_sm = {g: threads_per_sm or ACCUMULATE_VARIANTS[g][DEFAULT_ACCUMULATE[g]].threads_per_sm for g in GROUPS}
        self.acc_threads = {g: max(1, kernels.num_sms * per_sm[g]) for g in GROUPS}
        self.max_batch = max_batch
        self.max_window = max_window
        #: When set, every MSM uses windows of exactly this many bits (benchmarks' window sweeps).
        self.window_bits: int | None = None
        #: MSM batches of at most this many (scalar, window) pairs sort with shared-memory counters.
        self.smem_sort_max_pairs = SMEM_SORT_MAX_PAIRS
        #: The global-atomic sort places its pairs window by window (kernels/msm.cu
        #: msm_scatter_by_window) rather than every window of a scalar at once (msm_scatter): its sort
        #: takes two thirds of the time at 2^26 and 2^27 (benchmarks/results/cuda-msm-ab-h200-2026-12-07.json).
        self.scatter_by_window = 1
        #: Buckets per thread of the reduction's running sums, log2, per group (benchmarks sweep it).
        self.reduce_log_l = dict.fromkeys(GROUPS, REDUCE_LOG_L)
        self.accumulate_variant = dict(DEFAULT_ACCUMULATE)
        #: Per group, the additions per thread a batch-affine tree round must have to run (None: no
        #: tree rounds).
        self.tree_min_pairs: dict[str, int | None] = dict(TREE_MIN_PAIRS)
        self.tree_threads = {g: max(1, kernels.num_sms * TREE_THREADS_PER_SM[g]) for g in GROUPS}
        self.tree_waves = dict(TREE_WAVES)
        #: The first tree round's output per window group (bytes): a memory plan lowers it on small
        #: devices (`working_bytes` counts two rounds of one group).
        self.tree_group_bytes = TREE_GROUP_BYTES
        #: A split MSM's 1s: 0 sums them by mixed additions over every flag (msm_sum_ones, where a
        #: warp's lanes with a 0 idle beside those adding); 1 compacts their indices first and halves
        #: the list by the batch-affine tree rounds (one bucket) before summing what is left
        #: (msm_sum_list): about 6 products an addition against 10, and no idle lanes; 2 compacts them
        #: and sums the list by mixed additions alone (no idle lanes; benchmarks compare).
        self.ones_tree = 0
        self._marks: list[tuple[str, Any]] = []
        self.profile = None

    @property
    def profile(self) -> dict[str, float] | None:
        """When a dict (CUDA only), device time per MSM phase is added to it, in ms (for benchmarks);
        each phase runs from the step before it, so a profile starts at its first step."""
        return self._profile

    @profile.setter
    def profile(self, value: dict[str, float] | None) -> None:
        self._profile = value
        self._marks.clear()

    def _mark(self, phase: str) -> None:
        """Record a CUDA event ending `phase` (no-op unless profiling)."""
        if self.profile is None:
            return
        ev = self.xp.cuda.Event()
        ev.record()
        if phase and self._marks:
            ev.synchronize()
            self.profile[phase] = self.profile.get(phase, 0.0) + self.xp.cuda.get_elapsed_time(self._marks[-1][1], ev)
        self._marks[:] = [(phase, ev)]

    # -- bases and results ------------------------------------------------------------------------------

    def upload_bases(self, group: str, raw: np.ndarray, out: Any = None) -> Any:
        """blstrs uncompressed bytes (n, 96|192) -> device affine Montgomery points (into `out`)."""
        width = RAW_BYTES[group]
        if raw.ndim != 2 or raw.shape[1] != width or raw.dtype != np.uint8:
            raise ValueError(f"{group} bases must be an (n, {width}) uint8 array, got {raw.dtype} {raw.shape}")
        n = raw.shape[0]
        xp = self.xp
        if out is None:
            out = xp.empty((n, AFFINE_WORDS[group]), dtype=xp.uint32)
        for lo in range(0, n, UPLOAD_CHUNK):
            hi = min(n, lo + UPLOAD_CHUNK)
            chunk = self.k.to_device(np.ascontiguousarray(raw[lo:hi])).view(xp.uint32)
            self.k.launch1d(f"{group}_from_blstrs", hi - lo, (chunk, hi - lo, out[lo:hi]), _BLOCK)
            del chunk
        return out

    def infinity(self, group: str, count: int = 1) -> Any:
        return self.xp.zeros((count, XYZZ_WORDS[group]), dtype=self.xp.uint32)

    def zero(self, group: str) -> Partial:
        return Partial(self.infinity(group), (0,))

    def xyzz_to_points(self, group: str, xyzz: Any) -> list[G1Point] | list[G2Point]:
        """Each XYZZ device point as a py-arkworks point (the decoder checks it is on the curve)."""
        return [_to_point(group, row) for row in self.k.to_host(xyzz)]

    def to_points(self, group: str, partials: Sequence[Partial]) -> list[G1Point] | list[G2Point]:
        """Finish device results: one copy to the host for all of them, then sum_i 2^shift_i P_i each."""
        return self.finish(group, self.fetch(partials))

    def fetch(self, partials: Sequence[Partial]) -> list[HostPartial]:
        """The partials on the host, in one copy: all `finish` needs, so the device can go to other work."""
        if not partials:
            return []
        rows = self.k.to_host(self.xp.concatenate([p.points for p in partials], axis=0))
        out, k = [], 0
        for p in partials:
            out.append(HostPartial(rows[k:k + len(p.shifts)], p.shifts))
            k += len(p.shifts)
        return out

    @staticmethod
    def finish(group: str, fetched: Sequence[HostPartial]) -> list[G1Point] | list[G2Point]:
        """sum_i 2^shift_i P_i of each fetched partial, on the host (Python integers, py-arkworks)."""
        identity = G1Point.identity() if group == "g1" else G2Point.identity()
        out = []
        for p in fetched:
            by_shift: dict[int, Any] = {}
            for row, shift in zip(p.rows, p.shifts, strict=True):
                by_shift[shift] = by_shift.get(shift, identity) + _to_point(group, row)
            acc, cur = identity, None
            for shift in sorted(by_shift, reverse=True):
                if cur is not None and cur > shift:
                    acc = acc * Scalar.from_le_bytes((1 << (cur - shift)).to_bytes(32, "little"))
                acc = acc + by_shift[shift]
                cur = shift
            if cur:
                acc = acc * Scalar.from_le_bytes((1 << cur).to_bytes(32, "little"))
            out.append(acc)
        return out

    # -- sums -----------------------------------------------------------------------------------------

    def sum_points(self, group: str, points: Any, groups: int = 1, nbits: int = 0) -> Any:
        """Per group of M = len/groups XYZZ points: the plain sum (nbits = 0), or for each b < nbits
        the sum of the points whose index has bit b set, then the plain sum: (groups*(nbits+1), w)."""
        count = points.shape[0] // groups
        if count == 0:
            return self.infinity(group, groups * (nbits + 1))
        out = self._sum_level(group, points, groups, count, nbits, min(count, SUM_CHUNK))
        groups *= nbits + 1
        count = -(-count // SUM_CHUNK)
        while count > 1:
            out = self._sum_level(group, out, groups, count, 0, SUM_CHUNK)
            count = -(-count // SUM_CHUNK)
        return out

    def _sum_level(self, group: str, points: Any, groups: int, m: int, nbits: int, chunk: int) -> Any:
        parts = -(-m // chunk)
        threads = groups * (nbits + 1) * parts
        out = self.xp.empty((threads, XYZZ_WORDS[group]), dtype=self.xp.uint32)
        self.k.launch1d(f"xyzz_sum_bits_{group}", threads, (points, groups, m, nbits, chunk, out), _ACC_BLOCK)
        return out

    def add(self, parts: Sequence[Partial]) -> Partial:
        """The sum of several partial results (nothing is computed until `to_points`)."""
        if len(parts) == 1:
            return parts[0]
        return Partial(self.xp.concatenate([p.points for p in parts], axis=0),
                       tuple(s for p in parts for s in p.shifts))

    # -- MSM ------------------------------------------------------------------------------------------

    def msm(self, group: str, bases: Any, scalars: Any, index_map: Any = None, bases_ready: Any = None) -> Partial:
        """sum_i scalars[i] * bases[index_map[i] or i]; batched over the scalars when one batch's sort
        buffers would not fit (`max_batch`). `bases_ready`: a CUDA event the bases' upload records (on
        another stream); the stream waits for it only once the first batch's scalars are sorted, which
        needs no bases, so the upload overlaps the sort."""
        n = scalars.shape[0]
        if scalars.ndim != 2 or scalars.shape[1] != 8 or scalars.dtype != np.uint32:
            raise ValueError(f"scalars must be an (n, 8) uint32 array, got {scalars.dtype} {scalars.shape}")
        if index_map is None and bases.shape[0] < n:
            raise ValueError(f"MSM length mismatch: {bases.shape[0]} bases, {n} scalars")
        if n == 0:
            return self.zero(group)
        batch = n if self.max_batch is None else max(1, self.max_batch)
        batch = min(batch, (1 << 32) // num_windows(self.window(batch)) - 1, 1 << 31)
        parts = []
        for lo in range(0, n, batch):
            hi = min(n, lo + batch)
            if index_map is None:
                parts.append(self._msm_batch(group, bases[lo:hi], scalars[lo:hi], None, bases_ready))
            else:
                parts.append(self._msm_batch(group, bases, scalars[lo:hi], index_map[lo:hi], bases_ready))
            bases_ready = None
        return self.add(parts)

    def window(self, n: int) -> int:
        """The window size (bits) of an MSM batch of n scalars."""
        if self.window_bits is not None:
            if not MIN_WINDOW <= self.window_bits <= MAX_WINDOW:
                raise ValueError(f"window_bits must be in [{MIN_WINDOW}, {MAX_WINDOW}], got {self.window_bits}")
            return self.window_bits
        return window_size(n, default_max_window(n) if self.max_window is None else self.max_window)

    def _msm_batch(self, group: str, bases: Any, scalars: Any, index_map: Any, bases_ready: Any = None) -> Partial:
        xp = self.xp
        n = scalars.shape[0]
        c = self.window(n)
        w = num_windows(c)
        nkeys = w << (c - 1)
        words = XYZZ_WORDS[group]

        self._mark("wait")
        sorted_pairs = self._sort(scalars, c, w, index_map)
        if sorted_pairs is None:
            return self.zero(group)
        offsets, entries = sorted_pairs
        self._mark("sort")
        if bases_ready is not None:
            xp.cuda.get_current_stream().wait_event(bases_ready)

        buckets = xp.zeros((nkeys, words), dtype=xp.uint32)
        bucket_keys = 1 << (c - 1)
        for k0, k1, lo, hi in self._window_groups(group, offsets, entries.shape[0], bucket_keys, w):
            if hi == lo:
                continue
            off = offsets[k0:k1 + 1] - offsets[k0] if k0 else offsets[:k1 + 1]
            points, idx, off = self._tree_rounds(group, bases, entries[lo:hi], off)
            self._mark("tree")
            self._accumulate(group, points, idx, off, buckets[k0:k1])
        del entries, offsets
        out = self._reduce_windows(group, buckets, c, w)
        self._mark("reduce")
        return out

    def _window_groups(self, group: str, offsets: Any, total: int, bucket_keys: int,
                       w: int) -> list[tuple[int, int, int, int]]:
        """Key ranges [k0, k1) of whole windows whose entries are batch-affine summed together, with
        their entry ranges [lo, hi): as many windows as keep the first tree round's output within
        TREE_GROUP_BYTES (one range, all keys, when the tree rounds are off). The window starts are
        read back once here, not per group between the groups' kernels."""
        nkeys = w * bucket_keys
        if not self._tree_may_run(group, total):
            return [(0, nkeys, 0, total)]
        limit = tree_group_entries(group, self.tree_group_bytes)
        ends = [int(v) for v in self.k.to_host(offsets[::bucket_keys])]  # w + 1 window starts
        groups, k0 = [], 0
        for i in range(1, w + 1):
            if i == w or ends[i + 1] - ends[k0 // bucket_keys] > limit:
                groups.append((k0, i * bucket_keys, ends[k0 // bucket_keys], ends[i]))
                k0 = i * bucket_keys
        return groups

    def _tree_rounds(self, group: str, bases: Any, entries: Any, offsets: Any) -> tuple[Any, Any, Any]:
        """Batch-affine rounds (kernels/msm.cu tree_round), each halving every bucket's list, while a
        round gives every thread at least `tree_min_pairs` additions (at most TREE_MAX_ROUNDS).
        Returns what the accumulation then sums: points, entries (indices into those points) and
        offsets; the inputs themselves when no round runs."""
        xp = self.xp
        nk = offsets.shape[0] - 1
        total = entries.shape[0]
        if not self._tree_may_run(group, total):
            return bases, entries, offsets
        min_pairs = self.tree_min_pairs[group]
        points, idx, off = bases, entries, offsets
        for _ in range(TREE_MAX_ROUNDS):
            halves = (off[1:] - off[:-1] + 1) >> 1
            off_out = xp.concatenate([xp.zeros(1, dtype=xp.uint32), xp.cumsum(halves, dtype=xp.uint32)])
            total_out = int(self.k.to_host(off_out[-1:])[0])
            pairs = total - total_out
            if pairs == 0 or pairs < self.tree_threads[group] * min_pairs:
                break
            waves = max(1, min(self.tree_waves[group], pairs // (self.tree_threads[group] * TREE_WAVE_PAIRS)))
            per = -(-total_out // (waves * self.tree_threads[group]))
            threads = 32 * -(-total_out // (32 * per))  # whole warps: a warp takes 32 * per outputs
            out = xp.empty((total_out, AFFINE_WORDS[group]), dtype=xp.uint32)
            self.k.launch(f"msm_tree_round_{group}", -(-threads // _TREE_BLOCK), _TREE_BLOCK,
                          (idx, points, off, off_out, nk, total_out, per, out))
            points, idx, off, total = out, None, off_out, total_out
        if idx is None:
            idx = xp.arange(total, dtype=xp.uint32)
        return points, idx, off

    def _tree_may_run(self, group: str, total: int) -> bool:
        """Whether a first tree round over `total` entries can reach the threshold (it has at most
        total // 2 additions): checked before anything is computed or synchronised."""
        min_pairs = self.tree_min_pairs[group]
        return min_pairs is not None and total // 2 >= max(1, self.tree_threads[group] * min_pairs)

    def _accumulate(self, group: str, bases: Any, entries: Any, offsets: Any, buckets: Any) -> None:
        """Sum each key's entries into buckets[key] (offsets from 0): equal segments per thread, then
        the buckets that straddle segments (kernels/msm.cu step 3)."""
        xp, k = self.xp, self.k
        nkeys = offsets.shape[0] - 1
        total = entries.shape[0]
        words = XYZZ_WORDS[group]
        per = -(-total // min(total, self.acc_threads[group]))
        threads = -(-total // per)
        first = xp.empty((threads, words), dtype=xp.uint32)
        last = xp.empty((threads, words), dtype=xp.uint32)
        variant = self.accumulate_variant[group]
        v = ACCUMULATE_VARIANTS[group][variant]
        k.launch(f"msm_accumulate_{group}{variant}", -(-threads // v.block), v.block,
                 (entries, offsets, nkeys, total, per, bases, buckets, first, last),
                 shared_mem=4 * v.smem_words * v.block)
        self._mark("accumulate")
        k.launch1d(f"msm_combine_{group}", nkeys, (offsets, nkeys, per, buckets, first, last), _ACC_BLOCK)
        self._mark("combine")

    def _sort(self, scalars: Any, c: int, w: int, index_map: Any) -> tuple[Any, Any] | None:
        """Counting sort of the (bucket key, base) pairs: offsets (nkeys + 1) and the entries (base index
        | sign << 31) grouped by key; None when every digit is zero. Windows of at most
        SMEM_SORT_MAX_WINDOW bits count and place with shared-memory counters (up to smem_sort_max_pairs
        pairs), wider ones with one global atomic per pair."""
        xp, k = self.xp, self.k
        n = scalars.shape[0]
        nkeys = w << (c - 1)
        counts = xp.zeros(nkeys + 1, dtype=xp.uint32)
        if c > SMEM_SORT_MAX_WINDOW or n * w > self.smem_sort_max_pairs:
            k.launch1d("msm_histogram", n, (scalars, n, c, w, counts[1:]), _BLOCK)
            offsets = xp.cumsum(counts, dtype=xp.uint32)
            del counts
            total = int(self.k.to_host(offsets[-1:])[0])
            if total == 0:
                return None
            cursor = offsets[:nkeys].copy()
            entries = xp.empty(total, dtype=xp.uint32)
            if self.scatter_by_window and n * w + _BLOCK <= 1 << 32:
                k.launch1d("msm_scatter_by_window", n * w, (scalars, n, c, w, index_map, cursor, entries), _BLOCK)
            else:
                k.launch1d("msm_scatter", n, (scalars, n, c, w, index_map, cursor, entries), _BLOCK)
            return offsets, entries
        buckets = 1 << (c - 1)
        digits = xp.empty(w * n, dtype=xp.uint32)
        k.launch1d("msm_digits", n, (scalars, n, c, w, digits), _BLOCK)
        chunk = sort_chunk(n, w)
        nchunks = -(-n // chunk)
        base = xp.empty(w * nchunks * buckets, dtype=xp.uint32)
        smem = 4 * buckets
        for name in ("msm_count_smem", "msm_scatter_smem"):
            if smem > _DEFAULT_SMEM:
                k.allow_shared_memory(name, smem)
        k.launch("msm_count_smem", w * nchunks, _SORT_THREADS, (digits, n, c, chunk, nchunks, counts[1:], base),
                 shared_mem=smem)
        offsets = xp.cumsum(counts, dtype=xp.uint32)
        del counts
        total = int(self.k.to_host(offsets[-1:])[0])
        if total == 0:
            return None
        entries = xp.empty(total, dtype=xp.uint32)
        k.launch("msm_scatter_smem", w * nchunks, _SORT_THREADS,
                 (digits, n, c, chunk, nchunks, index_map, offsets, base, entries), shared_mem=smem)
        return offsets, entries

    def _reduce_windows(self, group: str, buckets: Any, c: int, w: int) -> Partial:
        """The window sums sum_j (j+1) bucket_(w,j), weighted 2^(c w) (kernels/msm.cu, steps 4, 5)."""
        xp, k = self.xp, self.k
        words = XYZZ_WORDS[group]
        log_l = min(self.reduce_log_l[group], c - 1)
        if log_l < 0:
            raise ValueError(f"reduce_log_l must be >= 0, got {self.reduce_log_l[group]}")
        log_p = c - 1 - log_l
        chunks = w << log_p
        sums = xp.empty((chunks, words), dtype=xp.uint32)
        weighted = xp.empty((chunks, words), dtype=xp.uint32)
        k.launch1d(f"msm_runsum_{group}", chunks, (buckets, log_l, chunks, sums, weighted), _ACC_BLOCK)
        del buckets
        bit_sums = self.sum_points(group, sums, groups=w, nbits=log_p)
        weighted_sums = self.sum_points(group, weighted, groups=w)
        out = xp.empty((w, words), dtype=xp.uint32)
        k.launch1d("msm_window_sums_" + group, w, (bit_sums, weighted_sums, w, log_p, log_l, out), 32)
        return Partial(out, tuple(c * i for i in range(w)))

    # -- the 0/1 split ----------------------------------------------------------------------------------

    def classify(self, scalars: Any) -> tuple[Any, Any]:
        """Flags (u8 per scalar: 0, 1 or 2 for other) and the u32 indices of the others."""
        xp = self.xp
        n = scalars.shape[0]
        flags = xp.empty(n, dtype=xp.uint8)
        self.k.launch1d("msm_classify", n, (scalars, n, flags), _BLOCK)
        return flags, self.k.flatnonzero(flags == 2).astype(xp.uint32)

    def split(self, scalars: Any) -> ScalarSplit:
        """Classify scalars as 0, 1 or other, and gather the others (with their indices)."""
        flags, idx = self.classify(scalars)
        return ScalarSplit(flags=flags, tail_index=idx, tail_scalars=self.xp.ascontiguousarray(scalars[idx]))

    def sum_ones(self, group: str, bases: Any, flags: Any) -> Partial:
        """The sum of the bases whose flag is 1: by plain (mixed) additions in parallel chunks, or with
        `ones_tree` over their compacted indices (`sum_listed`)."""
        n = flags.shape[0]
        if n == 0:
            return self.zero(group)
        if self.ones_tree:
            return self.sum_listed(group, bases, self.k.flatnonzero(flags == 1).astype(self.xp.uint32),
                                   rounds=self.ones_tree == 1)
        chunk = max(1, -(-n // self.acc_threads[group]))
        parts = -(-n // chunk)
        out = self.xp.empty((parts, XYZZ_WORDS[group]), dtype=self.xp.uint32)
        self.k.launch1d(f"msm_sum_ones_{group}", parts, (bases, flags, n, chunk, out), _ACC_BLOCK)
        return Partial(self.sum_points(group, out), (0,))

    def sum_listed(self, group: str, bases: Any, index: Any, rounds: bool = True) -> Partial:
        """sum_j bases[index[j]]: with `rounds`, the tree rounds halve the list as one bucket's while
        they pay (as an MSM's would), in chunks whose first round writes at most `tree_group_bytes` (the
        memory a plan gives an MSM's rounds); msm_sum_list adds what is left."""
        xp = self.xp
        count = index.shape[0]
        limit = max(2, tree_group_entries(group, self.tree_group_bytes))
        parts = []
        for lo in range(0, count, limit):
            chunk = index[lo:lo + limit]
            m = chunk.shape[0]
            points, off = bases, None
            if rounds:
                points, _, off = self._tree_rounds(group, bases, chunk, self.k.to_device(np.array([0, m], np.uint32)))
            listed = chunk if points is bases else None
            total = m if listed is not None else int(self.k.to_host(off[-1:])[0])
            per = max(1, -(-total // self.acc_threads[group]))
            blocks = -(-total // (per * _ACC_BLOCK))
            out = xp.empty((blocks * _ACC_BLOCK, XYZZ_WORDS[group]), dtype=xp.uint32)
            self.k.launch(f"msm_sum_list_{group}", blocks, _ACC_BLOCK, (points, listed, total, per, out))
            del points
            parts.append(self.sum_points(group, out))
        if not parts:
            return self.zero(group)
        return Partial(parts[0] if len(parts) == 1 else self.sum_points(group, xp.concatenate(parts)), (0,))

    def msm_split(self, group: str, bases: Any, scalars: Any, split: ScalarSplit | None = None) -> Partial:
        """The same sum as `msm`, with scalars 0 skipped and scalars 1 added without Pippenger."""
        if scalars.shape[0] == 0:
            return self.zero(group)
        if bases.shape[0] < scalars.shape[0]:
            raise ValueError(f"MSM length mismatch: {bases.shape[0]} bases, {scalars.shape[0]} scalars")
        # Profiled: "wait" is the stream's time since the last MSM step (a streamed batch's bases
        # arriving, the host's launches), "split" and "ones" the 0/1 split and the plain sum.
        self._mark("wait")
        split = self.split(scalars) if split is None else split
        self._mark("split")
        ones = self.sum_ones(group, bases, split.flags)
        self._mark("ones")
        if split.tail_index.shape[0] == 0:
            return ones
        tail = self.msm(group, bases, split.tail_scalars, split.tail_index)
        return self.add([ones, tail])


def _fp(words: np.ndarray) -> int:
    return int.from_bytes(np.ascontiguousarray(words).tobytes(), "little")


def _to_point(group: str, row: np.ndarray) -> G1Point | G2Point:
    """One XYZZ row (Montgomery limbs) -> py-arkworks point: x = X/ZZ, y = Y/ZZZ. The Montgomery
    factors cancel in the quotients, so the results are canonical."""
    p = P_MODULUS
    n = _FP_WORDS if group == "g1" else 2 * _FP_WORDS
    X, Y, ZZ, ZZZ = (row[i * n:(i + 1) * n] for i in range(4))
    if group == "g1":
        zz, zzz = _fp(ZZ), _fp(ZZZ)
        if zz == 0:
            return G1Point.identity()
        x = _fp(X) * pow(zz, -1, p) % p
        y = _fp(Y) * pow(zzz, -1, p) % p
        return g1_from_uncompressed(x.to_bytes(_FP_BYTES, "big") + y.to_bytes(_FP_BYTES, "big"), checked=False)

    def fp2(words: np.ndarray) -> tuple[int, int]:
        return _fp(words[:_FP_WORDS]), _fp(words[_FP_WORDS:])

    def div(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        d = pow((b[0] * b[0] + b[1] * b[1]) % p, -1, p)
        inv = (b[0] * d % p, -b[1] * d % p)
        return (a[0] * inv[0] - a[1] * inv[1]) % p, (a[0] * inv[1] + a[1] * inv[0]) % p

    zz = fp2(ZZ)
    if zz == (0, 0):
        return G2Point.identity()
    x, y = div(fp2(X), zz), div(fp2(Y), fp2(ZZZ))
    raw = b"".join(v.to_bytes(_FP_BYTES, "big") for v in (x[1], x[0], y[1], y[0]))
    return g2_from_uncompressed(raw, checked=False)


class MergedTails:
    """One MSM of `msm_split`'s kind taken in batches: each batch's 1s are summed at once, and its other
    scalars (with their bases) are gathered into one buffer of `capacity` whose MSM runs when it is
    full and at the end. A witness's batch has few other scalars (a few percent), and an MSM that small
    pays its fixed steps (sort, bucket reduction) each time and runs no tree rounds, so that a bucket
    that many of them share (equal scalars) is summed by one long serial chain in msm_combine; merged,
    the tails cost about what the whole vector's tail does in one MSM (docs/memory.md).

    `whole`: the vector's bases when they are all on the device (the tail keeps indices into them);
    None when each batch brings its own bases (the tail's bases are copied out of the batch)."""

    def __init__(self, msm: DeviceMsm, group: str, capacity: int, whole: Any = None) -> None:
        xp = msm.xp
        self.msm, self.group, self.capacity, self.whole = msm, group, max(1, capacity), whole
        self.scalars = xp.empty((self.capacity, 8), dtype=xp.uint32)
        self.bases = None if whole is not None else xp.empty((self.capacity, AFFINE_WORDS[group]), dtype=xp.uint32)
        self.index = xp.empty(self.capacity, dtype=xp.uint32) if whole is not None else None
        self.filled = 0
        self.parts: list[Partial] = []

    def add(self, lo: int, bases: Any, scalars: Any, bases_ready: Any = None) -> None:
        """The batch of scalars[i] * bases[i], the vector's entries lo, lo + 1, ... `bases_ready`: an
        event the batch's upload records on another stream; only the sums wait for it, the split needs
        the scalars alone."""
        m, xp = self.msm, self.msm.xp
        m._mark("wait")
        flags, idx = m.classify(scalars)
        m._mark("split")
        if bases_ready is not None:
            xp.cuda.get_current_stream().wait_event(bases_ready)
        self.parts.append(m.sum_ones(self.group, bases, flags))
        m._mark("ones")
        del flags
        pos, count = 0, idx.shape[0]
        while pos < count:
            take = min(self.capacity - self.filled, count - pos)
            part, dst = idx[pos:pos + take], slice(self.filled, self.filled + take)
            xp.take(scalars, part, axis=0, out=self.scalars[dst])
            if self.bases is not None:
                xp.take(bases, part, axis=0, out=self.bases[dst])
            else:
                self.index[dst] = part + xp.uint32(lo)
            self.filled += take
            pos += take
            if self.filled == self.capacity:
                self._flush()

    def _flush(self) -> None:
        if self.filled:
            k = self.filled
            if self.bases is not None:
                self.parts.append(self.msm.msm(self.group, self.bases[:k], self.scalars[:k]))
            else:
                self.parts.append(self.msm.msm(self.group, self.whole, self.scalars[:k], self.index[:k]))
            self.filled = 0

    def finish(self) -> Partial:
        """The sum of every batch added (the buffers are dropped)."""
        self._flush()
        self.scalars = self.bases = self.index = None
        return self.msm.add(self.parts) if self.parts else self.msm.zero(self.group)
