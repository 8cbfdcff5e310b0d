// Fixed-base scalar multiplication for parameter generation: out[i] = k_i * g for one base g and
// millions of scalars k_i, written straight as blstrs uncompressed bytes (what a .params file holds).
//
// Method (the CPU's, cuzk.curve.fixed_base): each scalar splits into W = ceil(256/w) signed w-bit
// digits d in (-2^(w-1), 2^(w-1)], k = sum d_i 2^(w i), and the table holds
// table[i][j-1] = j * 2^(w i) * g (affine, Montgomery) for j = 1..2^(w-1); negating an affine point
// is free, so a scalar costs at most W mixed additions and no doubling. One thread per scalar; the
// digits are recoded on the fly from the scalar's limbs.
//
// The affine conversion needs an inversion (Fp's `inv()`: a binary GCD since 84d8e39, ~570 field
// products by Fermat before, when the batch of 8 was measured), comparable to the accumulation
// itself (G1, w = 13: 20 mixed additions of 10 products), so each thread handles `batch` scalars and
// shares one inversion among them (Montgomery's trick over the products ZZ*ZZZ: 1/(ZZ*ZZZ) gives
// both 1/ZZ = ZZZ/(ZZ*ZZZ) and 1/ZZZ = ZZ/(ZZ*ZZZ)).
//
// Scalars are checked canonical (< r) here, so the host need not scan billions of limbs: the
// lowest offending index goes to *bad (atomicMin) and that scalar yields nothing (its digits would
// index past the table).
#pragma once
#include "ec.cuh"

#ifdef CUZK_HOST_EMU
DEV u32 atomicMin(u32* p, u32 v) { const u32 old = *p; if (v < old) *p = v; return old; }
#endif

#define FB_MAX_BATCH 16  // scalars per thread sharing one inversion (the launch's `batch` is <= this)

// r, the order of G1 and G2, as little-endian 64-bit limbs.
CONSTANT u64 FB_R[4] = {0xffffffff00000001ull, 0x53bda402fffe5bfeull, 0x3339d80809a1d805ull,
                        0x73eda753299d7d48ull};

DEV u32 fb_bswap(u32 x) { return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24); }

// Montgomery fp_t -> 48 big-endian bytes as twelve words (the inverse of fp_from_be_words).
DEV void fb_put_fp(u32* w, const fp_t& a) {
    const fp_t c = a.from_mont();
    UNROLL for (int j = 0; j < 12; ++j) w[j] = fb_bswap(c.v[11 - j]);
}

// blstrs uncompressed encodings: G1 x || y, G2 x.c1 || x.c0 || y.c1 || y.c0.
DEV void fb_put_affine(u32* row, const fpc_t& x, const fpc_t& y) {
    fb_put_fp(row, x.x);
    fb_put_fp(row + 12, y.x);
}
DEV void fb_put_affine(u32* row, const fp2_t& x, const fp2_t& y) {
    fb_put_fp(row, x.c1);
    fb_put_fp(row + 12, x.c0);
    fb_put_fp(row + 24, y.c1);
    fb_put_fp(row + 36, y.c0);
}

template <class F>
DEV void fb_put_infinity(u32* row) {
    constexpr int words = sizeof(F) / 2;  // two coordinates of sizeof(F) bytes = sizeof(F)/2 words
    row[0] = 0x40u;                       // byte 0 (little-endian word) = the infinity flag
    UNROLL for (int j = 1; j < words; ++j) row[j] = 0;
}

DEV bool fb_canonical(const u64* s) {
    for (int i = 3; i >= 0; --i) {
        if (s[i] != FB_R[i]) return s[i] < FB_R[i];
    }
    return false;  // equal to r
}

// k * g from the window table; the identity for k = 0.
template <class F>
DEV xyzz_t<F> fb_accumulate(const affine_t<F>* table, u32 w, u32 windows, const u64* s) {
    const int half = 1 << (w - 1);
    const int full = 1 << w;
    const u64 mask = ((u64)1 << w) - 1;
    xyzz_t<F> acc = xyzz_t<F>::inf();
    int carry = 0;
    for (u32 i = 0; i < windows; ++i) {
        const u32 bit = i * w;
        const u32 limb = bit >> 6, off = bit & 63;
        u64 v = s[limb] >> off;
        if (off + w > 64 && limb < 3) v |= s[limb + 1] << (64 - off);
        int d = (int)(v & mask) + carry;
        carry = 0;
        if (d > half && i + 1 < windows) {  // signed digit; the top one stays <= half since k < r < 2^255
            d -= full;
            carry = 1;
        }
        if (d != 0) {
            const u32 j = (u32)(d > 0 ? d - 1 : -d - 1);
            affine_t<F> q = load_struct(table + (u64)i * half + j);
            if (d < 0) q = q.neg();
            acc.add_affine(q);
        }
    }
    return acc;
}

// Block b covers scalars [b * batch * blockDim, (b + 1) * batch * blockDim); thread t of it takes
// every blockDim-th one from t, so a warp reads and writes consecutive rows.
template <class F>
DEV void fixed_base(const affine_t<F>* table, u32 w, u32 windows, const u64* scalars, u32 n, u32 batch,
                    u32 index_base, u32* out, u32* bad) {
    constexpr int words = sizeof(F) / 2;
    xyzz_t<F> acc[FB_MAX_BATCH];
    F prefix[FB_MAX_BATCH];
    const u64 first = (u64)blockIdx.x * batch * blockDim.x + threadIdx.x;
    F run = F::one();
    for (u32 k = 0; k < batch; ++k) {
        const u64 i = first + (u64)k * blockDim.x;
        xyzz_t<F> a = xyzz_t<F>::inf();
        if (i < n) {
            u64 s[4];
            UNROLL for (int l = 0; l < 4; ++l) s[l] = scalars[i * 4 + l];
            if (fb_canonical(s)) a = fb_accumulate<F>(table, w, windows, s);
            else atomicMin(bad, index_base + (u32)i);
        }
        acc[k] = a;
        prefix[k] = run;  // product of the non-identity ZZ*ZZZ before k
        if (!a.is_inf()) run = run * (a.ZZ * a.ZZZ);
    }
    F inv = run.inv();  // 1 / (product of all of them)
    for (int k = (int)batch - 1; k >= 0; --k) {
        const u64 i = first + (u64)k * blockDim.x;
        if (i >= n) continue;
        u32* row = out + i * words;
        const xyzz_t<F> a = acc[k];
        if (a.is_inf()) {
            fb_put_infinity<F>(row);
            continue;
        }
        const F t = a.ZZ * a.ZZZ;
        const F t_inv = inv * prefix[k];
        inv = inv * t;
        fb_put_affine(row, a.X * (t_inv * a.ZZZ), a.Y * (t_inv * a.ZZ));
    }
}

KERNEL LAUNCH_BOUNDS(256) g1_fixed_base(const g1_affine* table, u32 w, u32 windows, const u64* scalars, u32 n,
                                        u32 batch, u32 index_base, u32* out, u32* bad) {
    fixed_base<fpc_t>(table, w, windows, scalars, n, batch, index_base, out, bad);
}

KERNEL LAUNCH_BOUNDS(256) g2_fixed_base(const g2_affine* table, u32 w, u32 windows, const u64* scalars, u32 n,
                                        u32 batch, u32 index_base, u32* out, u32* bad) {
    fixed_base<fp2_t>(table, w, windows, scalars, n, batch, index_base, out, bad);
}
