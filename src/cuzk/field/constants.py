"""Constants of the BLS12-381 fields (values as in blstrs / ff, see docs/circuits.md §1)."""

from __future__ import annotations

# Scalar field Fr: the field of circuit values, witness and Groth16 scalars.
R_MODULUS = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
FR_BITS = 255
FR_BYTES = 32
FR_LIMBS = 4
FR_TWO_ADICITY = 32
# Multiplicative generator; also the coset shift of bellperson's FFT domain.
FR_GENERATOR = 7
# 7^t with r - 1 = 2^32 * t: a primitive 2^32-th root of unity (bellperson's ROOT_OF_UNITY).
FR_ROOT_OF_UNITY = 0x16A2A19EDFE81F20D09B681922C813B4B63683508C2280B93829971F439F0D2B

# Base field Fp: coordinates of G1 (and, as Fp2 = Fp[u]/(u^2+1), of G2).
P_MODULUS = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB
FP_BYTES = 48
FP_LIMBS = 6

# Montgomery radices used by the limb kernels.
FR_MONT_R = (1 << 256) % R_MODULUS
FP_MONT_R = (1 << 384) % P_MODULUS


def fr_root_of_unity(log_n: int) -> int:
    """The primitive 2^log_n-th root of unity used for a domain of size 2^log_n (bellperson's choice)."""
    if not 0 <= log_n <= FR_TWO_ADICITY:
        raise ValueError(f"domain size 2^{log_n} exceeds the 2-adicity 2^{FR_TWO_ADICITY} of Fr")
    return pow(FR_ROOT_OF_UNITY, 1 << (FR_TWO_ADICITY - log_n), R_MODULUS)
