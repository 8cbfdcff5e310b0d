// The BLS12-381 scalar field Fr (255 bits, 8 limbs): circuit values, NTT data and MSM scalars.
// Montgomery radix R = 2^256; an (n, 4) uint64 Montgomery array of the CPU code is bit-identical
// to an (n, 8) uint32 array here.
#pragma once
#include "mont.cuh"

CONSTANT u32 FR_RR[8] = {0xf3f29c6d, 0xc999e990, 0x87925c23, 0x2b6cedcb,
                         0x7254398f, 0x05d31496, 0x9f59ff11, 0x0748d9d9};
CONSTANT u32 FR_ONE[8] = {0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa,
                          0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159};

// The modulus and m0 as constant-bank words, not immediates. With immediates ptxas specialised the
// reduction around m0 = 2^32 - 1 (m = -t0) and mod(0) = 1, mod(1) = 2^32 - 1, and in doing so split
// most of the reduction's 64-bit products into a low and a high IMAD: an NTT butterfly took 345
// SASS instructions (137 IMAD) from the constant bank against 400 (177 IMAD) with immediates.
CONSTANT u32 FR_MOD[8] = {0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402,
                          0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753};
CONSTANT u32 FR_M0 = 0xffffffffu;

struct fr_params {
    static constexpr int N = 8;
    DEV static u32 m0() { return FR_M0; }
    DEV static u32 mod(int i) { return FR_MOD[i]; }
    DEV static u32 rr(int i) { return FR_RR[i]; }
    DEV static u32 one(int i) { return FR_ONE[i]; }
    DEV static void sparse_low() {}  // mod(0) = 1, mod(1) = 2^32 - 1: see mont_t::operator*
};

typedef mont_t<fr_params> fr_t;

// 32 bytes as two 16-byte loads (through the read-only path) and stores.
DEV fr_t fr_load(const fr_t* p) {
#ifdef CUZK_HOST_EMU
    return *p;
#else
    const uint4* s = reinterpret_cast<const uint4*>(p);
    const uint4 lo = __ldg(s), hi = __ldg(s + 1);
    fr_t r;
    r.v[0] = lo.x; r.v[1] = lo.y; r.v[2] = lo.z; r.v[3] = lo.w;
    r.v[4] = hi.x; r.v[5] = hi.y; r.v[6] = hi.z; r.v[7] = hi.w;
    return r;
#endif
}

DEV void fr_store(fr_t* p, const fr_t& x) {
#ifdef CUZK_HOST_EMU
    *p = x;
#else
    uint4* d = reinterpret_cast<uint4*>(p);
    d[0] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
    d[1] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
#endif
}
