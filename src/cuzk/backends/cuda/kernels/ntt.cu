// Number-theoretic transforms over Fr, in place on (n, 8) Montgomery arrays, n = 2^L <= 2^28.
//
// A radix-2 transform of 2^L points is cut into passes of S <= 10 stages each; one block runs C
// independent sub-transforms of 2^S points (stride 2^lo apart, C neighbouring columns so loads
// are contiguous) in shared memory, then writes back: three sweeps over memory at 2^27. The stages
// on the lowest pass bits run in registers, exchanging elements by warp shuffles (warp_stages).
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

// The lowest stages of a pass run in registers, one warp on 2^W consecutive rows of all C columns
// (lane = (row offset ti) * C + column, two elements a lane, W = 6 - logC), exchanging halves by
// shuffles: no shared memory round trip and no block barrier for those stages. At stage s a lane holds
// rows (t, t + 2^s), t = (ti mod 2^s) + ((ti >> s) << (s + 1)); between stages s and s - 1 the lanes
// differing in bit s - 1 of ti swap one element each (the swap is its own inverse, so DIT uses it going
// up). The host emulator runs blocks thread by thread and cannot shuffle: there W = 0.
DEV u32 warp_stages(u32 S, u32 logC) {
#ifdef CUZK_HOST_EMU
    return 0;
#else
    return logC <= 5 && 6 - logC <= S ? 6 - logC : 0;
#endif
}

#ifndef CUZK_HOST_EMU
// Lanes whose ti has bit k clear keep a and take the partner's a as b; the others keep b and take the
// partner's b as a.
DEV void warp_exchange(fr_t& a, fr_t& b, u32 ti, u32 k, u32 logC) {
    const bool up = (ti >> k) & 1u;
    const u32 dist = (1u << k) << logC;
    UNROLL for (int q = 0; q < 8; ++q) {
        const u32 r = __shfl_xor_sync(0xffffffffu, up ? a.v[q] : b.v[q], dist);
        if (up) a.v[q] = r;
        else b.v[q] = r;
    }
}
#endif

// Shared memory holds the block's E elements limb-major (limb q of element e at q*E + e), so a
// warp touching consecutive elements touches consecutive banks.
DEV fr_t sm_get(const u32* sm, u32 E, u32 e) {
    fr_t r;
    UNROLL for (int q = 0; q < 8; ++q) r.v[q] = sm[q * E + e];
    return r;
}
DEV void sm_put(u32* sm, u32 E, u32 e, const fr_t& x) {
    UNROLL for (int q = 0; q < 8; ++q) sm[q * E + e] = x.v[q];
}

// Natural -> bit-reversed. Launch: 2^(L-S)/C blocks of C*2^(S-1) threads, C*2^S*32 bytes of shared
// memory; C = 2^logC <= 2^lo.
// Optional element-wise factors, fused so that coset shifts and the 1/n of inverse transforms cost no
// sweep of their own (null pointers: none): on load (host passes them to the first pass only) x_i *=
// g^i with g^k = pre_lo[k mod 2^14] * pre_hi[k >> 14], i the natural index; on store (last pass only)
// x_p *= post_scale * h^bitrev_L(p), p the bit-reversed output position, i.e. the natural index of
// the value once the output is permuted (h^k = post_lo[k mod 2^14] * post_hi[k >> 14]; the host folds
// a scale into post_lo rather than pass both).
// FIXED_E: the block's element count when known at compile time (0: C << S at run time). The
// shared-memory limb stride is then an immediate, so the eight limbs of an element sit at constant
// offsets from one address instead of eight computed ones (ntt_dif_pass_1024 / ntt_dit_pass_1024: the
// passes of 2^10 elements a block, all but the smallest transforms' passes).
template <u32 FIXED_E>
DEV void dif_pass(fr_t* data, u32 log_n, u32 lo, u32 S, u32 logC, u32 inner_log, const fr_t* inner,
                  const fr_t* tw_lo, const fr_t* tw_hi, const fr_t* tw_direct, const fr_t* pre_lo, const fr_t* pre_hi,
                  const fr_t* post_lo, const fr_t* post_hi, const fr_t* post_scale) {
    DYN_SMEM(u32, sm);
    const u32 C = 1u << logC, E = FIXED_E ? FIXED_E : C << S;
    const u32 col0 = blockIdx.x << logC;
    const u32 l0 = col0 & ((1u << lo) - 1);
    const u64 base = ((u64)(col0 >> lo) << (lo + S)) + l0;
    BLOCK_THREADS(tid) {
        for (u32 e = tid; e < E; e += blockDim.x) {
            const u32 i = (u32)(base + ((u64)(e >> logC) << lo) + (e & (C - 1)));
            fr_t x = load_struct(data + i);
            if (pre_lo && i) x = x * tw_pow(pre_lo, pre_hi, i);
            sm_put(sm, E, e, x);
        }
    }
    SYNC();
    const u32 W = warp_stages(S, logC);
    for (int s = (int)S - 1; s >= (int)W; --s) {
        BLOCK_THREADS(tid) {
            for (u32 q = tid; q < E / 2; q += blockDim.x) {
                const u32 c = q & (C - 1), r = q >> logC;
                const u32 j = r & ((1u << s) - 1);
                const u32 t0 = ((r >> s) << (s + 1)) | j;
                const u32 e0 = (t0 << logC) | c, e1 = ((t0 + (1u << s)) << logC) | c;
                const fr_t u = sm_get(sm, E, e0), v = sm_get(sm, E, e1);
                sm_put(sm, E, e0, u + v);
                fr_t d = u - v;
                if (j) d = d * load_struct(inner + (j << (inner_log - 1 - s)));
                sm_put(sm, E, e1, d);
            }
        }
        SYNC();
    }
#ifndef CUZK_HOST_EMU
    if (W) {
        // Stages W-1 .. 0 in registers (see warp_stages): the warp's 2^W rows, enter as pairs (ti, ti + 2^(W-1)).
        const u32 lane = threadIdx.x & 31, c = lane & (C - 1), ti = lane >> logC;
        const u32 tb = (threadIdx.x >> 5) << W;
        fr_t a = sm_get(sm, E, ((tb + ti) << logC) | c);
        fr_t b = sm_get(sm, E, ((tb + ti + (1u << (W - 1))) << logC) | c);
        for (int s = (int)W - 1;; --s) {
            const u32 j = ti & ((1u << s) - 1);
            fr_t d = a - b;
            a = a + b;
            if (j) d = d * load_struct(inner + (j << (inner_log - 1 - s)));
            b = d;
            if (s == 0) break;
            warp_exchange(a, b, ti, (u32)s - 1, logC);
        }
        // After stage 0 the lane holds rows (2 ti, 2 ti + 1).
        sm_put(sm, E, ((tb + 2 * ti) << logC) | c, a);
        sm_put(sm, E, ((tb + 2 * ti + 1) << logC) | c, b);
        SYNC();
    }
#endif
    BLOCK_THREADS(tid) {
        for (u32 e = tid; e < E; e += blockDim.x) {
            const u32 c = e & (C - 1), t = e >> logC;
            fr_t x = sm_get(sm, E, e);
            if (lo) {
                const u32 k = (l0 + c) * bit_reverse(t, S);
                if (k) x = x * pass_twiddle(tw_lo, tw_hi, tw_direct, k, log_n - lo - S);
            }
            const u32 p = (u32)(base + ((u64)t << lo) + c);
            if (post_scale) x = x * load_struct(post_scale);
            // No k = 0 shortcut: the host may have folded a scale into post_lo (post_lo[0] != 1).
            if (post_lo) x = x * tw_pow(post_lo, post_hi, bit_reverse(p, log_n));
            store_struct(data + p, x);
        }
    }
}

#define NTT_DIF_PARAMS                                                                                      \
    fr_t *data, u32 log_n, u32 lo, u32 S, u32 logC, u32 inner_log, const fr_t *inner, const fr_t *tw_lo,    \
        const fr_t *tw_hi, const fr_t *tw_direct, const fr_t *pre_lo, const fr_t *pre_hi, const fr_t *post_lo, \
        const fr_t *post_hi, const fr_t *post_scale
#define NTT_DIF_ARGS \
    data, log_n, lo, S, logC, inner_log, inner, tw_lo, tw_hi, tw_direct, pre_lo, pre_hi, post_lo, post_hi, post_scale
BLOCK_KERNEL LAUNCH_BOUNDS(512) ntt_dif_pass(NTT_DIF_PARAMS) { dif_pass<0>(NTT_DIF_ARGS); }
// The passes of 2^10 elements at three blocks (1536 threads) an SM: 40 registers and a 16-byte stack
// instead of 60 / 54 registers at two blocks. More warps to hide the products' dependent chains: on an
// H200 the 2^27 transform went 51.65 -> 49.49 ms (forward), DIT passes 47.25 -> 45.86, outputs equal.
BLOCK_KERNEL LAUNCH_BOUNDS2(512, 3) ntt_dif_pass_1024(NTT_DIF_PARAMS) { dif_pass<1024>(NTT_DIF_ARGS); }

// Bit-reversed -> natural; same launch shape as ntt_dif_pass, passes from lo = 0 upwards.
template <u32 FIXED_E>
DEV void dit_pass(fr_t* data, u32 log_n, u32 lo, u32 S, u32 logC, u32 inner_log, const fr_t* inner,
                  const fr_t* tw_lo, const fr_t* tw_hi, const fr_t* tw_direct) {
    DYN_SMEM(u32, sm);
    const u32 C = 1u << logC, E = FIXED_E ? FIXED_E : C << S;
    const u32 col0 = blockIdx.x << logC;
    const u32 l0 = col0 & ((1u << lo) - 1);
    const u64 base = ((u64)(col0 >> lo) << (lo + S)) + l0;
    BLOCK_THREADS(tid) {
        for (u32 e = tid; e < E; e += blockDim.x) {
            const u32 c = e & (C - 1), t = e >> logC;
            fr_t x = load_struct(data + base + ((u64)t << lo) + c);
            if (lo) {
                const u32 k = (l0 + c) * bit_reverse(t, S);
                if (k) x = x * pass_twiddle(tw_lo, tw_hi, tw_direct, k, log_n - lo - S);
            }
            sm_put(sm, E, e, x);
        }
    }
    SYNC();
    const u32 W = warp_stages(S, logC);
#ifndef CUZK_HOST_EMU
    if (W) {
        // Stages 0 .. W-1 in registers (see warp_stages): enter as row pairs (2 ti, 2 ti + 1), leave as
        // (ti, ti + 2^(W-1)).
        const u32 lane = threadIdx.x & 31, c = lane & (C - 1), ti = lane >> logC;
        const u32 tb = (threadIdx.x >> 5) << W;
        fr_t a = sm_get(sm, E, ((tb + 2 * ti) << logC) | c);
        fr_t b = sm_get(sm, E, ((tb + 2 * ti + 1) << logC) | c);
        for (u32 s = 0;; ++s) {
            const u32 j = ti & ((1u << s) - 1);
            if (j) b = b * load_struct(inner + (j << (inner_log - 1 - s)));
            const fr_t u = a;
            a = u + b;
            b = u - b;
            if (s + 1 == W) break;
            warp_exchange(a, b, ti, s, logC);
        }
        sm_put(sm, E, ((tb + ti) << logC) | c, a);
        sm_put(sm, E, ((tb + ti + (1u << (W - 1))) << logC) | c, b);
        SYNC();
    }
#endif
    for (u32 s = W; s < S; ++s) {
        BLOCK_THREADS(tid) {
            for (u32 q = tid; q < E / 2; q += blockDim.x) {
                const u32 c = q & (C - 1), r = q >> logC;
                const u32 j = r & ((1u << s) - 1);
                const u32 t0 = ((r >> s) << (s + 1)) | j;
                const u32 e0 = (t0 << logC) | c, e1 = ((t0 + (1u << s)) << logC) | c;
                const fr_t u = sm_get(sm, E, e0);
                fr_t v = sm_get(sm, E, e1);
                if (j) v = v * load_struct(inner + (j << (inner_log - 1 - s)));
                sm_put(sm, E, e0, u + v);
                sm_put(sm, E, e1, u - v);
            }
        }
        SYNC();
    }
    BLOCK_THREADS(tid) {
        for (u32 e = tid; e < E; e += blockDim.x)
            store_struct(data + base + ((u64)(e >> logC) << lo) + (e & (C - 1)), sm_get(sm, E, e));
    }
}

#define NTT_DIT_PARAMS                                                                                   \
    fr_t *data, u32 log_n, u32 lo, u32 S, u32 logC, u32 inner_log, const fr_t *inner, const fr_t *tw_lo, \
        const fr_t *tw_hi, const fr_t *tw_direct
#define NTT_DIT_ARGS data, log_n, lo, S, logC, inner_log, inner, tw_lo, tw_hi, tw_direct
BLOCK_KERNEL LAUNCH_BOUNDS2(512, 2) ntt_dit_pass(NTT_DIT_PARAMS) { dit_pass<0>(NTT_DIT_ARGS); }
BLOCK_KERNEL LAUNCH_BOUNDS2(512, 3) ntt_dit_pass_1024(NTT_DIT_PARAMS) { dit_pass<1024>(NTT_DIT_ARGS); }  // see ntt_dif_pass_1024

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

// a[i] = (a[i] * b[i] - c[i]) * z_inv (z_inv optional): the quotient of the H polynomial on a coset.
KERNEL fr_h_combine(fr_t* a, const fr_t* b, const fr_t* c, u32 n, const fr_t* z_inv) {
    const u32 i = global_tid();
    if (i >= n) return;
    fr_t x = load_struct(a + i) * load_struct(b + i) - load_struct(c + i);
    if (z_inv) x = x * load_struct(z_inv);
    store_struct(a + i, x);
}
