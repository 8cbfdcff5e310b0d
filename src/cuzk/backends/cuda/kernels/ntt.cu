// Number-theoretic transforms over Fr, in place on (n, 8) Montgomery arrays, n = 2^L <= 2^28.
//
// A radix-2 transform of 2^L points is cut into passes of S <= 10 stages each; one block runs C
// independent sub-transforms of 2^S points (stride 2^lo apart, C neighbouring columns so loads
// are contiguous), its points in registers two a thread, partner threads trading points between
// stages (see dif_pass), then writes back: three sweeps over memory at 2^27.
//
// DIF (natural in, bit-reversed out) passes go from the top index bits down; DIT (bit-reversed in,
// natural out) from the bottom up. Between passes the four-step identity is used: a pass on bits
// [lo, lo+S) of a sub-problem of 2^(lo+S) points is a plain 2^S-point DFT over the pass bits (root
// w_(2^S)) followed (DIF) or preceded (DIT) by the twiddle w_(2^(lo+S))^(l * bitrev_S(t)), l being
// the low index bits and t the position inside the sub-transform. Roots come from tables:
//   inner[k] = w_(2^I)^k, k < 2^(I-1), I = min(L, 10)          (the in-pass stages)
//   w^e = tw_lo[e mod 2^14] * tw_hi[e >> 14]                    (the between-pass twiddles)
//   or direct[k] = w_(2^(lo+S))^k when lo + S <= 18             (the same, one load, no product)
// where w is the domain's root of order 2^L and w_(2^j) = w^(2^(L-j)).
#pragma once
#include "convert.cu"

#define NTT_TW_SPLIT 14

DEV fr_t tw_pow(const fr_t* lo, const fr_t* hi, u32 e) {
    fr_t w = load_struct(lo + (e & ((1u << NTT_TW_SPLIT) - 1)));
    const u32 h = e >> NTT_TW_SPLIT;
    if (h) w = w * load_struct(hi + h);
    return w;
}

// The between-pass twiddle w^(k << shift) of a pass on bits [lo, lo+S), k = l * bitrev_S(t) < 2^(lo+S),
// shift = L - lo - S. When lo + S is small enough the host passes `direct`, the 2^(lo+S) powers of the
// root of order 2^(lo+S): one load and no product; otherwise w^e = tw_lo * tw_hi.
DEV fr_t pass_twiddle(const fr_t* lo, const fr_t* hi, const fr_t* direct, u32 k, u32 shift) {
    return direct ? load_struct(direct + k) : tw_pow(lo, hi, k << shift);
}

// A pass keeps its points in registers, two a thread, from load to store: thread tid of a block, column c =
// tid mod C and index tau (pass_map below), holds rows (r, r + 2^s) of column c at stage s, and between
// stages partner threads swap one point each. For a DIF pass (stages S-1 down to 0) the thread loads rows
// (tau, tau + 2^(S-1)) and before stage s - 1 trades on bit s - 1 of tau: a thread whose bit is 0 keeps its
// low point and takes the partner's low point as its high one; a thread whose bit is 1 keeps its high point
// and takes the partner's high point as its low one. Bit s - 1 of tau thereby moves from row bit s - 1 to
// row bit s, so at stage s the low row r still has tau's low s bits (the butterfly's twiddle index j = tau
// mod 2^s) and after stage 0 the thread holds rows (2 tau, 2 tau + 1). The trade is its own inverse: a DIT
// pass (stages 0 up to S-1) loads rows (2 tau, 2 tau + 1), trades on bit s - 1 before stage s and stores
// rows (tau, tau + 2^(S-1)). Partners in one warp trade by shuffles, others through shared memory. Against
// passes that kept the points in shared memory (every butterfly reading and writing both of its points
// there) this halves the shared-memory traffic of a stage, and it is faster on an H200
// (benchmarks/results/cuda-ntt-register-passes-h200-2026-12-01.json; history: benchmarks/HISTORY.md).
// The host emulator runs a block one phase at a time, thread after thread: there a thread's points live
// in arrays indexed by tid (THREAD_POINT) and every trade goes through shared memory.
#ifdef CUZK_HOST_EMU
#define NTT_MAX_THREADS 512
#define THREAD_POINT(name) fr_t name##_of[NTT_MAX_THREADS]
#define PT(name, tid) name##_of[tid]
#else
#define THREAD_POINT(name) fr_t name
#define PT(name, tid) name
#endif

// Trade slots: buffer k (0 or 1) holds T points, the low 16 bytes of slot i at uint4 (2k) T + i and the
// high 16 at (2k + 1) T + i, so a warp's accesses are contiguous 16-byte runs. Two buffers alternate:
// a thread writing buffer k has passed the barrier that every reader of k's previous contents reached
// after reading, so one barrier a trade suffices.
DEV void trade_put(u32* sm, u32 T, u32 k, u32 i, const fr_t& x) {
#ifdef CUZK_HOST_EMU
    memcpy(sm + 4 * ((2 * k) * T + i), x.v, 16);
    memcpy(sm + 4 * ((2 * k + 1) * T + i), x.v + 4, 16);
#else
    uint4* s = reinterpret_cast<uint4*>(sm);
    s[(2 * k) * T + i] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
    s[(2 * k + 1) * T + i] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
#endif
}
DEV fr_t trade_get(const u32* sm, u32 T, u32 k, u32 i) {
    fr_t x;
#ifdef CUZK_HOST_EMU
    memcpy(x.v, sm + 4 * ((2 * k) * T + i), 16);
    memcpy(x.v + 4, sm + 4 * ((2 * k + 1) * T + i), 16);
#else
    const uint4* s = reinterpret_cast<const uint4*>(sm);
    const uint4 lo = s[(2 * k) * T + i], hi = s[(2 * k + 1) * T + i];
    x.v[0] = lo.x; x.v[1] = lo.y; x.v[2] = lo.z; x.v[3] = lo.w;
    x.v[4] = hi.x; x.v[5] = hi.y; x.v[6] = hi.z; x.v[7] = hi.w;
#endif
    return x;
}

// Limb by limb, so that the choice is a select per word rather than a choice of register set.
DEV fr_t trade_send(const fr_t& a, const fr_t& b, bool up) {
    fr_t x;
    UNROLL for (int q = 0; q < 8; ++q) x.v[q] = up ? a.v[q] : b.v[q];
    return x;
}
DEV void trade_keep(fr_t& a, fr_t& b, const fr_t& r, bool up) {
    UNROLL for (int q = 0; q < 8; ++q) {
        a.v[q] = up ? r.v[q] : a.v[q];
        b.v[q] = up ? b.v[q] : r.v[q];
    }
}

// Which thread holds which tau. The low bits of tau (those that decide the twiddle index j = tau mod 2^s
// of the lower stages) come from the warp index, the rest from the lane bits above the column bits:
// tau = (warp bits of tid) | (lane bits of tid above logC) << m. At a stage s <= m every lane of a warp
// then has the same j, so a warp with j = 0 (half the warps at stage 1, a quarter at stage 2, ...) skips
// the product and the others read one broadcast twiddle. `hb`: the first tid bit above both the lane
// and the column bits. The price: neighbouring lanes hold rows 2^m apart, so the loads and stores of a
// lo = 0 pass are no longer one contiguous run a warp (each point is still a whole 32-byte sector). On an
// H200 that pays from 2^24 up and costs a little where a transform sits in L2 (2^20)
// (benchmarks/results/cuda-ntt-warp-twiddles-h200-2026-12-01b.json; history: benchmarks/HISTORY.md).
struct pass_map {
    u32 logC, hb, nl, m;  // nl lane bits of tau above its m warp bits
    DEV pass_map(u32 S, u32 logC_) : logC(logC_) {
        const u32 logT = S - 1 + logC;
        hb = logC > 5 ? logC : 5;
        nl = (hb < logT ? hb : logT) - logC;
        m = S - 1 - nl;
    }
    DEV u32 tau(u32 tid) const { return (tid >> hb) | (((tid >> logC) & ((1u << nl) - 1)) << m); }
    // The tid distance of the partner across bit `bit` of tau.
    DEV u32 dist(u32 bit) const { return bit < m ? 1u << (hb + bit) : 1u << (logC + bit - m); }
};

#ifndef CUZK_HOST_EMU
// The trade by shuffles, the partner `dist` < 32 lanes away.
DEV void warp_trade(fr_t& a, fr_t& b, bool up, u32 dist) {
    fr_t r = trade_send(a, b, up);
    UNROLL for (int q = 0; q < 8; ++q) r.v[q] = __shfl_xor_sync(0xffffffffu, r.v[q], dist);
    trade_keep(a, b, r, up);
}
#endif

// The trade on bit `bit` of tau for the whole block; `k` is the shared-memory buffer, flipped when used.
#define NTT_TRADE(a, b, bit)                                                                          \
    do {                                                                                              \
        const u32 dist_ = map.dist(bit);                                                              \
        if (NTT_SHUFFLES && dist_ < 32) {                                                             \
            BLOCK_THREADS(tid) { NTT_WARP_TRADE(PT(a, tid), PT(b, tid), (map.tau(tid) >> (bit)) & 1u, dist_); } \
        } else {                                                                                      \
            BLOCK_THREADS(tid) {                                                                      \
                const bool up_ = (map.tau(tid) >> (bit)) & 1u;                                        \
                trade_put(sm, T, k, tid, trade_send(PT(a, tid), PT(b, tid), up_));                     \
            }                                                                                         \
            SYNC();                                                                                   \
            BLOCK_THREADS(tid) {                                                                      \
                const bool up_ = (map.tau(tid) >> (bit)) & 1u;                                        \
                trade_keep(PT(a, tid), PT(b, tid), trade_get(sm, T, k, tid ^ dist_), up_);            \
            }                                                                                         \
            k ^= 1u;                                                                                  \
        }                                                                                             \
    } while (0)
#ifdef CUZK_HOST_EMU
#define NTT_SHUFFLES 0
#define NTT_WARP_TRADE(a, b, up, dist)
#else
#define NTT_SHUFFLES 1
#define NTT_WARP_TRADE(a, b, up, dist) warp_trade(a, b, up, dist)
#endif

DEV constexpr u32 fixed_log2(u32 x) { return x > 1 ? 1 + fixed_log2(x >> 1) : 0; }

// The stage-s twiddle of the butterfly whose low row is r, j = r mod 2^s: w_(2^(s+1))^j.
DEV fr_t stage_twiddle(const fr_t* inner, u32 inner_log, u32 j, u32 s) {
    return load_struct(inner + (j << (inner_log - 1 - s)));
}

// A pass's stages, on the points a, b of every thread (names in scope: S, map, inner_log, and the trade's
// sm, T, k). DIF: stages S-1 down to 0, a thread holding rows (tau, tau + 2^(S-1)) at the start and
// (2 tau, 2 tau + 1) at the end; DIT: stages 0 up to S-1, the other way round.
#define NTT_DIF_STAGES(INNER)                                                        \
    UNROLL for (int si = (int)S - 1; si >= 0; --si) {                                \
        const u32 s = (u32)si;                                                       \
        BLOCK_THREADS(tid) {                                                         \
            const u32 j = map.tau(tid) & ((1u << s) - 1);                            \
            const fr_t x = PT(a, tid), y = PT(b, tid);                               \
            fr_t d = x - y;                                                          \
            if (j) d = d * stage_twiddle(INNER, inner_log, j, s);                    \
            PT(a, tid) = x + y;                                                      \
            PT(b, tid) = d;                                                          \
        }                                                                            \
        if (s > 0) NTT_TRADE(a, b, s - 1);                                           \
    }
#define NTT_DIT_STAGES(INNER)                                                                                   \
    UNROLL for (u32 s = 0; s < S; ++s) {                                                                        \
        if (s) NTT_TRADE(a, b, s - 1);                                                                          \
        BLOCK_THREADS(tid) {                                                                                    \
            const u32 j = map.tau(tid) & ((1u << s) - 1);                                                       \
            const fr_t x = PT(a, tid), y = j ? PT(b, tid) * stage_twiddle(INNER, inner_log, j, s) : PT(b, tid); \
            PT(a, tid) = x + y;                                                                                 \
            PT(b, tid) = x - y;                                                                                 \
        }                                                                                                       \
    }

// A DIF's output factor at bit-reversed position p: post_scale * h^bitrev_L(p) (either part optional; see
// dif_pass). No k = 0 shortcut: the host may have folded a scale into post_lo (post_lo[0] != 1).
DEV fr_t post_factors(fr_t x, u32 p, u32 log_n, const fr_t* post_lo, const fr_t* post_hi, const fr_t* post_scale) {
    if (post_scale) x = x * load_struct(post_scale);
    if (post_lo) x = x * tw_pow(post_lo, post_hi, bit_reverse(p, log_n));
    return x;
}

// Natural -> bit-reversed. Launch: 2^(L-S)/C blocks of C*2^(S-1) threads, C*2^S*32 bytes of shared
// memory; C = 2^logC <= 2^lo. `tile` is the block's share of the pass (its blockIdx.x in the kernels
// here), an argument so that a kernel may also loop over several with fewer blocks.
// Optional element-wise factors, fused so that coset shifts and the 1/n of inverse transforms cost no
// sweep of their own (null pointers: none): on load (host passes them to the first pass only) x_i *=
// pre_mul[i] (the H quotient's product A*B, ntt.py h_quotient) and x_i *= g^i with g^k = pre_lo[k mod
// 2^14] * pre_hi[k >> 14], i the natural index; on store (last pass only)
// x_p *= post_scale * h^bitrev_L(p), p the bit-reversed output position, i.e. the natural index of
// the value once the output is permuted (h^k = post_lo[k mod 2^14] * post_hi[k >> 14]; the host folds
// a scale into post_lo rather than pass both), and then x_p = post_sub[p] - x_p (the H quotient's last
// step, ntt.py h_quotient).
// FIXED_E: the block's element count when known at compile time (0: C << S at run time), so that the
// trade buffers sit at constant offsets (ntt_dif_pass_1024 / ntt_dit_pass_1024: the passes of 2^10
// elements a block, all but the smallest transforms' passes).
template <u32 FIXED_E, u32 FIXED_S = 0>
DEV void dif_pass(u32 tile, fr_t* data, u32 log_n, u32 lo, u32 S_in, u32 logC_in, u32 inner_log, const fr_t* inner,
                  const fr_t* tw_lo, const fr_t* tw_hi, const fr_t* tw_direct, const fr_t* pre_lo, const fr_t* pre_hi,
                  const fr_t* pre_mul, const fr_t* post_lo, const fr_t* post_hi, const fr_t* post_scale,
                  const fr_t* post_sub) {
    DYN_SMEM(u32, sm);
    // With FIXED_S (and FIXED_E) the stage count and the columns are constants: the stage loop unrolls.
    const u32 S = FIXED_S ? FIXED_S : S_in, logC = FIXED_S ? fixed_log2(FIXED_E) - FIXED_S : logC_in;
    const u32 C = 1u << logC, E = FIXED_E ? FIXED_E : C << S, T = E / 2;
    const u32 col0 = tile << logC;
    const u32 l0 = col0 & ((1u << lo) - 1);
    const u64 base = ((u64)(col0 >> lo) << (lo + S)) + l0;
    const pass_map map(S, logC);
    THREAD_POINT(a);
    THREAD_POINT(b);
    BLOCK_THREADS(tid) {
        const u32 c = tid & (C - 1), tau = map.tau(tid);
        const u32 i0 = (u32)(base + ((u64)tau << lo) + c), i1 = i0 + ((1u << (S - 1)) << lo);
        fr_t x = load_struct(data + i0), y = load_struct(data + i1);
        if (pre_mul) {
            x = x * load_struct(pre_mul + i0);
            y = y * load_struct(pre_mul + i1);
        }
        if (pre_lo) {
            if (i0) x = x * tw_pow(pre_lo, pre_hi, i0);
            y = y * tw_pow(pre_lo, pre_hi, i1);
        }
        PT(a, tid) = x;
        PT(b, tid) = y;
    }
    u32 k = 0;
    NTT_DIF_STAGES(inner);
    BLOCK_THREADS(tid) {
        const u32 c = tid & (C - 1), tau = map.tau(tid);
        UNROLL for (u32 h = 0; h < 2; ++h) {
            const u32 t = 2 * tau + h;
            fr_t x = h ? PT(b, tid) : PT(a, tid);
            if (lo) {
                const u32 kk = (l0 + c) * bit_reverse(t, S);
                if (kk) x = x * pass_twiddle(tw_lo, tw_hi, tw_direct, kk, log_n - lo - S);
            }
            const u32 p = (u32)(base + ((u64)t << lo) + c);
            x = post_factors(x, p, log_n, post_lo, post_hi, post_scale);
            if (post_sub) x = load_struct(post_sub + p) - x;
            store_struct(data + p, x);
        }
    }
}

#define NTT_DIF_PARAMS                                                                                      \
    fr_t *data, u32 log_n, u32 lo, u32 S, u32 logC, u32 inner_log, const fr_t *inner, const fr_t *tw_lo,    \
        const fr_t *tw_hi, const fr_t *tw_direct, const fr_t *pre_lo, const fr_t *pre_hi, const fr_t *pre_mul,    \
        const fr_t *post_lo, const fr_t *post_hi, const fr_t *post_scale, const fr_t *post_sub
#define NTT_DIF_ARGS                                                                                             \
    data, log_n, lo, S, logC, inner_log, inner, tw_lo, tw_hi, tw_direct, pre_lo, pre_hi, pre_mul, post_lo, post_hi, \
        post_scale, post_sub
BLOCK_KERNEL LAUNCH_BOUNDS(512) ntt_dif_pass(NTT_DIF_PARAMS) { dif_pass<0>(blockIdx.x, NTT_DIF_ARGS); }
// The passes of 2^10 elements at three blocks (1536 threads) an SM: 40 registers and a few spilled words
// beat two blocks at 54 registers without spills on an H200
// (benchmarks/results/cuda-ntt-register-passes-h200-2026-12-01.json; history: benchmarks/HISTORY.md).
// Each stage count 7..10 of a 2^10-point pass has its own copy with the stage loop unrolled (other counts
// take the generic loop): the trade kinds, masks and twiddle strides become constants, which makes the
// passes faster on an H200 (benchmarks/results/cuda-ntt-unrolled-h200-2026-12-01.json; history:
// benchmarks/HISTORY.md).
// The price is code: nvcc takes 51 s for this file instead of 9, and the kernels are 5-6x longer.
#define NTT_PASS_1024_BY_STAGES(pass, TILE, ARGS)      \
    switch (S) {                                       \
        case 10: pass<1024, 10>(TILE, ARGS); break;    \
        case 9: pass<1024, 9>(TILE, ARGS); break;      \
        case 8: pass<1024, 8>(TILE, ARGS); break;      \
        case 7: pass<1024, 7>(TILE, ARGS); break;      \
        default: pass<1024>(TILE, ARGS);               \
    }
BLOCK_KERNEL LAUNCH_BOUNDS2(512, 3) ntt_dif_pass_1024(NTT_DIF_PARAMS) {
    NTT_PASS_1024_BY_STAGES(dif_pass, blockIdx.x, NTT_DIF_ARGS)
}

// Bit-reversed -> natural; same launch shape as ntt_dif_pass, passes from lo = 0 upwards.
template <u32 FIXED_E, u32 FIXED_S = 0>
DEV void dit_pass(u32 tile, fr_t* data, u32 log_n, u32 lo, u32 S_in, u32 logC_in, u32 inner_log, const fr_t* inner,
                  const fr_t* tw_lo, const fr_t* tw_hi, const fr_t* tw_direct) {
    DYN_SMEM(u32, sm);
    // With FIXED_S (and FIXED_E) the stage count and the columns are constants: the stage loop unrolls.
    const u32 S = FIXED_S ? FIXED_S : S_in, logC = FIXED_S ? fixed_log2(FIXED_E) - FIXED_S : logC_in;
    const u32 C = 1u << logC, E = FIXED_E ? FIXED_E : C << S, T = E / 2;
    const u32 col0 = tile << logC;
    const u32 l0 = col0 & ((1u << lo) - 1);
    const u64 base = ((u64)(col0 >> lo) << (lo + S)) + l0;
    const pass_map map(S, logC);
    THREAD_POINT(a);
    THREAD_POINT(b);
    BLOCK_THREADS(tid) {
        const u32 c = tid & (C - 1), tau = map.tau(tid);
        UNROLL for (u32 h = 0; h < 2; ++h) {
            const u32 t = 2 * tau + h;
            fr_t x = load_struct(data + base + ((u64)t << lo) + c);
            if (lo) {
                const u32 kk = (l0 + c) * bit_reverse(t, S);
                if (kk) x = x * pass_twiddle(tw_lo, tw_hi, tw_direct, kk, log_n - lo - S);
            }
            if (h) PT(b, tid) = x;
            else PT(a, tid) = x;
        }
    }
    u32 k = 0;
    NTT_DIT_STAGES(inner);
    BLOCK_THREADS(tid) {
        const u32 c = tid & (C - 1), tau = map.tau(tid);
        const u64 i0 = base + ((u64)tau << lo) + c;
        store_struct(data + i0, PT(a, tid));
        store_struct(data + i0 + ((u64)(1u << (S - 1)) << lo), PT(b, tid));
    }
}

#define NTT_DIT_PARAMS                                                                                   \
    fr_t *data, u32 log_n, u32 lo, u32 S, u32 logC, u32 inner_log, const fr_t *inner, const fr_t *tw_lo, \
        const fr_t *tw_hi, const fr_t *tw_direct
#define NTT_DIT_ARGS data, log_n, lo, S, logC, inner_log, inner, tw_lo, tw_hi, tw_direct
BLOCK_KERNEL LAUNCH_BOUNDS2(512, 2) ntt_dit_pass(NTT_DIT_PARAMS) { dit_pass<0>(blockIdx.x, NTT_DIT_ARGS); }
// See ntt_dif_pass_1024.
BLOCK_KERNEL LAUNCH_BOUNDS2(512, 3) ntt_dit_pass_1024(NTT_DIT_PARAMS) {
    NTT_PASS_1024_BY_STAGES(dit_pass, blockIdx.x, NTT_DIT_ARGS)
}

// An inverse DIF's last pass and a forward DIT's first pass over the same bits [0, S) (lo = 0, one
// column), as one kernel: after the DIF's stages a thread holds rows (2 tau, 2 tau + 1), which is what
// the DIT's load would give it, so the points stay in registers between the two and the transform to a
// coset (ntt.py to_coset_evaluations) sweeps memory once less. The DIF's output factors apply in
// between, at the positions where the DIF would have stored. Launch: 2^(L-S) blocks of 2^(S-1) threads,
// 2^S * 32 bytes of shared memory.
template <u32 FIXED_S = 0>
DEV void dif_dit_pass(u32 tile, fr_t* data, u32 log_n, u32 S_in, u32 inner_log, const fr_t* inner_dif,
                      const fr_t* inner_dit, const fr_t* post_lo, const fr_t* post_hi, const fr_t* post_scale) {
    DYN_SMEM(u32, sm);
    const u32 S = FIXED_S ? FIXED_S : S_in, T = 1u << (S - 1);
    const u64 base = (u64)tile << S;
    const pass_map map(S, 0);
    THREAD_POINT(a);
    THREAD_POINT(b);
    BLOCK_THREADS(tid) {
        const u64 i0 = base + map.tau(tid);
        PT(a, tid) = load_struct(data + i0);
        PT(b, tid) = load_struct(data + i0 + T);
    }
    u32 k = 0;
    NTT_DIF_STAGES(inner_dif);
    BLOCK_THREADS(tid) {
        const u32 p = (u32)(base + 2 * map.tau(tid));
        UNROLL for (u32 h = 0; h < 2; ++h) {
            const fr_t x = post_factors(h ? PT(b, tid) : PT(a, tid), p + h, log_n, post_lo, post_hi, post_scale);
            if (h) PT(b, tid) = x;
            else PT(a, tid) = x;
        }
    }
    NTT_DIT_STAGES(inner_dit);
    BLOCK_THREADS(tid) {
        const u64 i0 = base + map.tau(tid);
        store_struct(data + i0, PT(a, tid));
        store_struct(data + i0 + T, PT(b, tid));
    }
}

#define NTT_DIF_DIT_PARAMS                                                                                      \
    fr_t *data, u32 log_n, u32 S, u32 inner_log, const fr_t *inner_dif, const fr_t *inner_dit, const fr_t *post_lo, \
        const fr_t *post_hi, const fr_t *post_scale
#define NTT_DIF_DIT_ARGS data, log_n, S, inner_log, inner_dif, inner_dit, post_lo, post_hi, post_scale
// The stage counts of the larger transforms' last pass (2^27: 9, 2^24: 8, 2^20: 10) unrolled, as the
// 2^10-element passes are (see there).
BLOCK_KERNEL LAUNCH_BOUNDS(512) ntt_dif_dit_pass(NTT_DIF_DIT_PARAMS) {
    switch (S) {
        case 10: dif_dit_pass<10>(blockIdx.x, NTT_DIF_DIT_ARGS); break;
        case 9: dif_dit_pass<9>(blockIdx.x, NTT_DIF_DIT_ARGS); break;
        case 8: dif_dit_pass<8>(blockIdx.x, NTT_DIF_DIT_ARGS); break;
        default: dif_dit_pass<0>(blockIdx.x, NTT_DIF_DIT_ARGS);
    }
}

// In-place bit-reversal permutation; each pair is swapped by its smaller index.
KERNEL ntt_bitrev(fr_t* data, u32 log_n) {
    const u32 i = global_tid();
    if (i >= (1u << log_n)) return;
    const u32 j = bit_reverse(i, log_n);
    if (i < j) {
        const fr_t a = load_struct(data + i), b = load_struct(data + j);
        store_struct(data + i, b);
        store_struct(data + j, a);
    }
}

// The same permutation by tiles, for log_n >= 2 * NTT_BR_K: index i = (a, m, b), a the top K bits, b
// the bottom K bits, m the middle ones, goes to (rev(b), rev(m), rev(a)). One block swaps the tile of
// middle value m (all a and b: 2^K rows of 2^K contiguous points, 512-byte runs) with the tile of rev(m),
// transposing both through shared memory, so every global access is part of a contiguous run where
// the element-wise kernel above reads and writes one scattered 32-byte point per thread. Blocks whose m
// exceeds rev(m) have nothing to do (their pair is done by the other block). Launch: 2^(log_n - 2K)
// blocks of 2^(2K) threads, NTT_BR_SMEM bytes of shared memory.
#define NTT_BR_K 4
#define NTT_BR_T (1u << (2 * NTT_BR_K))                  // points per tile = threads per block
#define NTT_BR_STRIDE ((1u << NTT_BR_K) * ((1u << NTT_BR_K) + 1))  // limb stride: rows padded by one word
#define NTT_BR_SMEM (2 * 8 * NTT_BR_STRIDE * 4)

BLOCK_KERNEL LAUNCH_BOUNDS(NTT_BR_T) ntt_bitrev_tiled(fr_t* data, u32 log_n) {
    DYN_SMEM(u32, sm);
    const u32 K = NTT_BR_K, R = 1u << K, mid = log_n - 2 * K;
    const u32 m = blockIdx.x, m2 = bit_reverse(m, mid);
    if (m > m2) return;
    // tile q (0: middle m, 1: middle m2), row a, column b: limb l at sm[(q * 8 + l) * STRIDE + a * (R + 1) + b]
    BLOCK_THREADS(tid) {
        const u32 a = tid >> K, b = tid & (R - 1);
        const fr_t x = load_struct(data + (((u64)a << (log_n - K)) | ((u64)m << K) | b));
        const fr_t y = load_struct(data + (((u64)a << (log_n - K)) | ((u64)m2 << K) | b));
        UNROLL for (int l = 0; l < 8; ++l) {
            sm[l * NTT_BR_STRIDE + a * (R + 1) + b] = x.v[l];
            sm[(8 + l) * NTT_BR_STRIDE + a * (R + 1) + b] = y.v[l];
        }
    }
    SYNC();
    BLOCK_THREADS(tid) {
        // Position (a, b) of tile m2 receives point (rev(b), rev(a)) of tile m, and vice versa.
        const u32 a = tid >> K, b = tid & (R - 1);
        const u32 src = bit_reverse(b, K) * (R + 1) + bit_reverse(a, K);
        fr_t x, y;
        UNROLL for (int l = 0; l < 8; ++l) {
            x.v[l] = sm[l * NTT_BR_STRIDE + src];
            y.v[l] = sm[(8 + l) * NTT_BR_STRIDE + src];
        }
        store_struct(data + (((u64)a << (log_n - K)) | ((u64)m2 << K) | b), x);
        store_struct(data + (((u64)a << (log_n - K)) | ((u64)m << K) | b), y);
    }
}

// a[i] *= scale * g^k with k = i (or bitrev_L(i) when `bitrev`), g^k = g_lo[k mod 2^14] * g_hi[k >> 14].
// Either part may be absent (null table, null scale). This is the coset shift and the 1/n of
// inverse transforms, one sweep over memory.
KERNEL fr_mul_powers(fr_t* a, u32 n, u32 log_n, const fr_t* g_lo, const fr_t* g_hi, const fr_t* scale,
                     u32 bitrev) {
    const u32 i = global_tid();
    if (i >= n) return;
    fr_t x = load_struct(a + i);
    if (g_lo) {
        const u32 k = bitrev ? bit_reverse(i, log_n) : i;
        if (k) x = x * tw_pow(g_lo, g_hi, k);
    }
    if (scale) x = x * load_struct(scale);
    store_struct(a + i, x);
}

// a[i] = (a[i] * b[i] - c[i]) * z_inv (c and z_inv optional): the H polynomial's product on a coset.
KERNEL fr_h_combine(fr_t* a, const fr_t* b, const fr_t* c, u32 n, const fr_t* z_inv) {
    const u32 i = global_tid();
    if (i >= n) return;
    fr_t x = load_struct(a + i) * load_struct(b + i);
    if (c) x = x - load_struct(c + i);
    if (z_inv) x = x * load_struct(z_inv);
    store_struct(a + i, x);
}
