// Multi-scalar multiplication sum_i s_i * P_i (Pippenger, signed windows, bucket sort), G1 and G2.
//
// 1. Digits. Each canonical scalar (< 2^255) is cut into W = ceil(256/c) windows of c bits and
//    recoded to signed digits in [-2^(c-1), 2^(c-1)]; digit d of window w sends the base (negated
//    when d < 0) to bucket key = w * 2^(c-1) + |d| - 1. Zero digits are dropped.
// 2. Counting sort by key: msm_histogram counts, the host takes an exclusive prefix sum (offsets),
//    msm_scatter_by_window writes each entry (base index | sign << 31) to its key's range (msm_scatter,
//    a scalar's windows at once, where W n exceeds a 32-bit thread index). For windows of at
//    most 16 bits and up to 2^26 pairs, msm_digits / msm_count_smem / msm_scatter_smem do the same
//    with the counters of one window in shared memory (see there).
// 3. Accumulation: thread t owns entries [t*K, (t+1)*K) of the sorted array and adds each run of one
//    key into an XYZZ accumulator (mixed additions). A bucket wholly inside one segment is written
//    directly; a bucket that crosses segment boundaries leaves pieces (the tail piece of the segment
//    where it starts, the head pieces of the following ones) that msm_combine adds up. Work per
//    thread is K additions however skewed the buckets are. Two implementations: `accumulate` (state
//    in registers) and `accumulate_smem` (state in shared memory, more warps resident; see there).
//    Large MSMs first shorten every bucket's list with batch-affine tree rounds (tree_round: pairs
//    summed in affine coordinates, one inversion per thread and round), then accumulate what is left.
// 4. Reduction per window, sum_j (j+1) * bucket_j: each thread runs the running-sum trick over L
//    consecutive buckets (S_p = chunk sum, T_p = weighted chunk sum), then
//    sum = sum_p T_p + L * sum_p p * S_p, the last term from per-bit sums of S_p (xyzz_sum_bits).
// 5. msm_window_sums gives each window's sum; the host combines them by Horner (c doublings per
//    window in py-arkworks: a long serial chain that one GPU thread would run far slower).
#pragma once
#include "ntt.cu"

DEV u32 window_bits(const fr_t& s, u32 off, u32 c) {
    const u32 w = off >> 5, sh = off & 31;
    if (w >= 8) return 0;
    u64 x = s.v[w];
    if (w + 1 < 8) x |= (u64)s.v[w + 1] << 32;
    return (u32)(x >> sh) & ((1u << c) - 1);
}

// Signed digit of window w, given the carry from window w-1; returns |d| and sets neg and carry.
DEV u32 signed_digit(const fr_t& s, u32 w, u32 c, u32& carry, u32& neg) {
    const u32 raw = window_bits(s, w * c, c) + carry;
    const u32 half = 1u << (c - 1);
    if (raw > half) {
        carry = 1; neg = 1;
        return (1u << c) - raw;
    }
    carry = 0; neg = 0;
    return raw;
}

KERNEL msm_histogram(const fr_t* scalars, u32 n, u32 c, u32 W, u32* counts) {
    const u32 i = global_tid();
    if (i >= n) return;
    const fr_t s = load_struct(scalars + i);
    const u32 B = 1u << (c - 1);
    u32 carry = 0, neg = 0;
    for (u32 w = 0; w < W; ++w) {
        const u32 mag = signed_digit(s, w, c, carry, neg);
        if (mag) atomicAdd(counts + w * B + mag - 1, 1u);
    }
}

KERNEL msm_scatter(const fr_t* scalars, u32 n, u32 c, u32 W, const u32* index_map, u32* cursor, u32* sorted) {
    const u32 i = global_tid();
    if (i >= n) return;
    const fr_t s = load_struct(scalars + i);
    const u32 B = 1u << (c - 1);
    const u32 base = index_map ? index_map[i] : i;
    u32 carry = 0, neg = 0;
    for (u32 w = 0; w < W; ++w) {
        const u32 mag = signed_digit(s, w, c, carry, neg);
        if (mag) {
            const u32 pos = atomicAdd(cursor + w * B + mag - 1, 1u);
            sorted[pos] = base | (neg << 31);
        }
    }
}

// msm_scatter's placement taken window by window: thread t = w * n + i places scalar i's digit of
// window w, its carry recomputed from the lower windows (launched only where W n + 256 <= 2^32, so no
// thread index wraps).
// Blocks start in index order, so the stores in flight go to one or two windows' 2^(c-1) key ranges
// at a time rather than to all W at once: wide windows spread msm_scatter's partly written sectors
// over more ranges than L2 holds, and its placement, not its atomics, is the sort's cost
// (benchmarks/results/cuda-msm-sort-h100-2026-12-07.jsonl). The price, each scalar read W times, is
// the smaller: it is the default (DeviceMsm.scatter_by_window; benchmarks/results/cuda-msm-ab-h200-2026-12-07.json).
KERNEL msm_scatter_by_window(const fr_t* scalars, u32 n, u32 c, u32 W, const u32* index_map, u32* cursor,
                             u32* sorted) {
    const u32 t = global_tid();
    if (t / W >= n) return;  // t < W n, without forming W n
    const u32 w = t / n, i = t - w * n;
    const fr_t s = load_struct(scalars + i);
    u32 carry = 0, neg = 0, mag = 0;
    for (u32 v = 0; v <= w; ++v) mag = signed_digit(s, v, c, carry, neg);
    if (mag) {
        const u32 pos = atomicAdd(cursor + (w << (c - 1)) + mag - 1, 1u);
        sorted[pos] = (index_map ? index_map[i] : i) | (neg << 31);
    }
}

// ---- Counting sort with the counters in shared memory (windows of c <= 16 bits) ---------------------
//
// The kernels above count and place with one global atomic per (scalar, window); these three keep the
// counters of one window (2^(c-1) <= 2^15 words) in shared memory instead:
//   msm_digits:         digits[w * n + i] = |d| | (d < 0) << 31 for every scalar i and window w;
//   msm_count_smem:     block (w, chunk) counts its chunk's digits per bucket, then reserves its range
//                       inside each bucket with one global atomic per bucket it uses (the value returned
//                       is where its entries start inside the bucket), kept in block_base;
//   msm_scatter_smem:   the same block places its entries from cursors in shared memory, starting at
//                       offsets[key] + block_base.
// Launch of the last two: W * nchunks blocks (block id = w * nchunks + chunk), `chunk` scalars each,
// 4 * 2^(c-1) bytes of shared memory.
KERNEL msm_digits(const fr_t* scalars, u32 n, u32 c, u32 W, u32* digits) {
    const u32 i = global_tid();
    if (i >= n) return;
    const fr_t s = load_struct(scalars + i);
    u32 carry = 0, neg = 0;
    for (u32 w = 0; w < W; ++w) {
        const u32 mag = signed_digit(s, w, c, carry, neg);
        digits[(u64)w * n + i] = mag | (neg << 31);
    }
}

BLOCK_KERNEL msm_count_smem(const u32* digits, u32 n, u32 c, u32 chunk, u32 nchunks, u32* counts,
                            u32* block_base) {
    DYN_SMEM(u32, cnt);
    const u32 B = 1u << (c - 1), w = blockIdx.x / nchunks, q = blockIdx.x % nchunks;
    const u32 lo = q * chunk, hi = lo + chunk < n ? lo + chunk : n;
    BLOCK_THREADS(tid) {
        for (u32 k = tid; k < B; k += blockDim.x) cnt[k] = 0;
    }
    SYNC();
    BLOCK_THREADS(tid) {
        for (u32 i = lo + tid; i < hi; i += blockDim.x) {
            const u32 mag = digits[(u64)w * n + i] & 0x7fffffffu;
            if (mag) atomicAdd(cnt + mag - 1, 1u);
        }
    }
    SYNC();
    BLOCK_THREADS(tid) {
        for (u32 k = tid; k < B; k += blockDim.x) {
            const u32 v = cnt[k];
            block_base[(u64)blockIdx.x * B + k] = v ? atomicAdd(counts + w * B + k, v) : 0u;
        }
    }
}

BLOCK_KERNEL msm_scatter_smem(const u32* digits, u32 n, u32 c, u32 chunk, u32 nchunks, const u32* index_map,
                              const u32* offsets, const u32* block_base, u32* sorted) {
    DYN_SMEM(u32, cur);
    const u32 B = 1u << (c - 1), w = blockIdx.x / nchunks, q = blockIdx.x % nchunks;
    const u32 lo = q * chunk, hi = lo + chunk < n ? lo + chunk : n;
    BLOCK_THREADS(tid) {
        for (u32 k = tid; k < B; k += blockDim.x) cur[k] = offsets[w * B + k] + block_base[(u64)blockIdx.x * B + k];
    }
    SYNC();
    BLOCK_THREADS(tid) {
        for (u32 i = lo + tid; i < hi; i += blockDim.x) {
            const u32 d = digits[(u64)w * n + i], mag = d & 0x7fffffffu;
            if (mag) {
                const u32 pos = atomicAdd(cur + mag - 1, 1u);
                sorted[pos] = (index_map ? index_map[i] : i) | (d & 0x80000000u);
            }
        }
    }
}

// flags[i] = 0 (scalar 0), 1 (scalar 1) or 2 (anything else): the 0/1 split of witness MSMs.
KERNEL msm_classify(const fr_t* scalars, u32 n, u8* flags) {
    const u32 i = global_tid();
    if (i >= n) return;
    const fr_t s = load_struct(scalars + i);
    u32 high = 0;
    UNROLL for (int q = 1; q < 8; ++q) high |= s.v[q];
    flags[i] = (u8)(high || s.v[0] > 1 ? 2 : s.v[0]);
}

template <class A, class X>
DEV void accumulate(const u32* sorted, const u32* offsets, u32 nkeys, u32 total, u32 K, const A* bases,
                    X* buckets, X* first, X* last) {
    const u32 t = global_tid();
    const u64 start64 = (u64)t * K;
    if (start64 >= total) return;
    const u32 start = (u32)start64;
    const u32 end = (u32)(start64 + K < total ? start64 + K : total);
    u32 lo = 0, hi = nkeys;  // offsets[lo] <= start < offsets[hi]
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) >> 1;
        if (offsets[mid] <= start) lo = mid; else hi = mid;
    }
    u32 k = lo, pos = start;
    while (pos < end) {
        u32 kend = offsets[k + 1];
        while (kend <= pos) kend = offsets[++k + 1];
        const u32 run_end = kend < end ? kend : end;
        X acc = X::inf();
        u32 e = sorted[pos];
        A p = load_struct(bases + (e & 0x7fffffffu));
        for (u32 q = pos; q < run_end; ++q) {
            // Issue the next gather before this addition so its latency overlaps the arithmetic.
            const u32 e_next = q + 1 < run_end ? sorted[q + 1] : e;
            const A p_next = load_struct(bases + (e_next & 0x7fffffffu));
            acc.add_affine((e >> 31) ? p.neg() : p);
            e = e_next;
            p = p_next;
        }
        const bool starts = offsets[k] >= start, ends = kend <= end;
        if (starts && ends) store_struct(buckets + k, acc);
        else if (!starts) store_struct(first + t, acc);
        else store_struct(last + t, acc);
        pos = run_end;
        ++k;
    }
}

// ---- Accumulation with the state in shared memory -------------------------------------------------
//
// The same segments and outputs as `accumulate`, but the thread's XYZZ accumulator and the affine
// point being added live in shared memory, not in registers. The register variant keeps about 100
// words alive across a mixed addition (accumulator, point, prefetched next point, temporaries) and so
// runs two or three warps per scheduler: too few to hide the latency of the carry chains. Here only
// the formula's temporaries (at most four field elements) and the product in flight are registers,
// operands are read back from shared memory when a product needs them, and the next point is
// gathered with cp.async straight into shared memory while the current addition runs. Fewer
// registers buy more resident warps (LAUNCH_BOUNDS2 below) within the same shared memory.
//
// Layout per block of T threads: the accumulators limb-major (coordinate c, limb i of thread t at
// word (c * NW + i) * T + t: a warp's accesses fall in 32 different banks), then one point slot of
// PW = 2 NW + 4 words per thread (x then y, read as 16-byte vectors; the 4-word pad keeps each group
// of 8 threads on distinct banks).

template <class F>
struct smem_layout {
    static constexpr u32 NW = (u32)(sizeof(F) / 4);  // words per field element
    static constexpr u32 PW = 2 * NW + 4;             // words per point slot
    static constexpr u32 WORDS = 4 * NW + PW;         // shared words per thread
};

// One field element stored with limb stride `stride` (words). Written per member (no casts of the
// element's address), so the compiler keeps the limbs in registers.
DEV void sfield_get(fp_t& r, const u32* p, u32 stride) {
    UNROLL for (int i = 0; i < 12; ++i) r.v[i] = p[i * stride];
}
DEV void sfield_get(fpc_t& r, const u32* p, u32 stride) { sfield_get(r.x, p, stride); }
// Fp2 (members c0, c1).
template <class F2>
DEV void sfield_get(F2& r, const u32* p, u32 stride) {
    sfield_get(r.c0, p, stride);
    sfield_get(r.c1, p + 12 * stride, stride);
}
DEV void sfield_put(u32* p, u32 stride, const fp_t& x) {
    UNROLL for (int i = 0; i < 12; ++i) p[i * stride] = x.v[i];
}
DEV void sfield_put(u32* p, u32 stride, const fpc_t& x) { sfield_put(p, stride, x.x); }
template <class F2>
DEV void sfield_put(u32* p, u32 stride, const F2& x) {
    sfield_put(p, stride, x.c0);
    sfield_put(p + 12 * stride, stride, x.c1);
}
// One field element stored contiguously (16-byte aligned), read as vectors.
DEV void sfield_get_vec(fp_t& r, const u32* p) {
#ifdef CUZK_HOST_EMU
    UNROLL for (int i = 0; i < 12; ++i) r.v[i] = p[i];
#else
    UNROLL for (int i = 0; i < 3; ++i) {
        const uint4 u = reinterpret_cast<const uint4*>(p)[i];
        r.v[4 * i] = u.x; r.v[4 * i + 1] = u.y; r.v[4 * i + 2] = u.z; r.v[4 * i + 3] = u.w;
    }
#endif
}
DEV void sfield_get_vec(fpc_t& r, const u32* p) { sfield_get_vec(r.x, p); }
template <class F2>
DEV void sfield_get_vec(F2& r, const u32* p) {
    sfield_get_vec(r.c0, p);
    sfield_get_vec(r.c1, p + 12);
}
template <class F>
DEV F sfield_load(const u32* p, u32 stride) { F r; sfield_get(r, p, stride); return r; }
template <class F>
DEV F sfield_load_vec(const u32* p) { F r; sfield_get_vec(r, p); return r; }

// The accumulator of one thread: four coordinates at acc + c * NW * T, limb stride T. T is a
// compile-time constant (the block size): every limb address is then the thread's base plus an
// immediate offset, where a run-time stride would cost a register per precomputed address.
template <class F, u32 T>
struct smem_xyzz {
    u32* acc;
    DEV F get(u32 c) const { return sfield_load<F>(acc + c * smem_layout<F>::NW * T, T); }
    DEV void set(u32 c, const F& x) const { sfield_put(acc + c * smem_layout<F>::NW * T, T, x); }

    // acc = 2 acc (dbl-2008-s-1), at most four temporaries alive.
    DEV void dbl() const {
        const F U = get(1).dbl();
        const F V = U.sqr();
        const F W = U * V;
        set(2, get(2) * V);
        const F S = get(0) * V;
        set(3, get(3) * W);
        F M = get(0).sqr();
        M = M.dbl() + M;
        const F X3 = M.sqr() - S.dbl();
        const F WY = W * get(1);
        set(0, X3);
        set(1, M * (S - X3) - WY);
    }

    // Global copy of the accumulator (infinity when `empty`) to an XYZZ point of the same layout,
    // 16-byte stores.
    template <class X>
    DEV void store(X* dst, bool empty) const {
        static_assert(sizeof(X) == 4 * sizeof(F), "XYZZ layout");
        F* out = reinterpret_cast<F*>(dst);
        UNROLL for (u32 c = 0; c < 4; ++c) store_struct(out + c, empty ? F::zero() : get(c));
    }
};

// Start the gather of base e (sign bit ignored) into this thread's point slot.
template <class A>
DEV void fetch_point(const A* bases, u32 e, u32* slot) {
    const u32* src = reinterpret_cast<const u32*>(bases + (e & 0x7fffffffu));
    UNROLL for (int i = 0; i < (int)(sizeof(A) / 16); ++i) cp_async16(slot + 4 * i, src + 4 * i);
}

template <class A, class F, u32 T, class X>
DEV void accumulate_smem(const u32* sorted, const u32* offsets, u32 nkeys, u32 total, u32 K, const A* bases,
                         X* buckets, X* first, X* last) {
    typedef smem_layout<F> L;
    DYN_SMEM(u32, sm);
    const smem_xyzz<F, T> a{sm + threadIdx.x};
    u32* const slot = sm + 4 * L::NW * T + threadIdx.x * L::PW;

    const u32 t = global_tid();
    const u64 start64 = (u64)t * K;
    if (start64 >= total) return;
    const u32 start = (u32)start64;
    const u32 end = (u32)(start64 + K < total ? start64 + K : total);
    u32 lo = 0, hi = nkeys;  // offsets[lo] <= start < offsets[hi]
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) >> 1;
        if (offsets[mid] <= start) lo = mid; else hi = mid;
    }
    u32 e = sorted[start];
    fetch_point(bases, e, slot);
    u32 k = lo, pos = start;
    while (pos < end) {
        u32 kend = offsets[k + 1];
        while (kend <= pos) kend = offsets[++k + 1];
        const u32 run_end = kend < end ? kend : end;
        bool empty = true;
        for (u32 q = pos; q < run_end; ++q) {
            // The next entry of the segment (the next run's first one at a run's end).
            const bool more = q + 1 < end;
            const u32 e_next = more ? sorted[q + 1] : 0u;
            cp_async_wait_all();
            const F qx = sfield_load_vec<F>(slot);
            if (qx.is_zero() && sfield_load_vec<F>(slot + L::NW).is_zero()) {  // infinity: nothing to add
                if (more) fetch_point(bases, e_next, slot);
                e = e_next;
                continue;
            }
            if (empty) {
                const F qy = sfield_load_vec<F>(slot + L::NW);
                a.set(0, qx);
                a.set(1, (e >> 31) ? -qy : qy);
                a.set(2, F::one());
                a.set(3, F::one());
                empty = false;
                if (more) fetch_point(bases, e_next, slot);
                e = e_next;
                continue;
            }
            // Mixed addition (madd-2008-s). The slot is free once x and y have been read.
            const F P = qx * a.get(2) - a.get(0);
            F qy = sfield_load_vec<F>(slot + L::NW);
            if (e >> 31) qy = -qy;
            const F R = qy * a.get(3) - a.get(1);
            if (more) fetch_point(bases, e_next, slot);
            e = e_next;
            if (P.is_zero()) {
                if (R.is_zero()) a.dbl();
                else empty = true;  // acc + (-acc)
                continue;
            }
            const F PP = P.sqr();
            const F PPP = P * PP;
            a.set(2, a.get(2) * PP);
            const F Q = a.get(0) * PP;
            a.set(3, a.get(3) * PPP);
            const F X3 = R.sqr() - PPP - Q.dbl();
            const F YPPP = a.get(1) * PPP;
            a.set(0, X3);
            a.set(1, R * (Q - X3) - YPPP);
        }
        const bool starts = offsets[k] >= start, ends = kend <= end;
        if (starts && ends) a.store(buckets + k, empty);
        else if (!starts) a.store(first + t, empty);
        else a.store(last + t, empty);
        pos = run_end;
        ++k;
    }
}

// ---- Batch-affine tree rounds (before the accumulation) -----------------------------------------
//
// One round halves every bucket's list of affine points: output i of bucket k is
// in[2i] + in[2i + 1] of that bucket's input run (or in[2i] alone for the odd last one), computed
// as an affine addition, lambda = (y2 - y1) / (x2 - x1), whose inversion is shared: each thread
// takes `per` outputs, multiplies their denominators together (Montgomery's trick:
// the running product before each one is parked in the output slot), inverts the product once, and
// walks back recovering each inverse with two products. About 6 products per addition plus the
// thread's one inversion, against 10 for a mixed XYZZ addition; the reduced lists then go through
// the usual accumulation (msm_accumulate_*), whose segments stay balanced however skewed the
// buckets are. Rounds stop while each thread still has enough additions to pay for its inversion
// (DeviceMsm decides). The first round reads the sorted entries (base index | sign << 31); later
// rounds read the previous round's points (entries == nullptr).
// Offsets: bucket k's input run is [off_in[k], off_in[k+1]), its output run [off_out[k], off_out[k+1])
// with off_out[k+1] - off_out[k] = ceil(run / 2); off_out[0] = 0 and off_out[nkeys] = total.

// Input q of a round: the entry of the base it names (the first round: base index | sign << 31) or q
// itself, point q of `in` (later rounds: no sign).
DEV u32 tree_entry(const u32* entries, u32 q) { return entries ? entries[q] : q; }

template <class A>
DEV const A* tree_point(const A* in, u32 e) { return in + (e & 0x7fffffffu); }

// How p1 + p2 is formed: p1 alone (no p2, or p2 at infinity), p2 alone (p1 at infinity), infinity
// (p2 = -p1), an addition or a doubling; for the last two, d is lambda's denominator (never zero:
// neither curve has points of order 2, and infinity is handled before).
enum { TREE_TAKE1, TREE_TAKE2, TREE_ZERO, TREE_ADD, TREE_DBL };

template <class A, class F>
DEV u32 tree_kind(const A& p1, const A& p2, bool pair, F& d) {
    if (!pair || p2.is_inf()) return TREE_TAKE1;
    if (p1.is_inf()) return TREE_TAKE2;
    if ((p2.x - p1.x).is_zero()) {
        if (!(p2.y - p1.y).is_zero()) return TREE_ZERO;
        d = p1.y.dbl();
        return TREE_DBL;
    }
    d = p2.x - p1.x;
    return TREE_ADD;
}

// Output j of a round, in bucket k: the point(s) it sums (entries q and q + 1 of the bucket's input
// list; a bucket with an odd count passes its last point on alone) and how (tree_kind).
template <class A, class F>
struct tree_pair_t {
    A p1, p2;
    F d;
    u32 kind;
};

// The entries of output j, in bucket k: q and q + 1 of the bucket's input list, or q twice when q is
// its odd last one (no pair).
struct tree_ents_t {
    u32 e1, e2;
    bool pair;
};

DEV tree_ents_t tree_ents(const u32* entries, const u32* off_in, const u32* off_out, u32 k, u32 j) {
    const u32 q = off_in[k] + 2 * (j - off_out[k]);
    const bool pair = q + 1 < off_in[k + 1];
    const u32 e1 = tree_entry(entries, q);
    return {e1, pair ? tree_entry(entries, q + 1) : e1, pair};
}

// The pair's points, loaded by the caller (both loads issued before either point is used, so that they
// wait on memory together: nvcc issues a load written after the other point's sign or test only once
// that point has arrived), signed and classified.
template <class A, class F>
DEV tree_pair_t<A, F> tree_pair_of(const tree_ents_t& e, A p1, A p2) {
    if (e.e1 >> 31) p1 = p1.neg();
    if (e.e2 >> 31) p2 = p2.neg();
    F d;
    const u32 kind = tree_kind(p1, p2, e.pair, d);
    return {p1, p2, d, kind};
}

template <class A, class F>
DEV tree_pair_t<A, F> tree_pair(const u32* entries, const A* in, const u32* off_in, const u32* off_out, u32 k,
                                u32 j) {
    const tree_ents_t e = tree_ents(entries, off_in, off_out, k, j);
    return tree_pair_of<A, F>(e, load_struct(tree_point(in, e.e1)), load_struct(tree_point(in, e.e2)));
}

// The first pass needs only each addition's denominator. Where both x coordinates are nonzero (neither
// point is infinity, stored as (0, 0)) and differ, that is x2 - x1, and the y coordinates are not read:
// two of a G1 point's three 32-byte sectors. Any other case takes both points through tree_kind.
// tree_fetch_x reads output j's x coordinates, both loads issued before either is tested; the pass
// issues the next output's fetch before it works on this one (tree_round), so that the chain of loads
// an output waits on (offsets, entries, then the points at random) overlaps the previous output's
// product rather than following it.
template <class F>
struct tree_x_t {
    bool pair;
    F x1, x2;
};

template <class A, class F>
DEV tree_x_t<F> tree_fetch_x(const u32* entries, const A* in, const u32* off_in, const u32* off_out, u32 k, u32 j) {
    const tree_ents_t e = tree_ents(entries, off_in, off_out, k, j);
    tree_x_t<F> r;
    r.pair = e.pair;
    if (e.pair) {
        r.x1 = load_struct(&tree_point(in, e.e1)->x);
        r.x2 = load_struct(&tree_point(in, e.e2)->x);
    }
    return r;
}

// Whether output j (fetched as x) is an addition or a doubling, d set, as tree_pair's kind would say.
// The two zero tests are one (`|`, not `||`), so that neither load waits for the other's test.
template <class A, class F>
DEV bool tree_denominator(const tree_x_t<F>& x, const u32* entries, const A* in, const u32* off_in,
                          const u32* off_out, u32 k, u32 j, F& d) {
    if (!x.pair) return false;
    if (!(x.x1.is_zero() | x.x2.is_zero())) {
        d = x.x2 - x.x1;
        if (!d.is_zero()) return true;
    }
    const tree_pair_t<A, F> t = tree_pair<A, F>(entries, in, off_in, off_out, k, j);
    d = t.d;
    return t.kind >= TREE_ADD;
}

template <class A, class F>
DEV void tree_round(const u32* entries, const A* in, const u32* off_in, const u32* off_out, u32 nkeys, u32 total,
                    u32 per, A* out) {
    // Warp w takes outputs [w * 32 per, (w + 1) * 32 per), lane l every 32nd of them from the l-th:
    // the lanes of a warp read neighbouring pairs and write neighbouring outputs (coalesced).
    const u32 t = global_tid();
    const u64 first64 = (u64)(t >> 5) * 32 * per + (t & 31);
    if (first64 >= total) return;
    const u32 first = (u32)first64;
    const u32 left = (total - first + 31) >> 5;
    const u32 count = left < per ? left : per;
    u32 a = 0, b = nkeys;  // off_out[a] <= first < off_out[b]
    while (b - a > 1) {
        const u32 mid = (a + b) >> 1;
        if (off_out[mid] <= first) a = mid; else b = mid;
    }
    u32 k = a;
    F acc = F::one();
    tree_x_t<F> next = tree_fetch_x<A, F>(entries, in, off_in, off_out, k, first);
    for (u32 i = 0; i < count; ++i) {
        const u32 j = first + 32 * i, kj = k;
        const tree_x_t<F> x = next;
        if (i + 1 < count) {  // the next output's loads go out before this one's product
            while (off_out[k + 1] <= j + 32) ++k;
            next = tree_fetch_x<A, F>(entries, in, off_in, off_out, k, j + 32);
        }
        F d;
        const bool add = tree_denominator<A, F>(x, entries, in, off_in, off_out, kj, j, d);
        store_struct(&out[j].x, acc);
        if (add) acc = acc * d;
    }
    F inv = acc.inv();
    // k is the last output's bucket. Each output's points go out as soon as the output starts, from
    // entries read during the output before, so that an output waits on one memory latency, not on
    // offsets, entries and then points.
    tree_ents_t ents = tree_ents(entries, off_in, off_out, k, first + 32 * (count - 1));
    for (u32 i = count; i-- > 0;) {
        const u32 j = first + 32 * i;
        const tree_ents_t e = ents;
        // Written by this thread in the first pass; loaded here, beside the points, not at its use.
        const F before = load_struct_early(&out[j].x);
        const A q1 = load_struct(tree_point(in, e.e1)), q2 = load_struct(tree_point(in, e.e2));
        if (i) {
            while (off_out[k] > j - 32) --k;
            ents = tree_ents(entries, off_in, off_out, k, j - 32);
        }
        const tree_pair_t<A, F> t = tree_pair_of<A, F>(e, q1, q2);
        const A& p1 = t.p1;
        const A& p2 = t.p2;
        const u32 kind = t.kind;
        A r;
        if (kind == TREE_TAKE1) {
            r = p1;
        } else if (kind == TREE_TAKE2) {
            r = p2;
        } else if (kind == TREE_ZERO) {
            r.x = F::zero();
            r.y = F::zero();
        } else {
            // What needs p2 first: p2 is then dead before the first product, and fewer values stay live
            // across the products' calls (the ones that do are spilled to local memory and back).
            const F sx = p1.x + p2.x;
            F num;
            if (kind == TREE_ADD) {
                num = p2.y - p1.y;
            } else {
                const F xx = p1.x.sqr();
                num = xx.dbl() + xx;
            }
            const F inv_d = inv * before;
            inv = inv * t.d;
            const F lambda = num * inv_d;
            r.x = lambda.sqr() - sx;
            r.y = lambda * (p1.x - r.x) - p1.y;
        }
        store_struct(out + j, r);
    }
}

template <class X>
DEV void combine(const u32* offsets, u32 nkeys, u32 K, X* buckets, const X* first, const X* last) {
    const u32 k = global_tid();
    if (k >= nkeys) return;
    const u32 a = offsets[k], b = offsets[k + 1];
    if (b <= a) return;
    const u32 t0 = a / K, t1 = (b - 1) / K;
    if (t0 == t1) return;
    X acc = load_struct(last + t0);
    for (u32 t = t0 + 1; t <= t1; ++t) acc.add(load_struct(first + t));
    store_struct(buckets + k, acc);
}

// Thread id = w * P + p over buckets [id * L, (id + 1) * L): S = sum, T = sum (j - id*L + 1) * bucket_j.
template <class X>
DEV void runsum(const X* buckets, u32 logL, u32 nthreads, X* S, X* T) {
    const u32 id = global_tid();
    if (id >= nthreads) return;
    const X* q = buckets + ((u64)id << logL);
    X run = X::inf(), tot = X::inf();
    for (int j = (int)(1u << logL) - 1; j >= 0; --j) {
        run.add(load_struct(q + j));
        tot.add(run);
    }
    store_struct(S + id, run);
    store_struct(T + id, tot);
}

// For each group g of M points and b in [0, nbits]: partial sums over chunks of `chunk` points of
// in[g*M + j] for the j with bit b set (b < nbits) or all j (b == nbits).
// out[(g * (nbits + 1) + b) * Q + q], Q = ceil(M / chunk). With nbits = 0 it is a plain chunked sum.
template <class X>
DEV void sum_bits(const X* in, u32 groups, u32 M, u32 nbits, u32 chunk, X* out) {
    const u32 Q = (M + chunk - 1) / chunk;
    const u32 id = global_tid();
    if (id >= groups * (nbits + 1) * Q) return;
    const u32 q = id % Q, gb = id / Q;
    const u32 b = gb % (nbits + 1), g = gb / (nbits + 1);
    const u32 j0 = q * chunk, j1 = j0 + chunk < M ? j0 + chunk : M;
    X acc = X::inf();
    for (u32 j = j0; j < j1; ++j)
        if (b == nbits || ((j >> b) & 1u)) acc.add(load_struct(in + (u64)g * M + j));
    store_struct(out + id, acc);
}

// Thread w < W: R_w = V_w + L * sum_b 2^b U_(w,b), the window's sum_j (j+1) bucket_j. The host then
// combines the windows (sum_w 2^(c w) R_w, Horner with c doublings per window).
template <class X>
DEV void window_sums(const X* U, const X* V, u32 W, u32 nbitsP, u32 logL, X* out) {
    const u32 w = global_tid();
    if (w >= W) return;
    X r = X::inf();
    for (int b = (int)nbitsP - 1; b >= 0; --b) {
        r.dbl();
        r.add(load_struct(U + w * (nbitsP + 1) + b));
    }
    for (u32 i = 0; i < logL; ++i) r.dbl();
    r.add(load_struct(V + w));
    store_struct(out + w, r);
}

// Partial sums of the bases whose scalar is exactly 1 (flags from msm_classify), `chunk` per thread.
// Each lane walks its chunk to its next 1 before the warp adds, so that every lane adds in every
// iteration until its chunk ends: a loop over flags, each a lane's branch, leaves the lanes holding a 0
// idle while the others add (about half of them in a PoRep witness). G1 (sum_ahead) also loads the
// next 1's point before adding this one, so that the load's latency overlaps the addition; G2 does not,
// as a G2 point held across the addition spills (nvcc's figures: benchmarks/HISTORY.md).
template <class A>
DEV constexpr bool sum_ahead() { return sizeof(A) <= 96; }

template <class A, class X>
DEV void sum_ones(const A* bases, const u8* flags, u32 n, u32 chunk, X* out) {
    const u32 q = global_tid();
    const u64 j0 = (u64)q * chunk;
    if (j0 >= n) return;
    const u32 j1 = (u32)(j0 + chunk < n ? j0 + chunk : n);
    X acc = X::inf();
    u32 j = (u32)j0;
    if constexpr (sum_ahead<A>()) {
        while (j < j1 && flags[j] != 1) ++j;
        A p;
        if (j < j1) p = load_struct(bases + j);
        while (j < j1) {
            u32 next = j + 1;
            while (next < j1 && flags[next] != 1) ++next;
            A pn;
            if (next < j1) pn = load_struct(bases + next);
            acc.add_affine(p);
            p = pn;
            j = next;
        }
    } else {
        for (;;) {
            while (j < j1 && flags[j] != 1) ++j;
            if (j >= j1) break;
            acc.add_affine(load_struct(bases + j));
            ++j;
        }
    }
    store_struct(out + q, acc);
}

// Partial sums of bases[list[j]] for every j < n (list == nullptr: bases[j]): the 1s of a split MSM
// once their indices are compacted, or what the tree rounds leave of them. Thread t of warp w sums
// j = w * 32 chunk + (t mod 32) + 32 i, i < chunk: a warp's lanes read neighbouring entries. G1 loads
// the next point before adding this one (see sum_ones). Every thread of the grid writes its row
// (infinity when it has nothing), so the host sums all grid * block rows.
template <class A, class X>
DEV void sum_list(const A* bases, const u32* list, u32 n, u32 chunk, X* out) {
    const u32 t = global_tid();
    const u64 first64 = (u64)(t >> 5) * 32 * chunk + (t & 31);
    X acc = X::inf();
    if (first64 < n) {
        const u32 first = (u32)first64;
        const u32 left = (n - first + 31) >> 5;
        const u32 count = left < chunk ? left : chunk;
        if constexpr (sum_ahead<A>()) {
            A p = load_struct(bases + (list ? list[first] : first));
            for (u32 i = 1; i <= count; ++i) {
                const u32 j = first + 32 * i;
                A pn;
                if (i < count) pn = load_struct(bases + (list ? list[j] : j));
                acc.add_affine(p);
                p = pn;
            }
        } else {
            for (u32 i = 0; i < count; ++i) {
                const u32 j = first + 32 * i;
                acc.add_affine(load_struct(bases + (list ? list[j] : j)));
            }
        }
    }
    store_struct(out + t, acc);
}

// Curve test hook: op 0: a + b (mixed), 1: 2a + 2b (full XYZZ addition), 2: 2a.
template <class A, class X>
DEV void ec_op(u32 op, const A* a, const A* b, X* out, u32 n) {
    const u32 i = global_tid();
    if (i >= n) return;
    const A pa = load_struct(a + i), pb = load_struct(b + i);
    X x = X::inf();
    x.add_affine(pa);
    if (op == 0) {
        x.add_affine(pb);
    } else if (op == 1) {
        X y = X::inf();
        y.add_affine(pb);
        x.dbl();
        y.dbl();
        x.add(y);
    } else {
        x.dbl();
    }
    store_struct(out + i, x);
}

// The accumulation kernel in occupancy variants: _oB asks the compiler to fit B blocks of 128 threads
// per multiprocessor (fewer registers, more warps to hide the latency of the carry chains). DeviceMsm
// picks one per group (`accumulate_variant`).
#define CUZK_ACC_KERNEL(G, SUFFIX, BLOCKS)                                                               \
    KERNEL LAUNCH_BOUNDS2(128, BLOCKS) msm_accumulate_##G##SUFFIX(                                       \
        const u32* sorted, const u32* offsets, u32 nkeys, u32 total, u32 K, const G##_affine* bases,     \
        G##_xyzz* buckets, G##_xyzz* first, G##_xyzz* last) {                                           \
        accumulate<G##_affine, G##_xyzz>(sorted, offsets, nkeys, total, K, bases, buckets, first, last); \
    }

CUZK_ACC_KERNEL(g1, _o3, 3)
CUZK_ACC_KERNEL(g2, _o1, 1)

// Shared-memory variants (accumulate_smem): _sB fits B blocks of `threads` per multiprocessor; the
// launch passes smem_layout<F>::WORDS * 4 bytes of dynamic shared memory per thread (G1 304, G2 592),
// so B blocks must also fit the 227 KiB of shared memory (G1: 128-thread blocks, 38 KiB each; G2:
// 64-thread blocks, 37 KiB each).
#define CUZK_ACC_SMEM_KERNEL(G, F, SUFFIX, THREADS, BLOCKS)                                              \
    KERNEL LAUNCH_BOUNDS2(THREADS, BLOCKS) msm_accumulate_##G##SUFFIX(                                    \
        const u32* sorted, const u32* offsets, u32 nkeys, u32 total, u32 K, const G##_affine* bases,     \
        G##_xyzz* buckets, G##_xyzz* first, G##_xyzz* last) {                                           \
        accumulate_smem<G##_affine, F, THREADS>(sorted, offsets, nkeys, total, K, bases, buckets, first, last);   \
    }

CUZK_ACC_SMEM_KERNEL(g1, fpc_t, _s4, 128, 4)
CUZK_ACC_SMEM_KERNEL(g1, fpc_t, _s5, 128, 5)
CUZK_ACC_SMEM_KERNEL(g2, fp2_t, _s4, 64, 4)
CUZK_ACC_SMEM_KERNEL(g2, fp2_t, _s5, 64, 5)

// Tree rounds (tree_round): 128-thread blocks, B per multiprocessor (G1 4: at most 128 registers; G2 2,
// its two Fp2 points alone take 96 registers). msm.py's TREE_THREADS_PER_SM is 128 B.
#define CUZK_TREE_KERNEL(G, F, BLOCKS)                                                                   \
    KERNEL LAUNCH_BOUNDS2(128, BLOCKS) msm_tree_round_##G(const u32* entries, const G##_affine* in,           \
                                                     const u32* off_in, const u32* off_out, u32 nkeys,   \
                                                     u32 total, u32 per, G##_affine* out) {              \
        tree_round<G##_affine, F>(entries, in, off_in, off_out, nkeys, total, per, out);                 \
    }

CUZK_TREE_KERNEL(g1, fpc_t, 4)
CUZK_TREE_KERNEL(g2, fp2_t, 2)

#define CUZK_MSM_KERNELS(G)                                                                              \
    KERNEL msm_combine_##G(const u32* offsets, u32 nkeys, u32 K, G##_xyzz* buckets,                      \
                           const G##_xyzz* first, const G##_xyzz* last) {                                \
        combine<G##_xyzz>(offsets, nkeys, K, buckets, first, last);                                      \
    }                                                                                                    \
    KERNEL msm_runsum_##G(const G##_xyzz* buckets, u32 logL, u32 nthreads, G##_xyzz* S, G##_xyzz* T) {   \
        runsum<G##_xyzz>(buckets, logL, nthreads, S, T);                                                 \
    }                                                                                                    \
    KERNEL xyzz_sum_bits_##G(const G##_xyzz* in, u32 groups, u32 M, u32 nbits, u32 chunk,               \
                             G##_xyzz* out) {                                                            \
        sum_bits<G##_xyzz>(in, groups, M, nbits, chunk, out);                                            \
    }                                                                                                    \
    KERNEL msm_window_sums_##G(const G##_xyzz* U, const G##_xyzz* V, u32 W, u32 nbitsP, u32 logL,        \
                               G##_xyzz* out) {                                                          \
        window_sums<G##_xyzz>(U, V, W, nbitsP, logL, out);                                               \
    }                                                                                                    \
    KERNEL msm_sum_ones_##G(const G##_affine* bases, const u8* flags, u32 n, u32 chunk, G##_xyzz* out) { \
        sum_ones<G##_affine, G##_xyzz>(bases, flags, n, chunk, out);                                     \
    }                                                                                                    \
    KERNEL msm_sum_list_##G(const G##_affine* bases, const u32* list, u32 n, u32 chunk, G##_xyzz* out) { \
        sum_list<G##_affine, G##_xyzz>(bases, list, n, chunk, out);                                      \
    }                                                                                                    \
    KERNEL ec_test_##G(u32 op, const G##_affine* a, const G##_affine* b, G##_xyzz* out, u32 n) {         \
        ec_op<G##_affine, G##_xyzz>(op, a, b, out, n);                                                   \
    }

CUZK_MSM_KERNELS(g1)
CUZK_MSM_KERNELS(g2)
