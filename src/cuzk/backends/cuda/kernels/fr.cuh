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
