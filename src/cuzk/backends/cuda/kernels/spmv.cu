// Sparse products of compiled circuits over Fr: out = M·w for a CSR matrix M (cuzk.r1cs.compiled) and
// the witness w = (inputs, aux), everything canonical (not Montgomery), exactly as the CPU kernel
// (cuzk.r1cs.spmv) computes it.
//
// Entries are a column (u32, bellperson's combined order: column j < n_in is inputs[j], otherwise
// aux[j - n_in]) and an index into a small coefficient table held twice, in Montgomery form (the
// product of c·R with a canonical w is c·w, canonical) and canonical. Slot 0 is 1 and slot 1 is -1.
// Shortcuts, as on the CPU: a witness value 0 adds nothing, 1 adds the canonical coefficient, and
// the coefficients 1 and -1 add or subtract the value; only the rest takes a Montgomery product.
// Field sums are exact, so neither the shortcuts nor the order of the additions (per thread here,
// a tree over a block for long rows) change a bit of the result.
//
// Rows are split by length: `spmv_rows_*` gives each row of at most `long_row` entries a thread of
// its own and skips the longer ones, which `spmv_long_rows_*` takes, a block per row (from a list of
// their indices the driver makes): its threads stride over the entries, then add their partial sums
// in shared memory. A 32GiB PoRep partition's A has 262,504 rows (0.2%) of more than 32 entries (up
// to 1,281), holding 43% of its entries: with a thread per row, a warp would wait on each of them.
//
// Kernel names carry the index types: _p32 / _p64 for u32 / u64 row pointers, _i16 / _i32 for u16 /
// u32 coefficient indices (the compiled form picks the smallest that fits).
#pragma once
#include "fr.cuh"

// coefficient * w[col], added to acc (the shortcuts of the file comment).
DEV fr_t spmv_term(fr_t acc, u32 col, u32 ci, const fr_t* table_mont, const fr_t* table_canon,
                   const fr_t* inputs, const fr_t* aux, u32 n_in) {
    const fr_t x = col < n_in ? fr_load(inputs + col) : fr_load(aux + (col - n_in));
    u32 high = 0;
    UNROLL for (int i = 1; i < 8; ++i) high |= x.v[i];
    if (high == 0 && x.v[0] <= 1u) {
        if (x.v[0] == 1u) acc = acc + fr_load(table_canon + ci);
    } else if (ci == 0) {
        acc = acc + x;
    } else if (ci == 1) {
        acc = acc - x;
    } else {
        acc = acc + fr_load(table_mont + ci) * x;
    }
    return acc;
}

// One thread per row of at most `long_row` entries; longer rows are the long-row kernel's.
template <class P, class I>
DEV void spmv_rows(const P* row_ptr, const u32* cols, const I* coeff_idx, u32 rows, u32 long_row,
                   const fr_t* table_mont, const fr_t* table_canon, const fr_t* inputs, const fr_t* aux, u32 n_in,
                   fr_t* out) {
    const u32 r = global_tid();
    if (r >= rows) return;
    const u64 begin = row_ptr[r], end = row_ptr[r + 1];
    if (end - begin > long_row) return;
    fr_t acc = fr_t::zero();
    for (u64 k = begin; k < end; ++k) acc = spmv_term(acc, cols[k], coeff_idx[k], table_mont, table_canon, inputs,
                                                      aux, n_in);
    fr_store(out + r, acc);
}

// Block b sums row long_rows[b]: each thread strides over the entries, then a tree in shared memory
// (blockDim.x a power of two, blockDim.x * 32 bytes of dynamic shared memory).
template <class P, class I>
DEV void spmv_long_rows(const P* row_ptr, const u32* cols, const I* coeff_idx, const u32* long_rows,
                        const fr_t* table_mont, const fr_t* table_canon, const fr_t* inputs, const fr_t* aux,
                        u32 n_in, fr_t* out) {
    DYN_SMEM(fr_t, partial);
    const u32 r = long_rows[blockIdx.x];
    const u64 begin = row_ptr[r], end = row_ptr[r + 1];
    BLOCK_THREADS(t) {
        fr_t acc = fr_t::zero();
        for (u64 k = begin + t; k < end; k += blockDim.x) acc = spmv_term(acc, cols[k], coeff_idx[k], table_mont,
                                                                         table_canon, inputs, aux, n_in);
        partial[t] = acc;
    }
    SYNC();
    for (u32 half = blockDim.x >> 1; half > 0; half >>= 1) {
        BLOCK_THREADS(t) {
            if (t < half) partial[t] = partial[t] + partial[t + half];
        }
        SYNC();
    }
    BLOCK_THREADS(t) {
        if (t == 0) fr_store(out + r, partial[0]);
    }
}

#define SPMV_KERNELS(SUFFIX, P, I)                                                                                   \
    KERNEL spmv_rows_##SUFFIX(const P* row_ptr, const u32* cols, const I* coeff_idx, u32 rows, u32 long_row,        \
                              const fr_t* table_mont, const fr_t* table_canon, const fr_t* inputs, const fr_t* aux, \
                              u32 n_in, fr_t* out) {                                                                \
        spmv_rows<P, I>(row_ptr, cols, coeff_idx, rows, long_row, table_mont, table_canon, inputs, aux, n_in, out); \
    }                                                                                                               \
    BLOCK_KERNEL spmv_long_rows_##SUFFIX(const P* row_ptr, const u32* cols, const I* coeff_idx,                     \
                                         const u32* long_rows, const fr_t* table_mont, const fr_t* table_canon,     \
                                         const fr_t* inputs, const fr_t* aux, u32 n_in, fr_t* out) {                \
        spmv_long_rows<P, I>(row_ptr, cols, coeff_idx, long_rows, table_mont, table_canon, inputs, aux, n_in, out); \
    }

typedef unsigned short u16;
SPMV_KERNELS(p32_i16, u32, u16)
SPMV_KERNELS(p32_i32, u32, u32)
SPMV_KERNELS(p64_i16, u64, u16)
SPMV_KERNELS(p64_i32, u64, u32)

// bad[r] = 1 when a[r]·b[r] != c[r] (canonical values): the Montgomery products a·b and c·1 both
// carry one factor 1/R, so they are equal exactly when a·b = c.
KERNEL spmv_unsatisfied(const fr_t* a, const fr_t* b, const fr_t* c, u32 rows, u8* bad) {
    const u32 r = global_tid();
    if (r >= rows) return;
    fr_t one_raw = fr_t::zero();
    one_raw.v[0] = 1;
    bad[r] = (fr_load(a + r) * fr_load(b + r) == fr_load(c + r) * one_raw) ? 0 : 1;
}

// bad[i] = 1 when x[i] >= r (not a canonical field element): x - r does not borrow.
KERNEL fr_noncanonical(const fr_t* x, u32 n, u8* bad) {
    const u32 i = global_tid();
    if (i >= n) return;
    const fr_t v = fr_load(x + i);
    sub_cc(v.v[0], fr_params::mod(0));
    UNROLL for (int j = 1; j < 8; ++j) subc_cc(v.v[j], fr_params::mod(j));
    bad[i] = subc(0, 0) ? 0 : 1;  // 0xffffffff (a borrow) when x < r
}
