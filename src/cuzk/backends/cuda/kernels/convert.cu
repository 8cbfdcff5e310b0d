// Conversions between the host encodings and the device's Montgomery limbs.
//
// blstrs uncompressed points (what .params files and G1Bases/G2Bases.raw hold): G1 is x || y, each
// 48 bytes big-endian; G2 is x.c1 || x.c0 || y.c1 || y.c0; infinity is flag 0x40 in byte 0 with
// everything else zero. Device affine points are (x, y) in Montgomery form, G2 as (c0, c1) pairs,
// infinity as (0, 0). Scalars travel as canonical little-endian limbs (CPU (n, 4) uint64 arrays).
#pragma once
#include "ec.cuh"
#include "fr.cuh"

// 48 big-endian bytes, read as twelve little-endian words w[0..11] -> Montgomery fp_t.
DEV fp_t fp_from_be_words(const u32* w) {
    fp_t r;
    UNROLL for (int j = 0; j < 12; ++j) {
        const u32 x = w[11 - j];
        r.v[j] = (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
    }
    return r.to_mont();
}

KERNEL g1_from_blstrs(const u32* raw, u32 n, g1_affine* out) {
    const u32 i = global_tid();
    if (i >= n) return;
    const u32* w = raw + (u64)i * 24;
    g1_affine p;
    if (w[0] & 0x40u) {
        p.x = fpc_t::zero(); p.y = fpc_t::zero();
    } else {
        p.x = {fp_from_be_words(w)};
        p.y = {fp_from_be_words(w + 12)};
    }
    out[i] = p;
}

KERNEL g2_from_blstrs(const u32* raw, u32 n, g2_affine* out) {
    const u32 i = global_tid();
    if (i >= n) return;
    const u32* w = raw + (u64)i * 48;
    g2_affine p;
    if (w[0] & 0x40u) {
        p.x = fp2_t::zero(); p.y = fp2_t::zero();
    } else {
        p.x.c1 = fp_from_be_words(w);
        p.x.c0 = fp_from_be_words(w + 12);
        p.y.c1 = fp_from_be_words(w + 24);
        p.y.c0 = fp_from_be_words(w + 36);
    }
    out[i] = p;
}

// Fr vectors in place: canonical <-> Montgomery.
KERNEL fr_to_mont(fr_t* a, u32 n) {
    const u32 i = global_tid();
    if (i < n) a[i] = a[i].to_mont();
}

KERNEL fr_from_mont(fr_t* a, u32 n) {
    const u32 i = global_tid();
    if (i < n) a[i] = a[i].from_mont();
}

// Test hooks for the field and curve arithmetic: elementwise op over Montgomery inputs.
// op: 0 add, 1 sub, 2 mul, 3 sqr, 4 neg, 5 inv.
template <class F>
DEV void field_op(u32 op, const F* a, const F* b, F* out, u32 n) {
    const u32 i = global_tid();
    if (i >= n) return;
    const F x = a[i], y = b[i];
    F r;
    switch (op) {
        case 0: r = x + y; break;
        case 1: r = x - y; break;
        case 2: r = x * y; break;
        case 3: r = x.sqr(); break;
        case 4: r = -x; break;
        default: r = x.inv(); break;
    }
    out[i] = r;
}

KERNEL fp_test_op(u32 op, const fp_t* a, const fp_t* b, fp_t* out, u32 n) { field_op<fp_t>(op, a, b, out, n); }
KERNEL fr_test_op(u32 op, const fr_t* a, const fr_t* b, fr_t* out, u32 n) { field_op<fr_t>(op, a, b, out, n); }
KERNEL fp2_test_op(u32 op, const fp2_t* a, const fp2_t* b, fp2_t* out, u32 n) { field_op<fp2_t>(op, a, b, out, n); }
