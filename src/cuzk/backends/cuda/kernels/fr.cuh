// The BLS12-381 scalar field Fr (255 bits, 8 limbs): circuit values, NTT data and MSM scalars.
// Montgomery radix R = 2^256; an (n, 4) uint64 Montgomery array of the CPU code is bit-identical
// to an (n, 8) uint32 array here.
#pragma once
#include "mont.cuh"

CONSTANT u32 FR_RR[8] = {0xf3f29c6d, 0xc999e990, 0x87925c23, 0x2b6cedcb,
                         0x7254398f, 0x05d31496, 0x9f59ff11, 0x0748d9d9};
CONSTANT u32 FR_ONE[8] = {0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa,
                          0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159};

struct fr_params {
    static constexpr int N = 8;
    static constexpr u32 M0 = 0xffffffffu;
    // The modulus as immediates rather than constant-bank words: its limbs 0 (1) and 1 (2^32 - 1)
    // turn the reduction's products m * mod(0), m * mod(1) into adds once the compiler sees them.
    DEV static constexpr u32 mod(int i) {
        return i == 0 ? 0x00000001u : i == 1 ? 0xffffffffu : i == 2 ? 0xfffe5bfeu : i == 3 ? 0x53bda402u
             : i == 4 ? 0x09a1d805u : i == 5 ? 0x3339d808u : i == 6 ? 0x299d7d48u : 0x73eda753u;
    }
    DEV static u32 rr(int i) { return FR_RR[i]; }
    DEV static u32 one(int i) { return FR_ONE[i]; }
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
