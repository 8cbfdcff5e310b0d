"""snarkjs Groth16 proving keys (.zkey) for BLS12-381.

iden3 container, magic "zkey", version 1. Sections, as snarkjs 0.7.6 writes them (zkey_new.js):

1. u32 protocol id (1 = Groth16).
2. u32 n8q, q (n8q bytes), u32 n8r, r (n8r bytes), u32 nVars, u32 nPublic, u32 domainSize, then the
   points alpha1, beta1, beta2, gamma2, delta1, delta2 (in that order).
3. IC: nPublic + 1 G1 points.
4. u32 count, then per coefficient u32 matrix (0 = A, 1 = B), u32 constraint, u32 signal and a 32-byte
   value. The value is stored as v * R^2 mod r (R = 2^256): the snarkjs prover multiplies it, read as a
   Montgomery number, by the *canonical* witness bytes, also read as Montgomery, and gets v * w in
   Montgomery form without converting the witness. Rows nConstraints + i, i <= nPublic, carry the
   extra A coefficient 1 on signal i that makes the public inputs linearly independent.
5. A, 6. B1 (G1) and 7. B2 (G2): one point per variable (nVars).
8. C: one G1 point per private variable, nPublic + 1 .. nVars - 1.
9. H: domainSize G1 points, the odd-index Lagrange basis of the doubled domain: the H polynomial is
   evaluated on the coset shift * w^i, shift = `snarkjs_coset_shift(domain_size)`.
10. MPC contributions (ignored here).

Points are affine, each Fq coordinate 48 bytes little-endian in Montgomery form (R = 2^384), G2
coordinates as c0 then c1; the point at infinity is all zero bytes.

The big point sections are returned in the blstrs uncompressed encoding bellperson's parameter files
use, so the prover has one input layout: G1 = x || y, G2 = x.c1 || x.c0 || y.c1 || y.c0, each coordinate
48 bytes big-endian standard form; infinity = 0x40 followed by zeros.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from cuzk.curve.encoding import find_invalid_affine_limbs, uncompressed_from_affine_limbs
from cuzk.errors import FormatError, PointDecodeError
from cuzk.field.constants import FR_BYTES, FR_TWO_ADICITY, P_MODULUS, R_MODULUS
from cuzk.groth16.formats._fq_mont import mont_reduce
from cuzk.groth16.formats.binfile import BinFile, read_binfile

__all__ = ["ZKEY_MAGIC", "ZKEY_VERSION", "Zkey", "read_zkey", "snarkjs_coset_shift", "unchecked_b2_limbs"]

ZKEY_MAGIC = b"zkey"
ZKEY_VERSION = 1
GROTH16_PROTOCOL_ID = 1
_PROTOCOL_NAMES = {1: "groth16", 2: "plonk", 10: "fflonk"}

FQ_BYTES = 48
G1_RAW = 2 * FQ_BYTES
G2_RAW = 4 * FQ_BYTES
_HEADER_SIZE = 4 + FQ_BYTES + 4 + FR_BYTES + 3 * 4 + 3 * G1_RAW + 3 * G2_RAW
_COEF_DTYPE = np.dtype([("matrix", "<u4"), ("constraint", "<u4"), ("signal", "<u4"), ("value", "<u8", (4,))])
_FQ_R_INV = pow(1 << (8 * FQ_BYTES), -1, P_MODULUS)

_KNOWN_Q = {
    P_MODULUS: "BLS12-381",
    21888242871839275222246405745257275088696311157297823662689037894645226208583: "BN254",
}

# Smallest quadratic non-residue of Fr: ffjavascript derives its roots of unity from it (not from the
# multiplicative generator 7 that bellperson uses), so snarkjs's domains have different generators.
SNARKJS_FR_NQR = 5


def snarkjs_coset_shift(domain_size: int) -> int:
    """The shift of the coset on which the snarkjs prover evaluates A*B - C for the H MSM.

    It is ffjavascript's `Fr.w[log2(domain_size) + 1]`: 5^((r-1)/2^32) squared down to a primitive
    2^(log+1)-th root of unity, so the coset shift * w^i (w = shift^2) is the odd half of the doubled
    domain that the H points of section 9 are the Lagrange basis of. For domain_size = 2^32 snarkjs uses
    Fr.shift = 25 instead; that size cannot occur in a zkey (u32 field).
    """
    log_n = domain_size.bit_length() - 1
    if domain_size <= 0 or 1 << log_n != domain_size or log_n >= FR_TWO_ADICITY:
        raise ValueError(f"domain size {domain_size} is not a power of two below 2^{FR_TWO_ADICITY}")
    t = (R_MODULUS - 1) >> FR_TWO_ADICITY
    return pow(SNARKJS_FR_NQR, t << (FR_TWO_ADICITY - log_n - 1), R_MODULUS)


@dataclass(frozen=True, eq=False)
class Zkey:
    """A decoded Groth16 proving key.

    Coefficients are parallel arrays, one entry per non-zero of the A and B matrices (C is implied by
    A*B = C and not stored): `coef_matrix` (uint8, 0 = A, 1 = B), `coef_constraint`, `coef_signal`
    (uint32) and `coef_value` ((m, 4) uint64 canonical little-endian limbs, the R^2 factor removed).
    Point sections are kept in `affine` as blst's affine layout ((n, 12) / (n, 24) uint64 Montgomery
    limbs, infinity all zeros: snarkjs's own byte layout, so the blst MSM engine uses them as they
    are): "a", "b1" (n_vars), "b2" (n_vars, G2), "c" (n_vars - n_public - 1; row j belongs to variable
    n_public + 1 + j) and "h" (domain_size). The properties `a`, `b1`, `b2`, `c`, `h` give the same
    points in the blstrs uncompressed encoding ((n, 96) / (n, 192) uint8, infinity: first byte 0x40),
    made on first use.
    """

    path: str
    n_vars: int
    n_public: int
    domain_size: int
    alpha_g1: G1Point
    beta_g1: G1Point
    beta_g2: G2Point
    gamma_g2: G2Point
    delta_g1: G1Point
    delta_g2: G2Point
    ic: list[G1Point]
    coef_matrix: np.ndarray
    coef_constraint: np.ndarray
    coef_signal: np.ndarray
    coef_value: np.ndarray
    affine: dict[str, np.ndarray]

    def _encoded(self, name: str) -> np.ndarray:
        return uncompressed_from_affine_limbs(self.affine[name], is_g2=name == "b2")

    a = cached_property(lambda self: self._encoded("a"))
    b1 = cached_property(lambda self: self._encoded("b1"))
    b2 = cached_property(lambda self: self._encoded("b2"))
    c = cached_property(lambda self: self._encoded("c"))
    h = cached_property(lambda self: self._encoded("h"))

    @property
    def log_domain_size(self) -> int:
        return self.domain_size.bit_length() - 1

    @property
    def coset_shift(self) -> int:
        """`snarkjs_coset_shift(domain_size)`: where snarkjs evaluates the H polynomial."""
        return snarkjs_coset_shift(self.domain_size)


def read_zkey(path: str | os.PathLike[str], *, check_points: bool = True) -> Zkey:
    """Decode and validate a snarkjs Groth16 BLS12-381 .zkey.

    Header and IC points are checked on the curve and in the prime-order subgroup. Points of the big
    sections (A, B1, B2, C, H) are checked to have canonical coordinates and, unless `check_points` is
    false, to lie on the curve (in numba, in parallel); subgroup checks there would cost a scalar
    multiplication per point. Every problem raises FormatError (PointDecodeError for points) naming the
    file, the section, the byte offset and what was expected.
    """
    source = str(path)
    with read_binfile(path, ZKEY_MAGIC, ZKEY_VERSION, required=((1, "protocol header"),)) as bf:
        off, size = bf.sections[1]
        if size != 4:
            raise FormatError(f"protocol header section is {size} bytes, expected 4", source=source,
                              offset=off, field="section 1")
        protocol = bf.u32(off)
        if protocol != GROTH16_PROTOCOL_ID:
            name = _PROTOCOL_NAMES.get(protocol, "unknown")
            raise FormatError(f"protocol id {protocol} ({name}), expected {GROTH16_PROTOCOL_ID} (groth16)",
                              source=source, offset=off, field="section 1")
        for section_type, name in _SECTIONS.items():
            bf.section(section_type, name)
        return _read_groth16(bf, check_points)


def unchecked_b2_limbs(path: str | os.PathLike[str]) -> np.ndarray | None:
    """The B2 section of a zkey as blst affine limbs ((nVars, 24) uint64), NOT validated, or None
    when the header does not describe a BLS12-381 Groth16 key whose B2 section has nVars points.

    For starting the B_G2 MSM (the longest) before the whole key is read and checked: the caller
    must still `read_zkey` the file and discard the MSM's result if that raises. blst's arithmetic
    on an unchecked point gives a wrong sum, never a fault (the bucket indices come from the
    scalars alone). Any problem is left for `read_zkey` to report with its proper message."""
    try:
        with read_binfile(path, ZKEY_MAGIC, ZKEY_VERSION) as bf:
            header, b2 = bf.sections.get(2), bf.sections.get(7)
            if header is None or b2 is None or header[1] != _HEADER_SIZE:
                return None
            off = header[0]
            if bf.u32(off) != FQ_BYTES or bf.u32(off + 4 + FQ_BYTES) != FR_BYTES:
                return None
            n_vars = bf.u32(off + 4 + FQ_BYTES + 4 + FR_BYTES)
            if b2[1] != n_vars * G2_RAW:
                return None
            return np.array(bf.array(b2[0], np.uint8, b2[1])).view("<u8").reshape(n_vars, G2_RAW // 8)
    except FormatError:
        return None


_SECTIONS = {
    2: "groth16 header",
    3: "IC points",
    4: "coefficients",
    5: "A points",
    6: "B1 points",
    7: "B2 points",
    8: "C points",
    9: "H points",
}


def _section_field(section_type: int) -> str:
    return f"section {section_type} ({_SECTIONS[section_type]})"


def _read_groth16(bf: BinFile, check_points: bool) -> Zkey:
    source = bf.path
    field2 = _section_field(2)
    off, size = bf.sections[2]

    def need(pos: int, length: int, what: str) -> None:
        if pos + length > off + size:
            raise FormatError(f"section ends at byte {off + size} before {what}", source=source, offset=pos,
                              field=field2)

    need(off, 4, "n8q")
    n8q = bf.u32(off)
    if n8q == 0 or n8q % 8 or n8q > 128:
        raise FormatError(f"n8q = {n8q}, expected {FQ_BYTES} (BLS12-381 base field)", source=source,
                          offset=off, field=field2)
    need(off + 4, n8q, "q")
    q = int.from_bytes(bf.read(off + 4, n8q), "little")
    if q != P_MODULUS:
        curve = _KNOWN_Q.get(q)
        raise FormatError(f"zkey is for another curve: q = {q}{f' ({curve})' if curve else ''}, expected "
                          f"the BLS12-381 base field", source=source, offset=off + 4, field=field2)
    if n8q != FQ_BYTES:
        raise FormatError(f"n8q = {n8q}, expected {FQ_BYTES}", source=source, offset=off, field=field2)
    pos = off + 4 + n8q
    need(pos, 4, "n8r")
    n8r = bf.u32(pos)
    if n8r != FR_BYTES:
        raise FormatError(f"n8r = {n8r}, expected {FR_BYTES} (BLS12-381 scalar field)", source=source,
                          offset=pos, field=field2)
    need(pos + 4, n8r, "r")
    r = int.from_bytes(bf.read(pos + 4, n8r), "little")
    if r != R_MODULUS:
        raise FormatError(f"zkey is for another curve: r = {r}, expected the BLS12-381 scalar field",
                          source=source, offset=pos + 4, field=field2)
    if size != _HEADER_SIZE:
        raise FormatError(f"groth16 header section is {size} bytes, expected {_HEADER_SIZE}", source=source,
                          offset=off, field=field2)
    pos += 4 + n8r
    n_vars, n_public, domain_size = (bf.u32(pos + 4 * k) for k in range(3))
    if n_vars < n_public + 1:
        raise FormatError(f"nVars = {n_vars} but nPublic = {n_public}: need nVars >= nPublic + 1",
                          source=source, offset=pos, field=field2)
    if domain_size == 0 or domain_size & (domain_size - 1) or domain_size <= n_public:
        raise FormatError(f"domainSize = {domain_size}, expected a power of two above nPublic = {n_public}",
                          source=source, offset=pos + 8, field=field2)
    pos += 12
    header: dict[str, G1Point | G2Point] = {}
    for name, is_g2 in (("alpha1", False), ("beta1", False), ("beta2", True), ("gamma2", True),
                        ("delta1", False), ("delta2", True)):
        raw = bf.read(pos, G2_RAW if is_g2 else G1_RAW)
        header[name] = _checked_point(raw, is_g2, source=source, offset=pos, field=f"{field2}: {name}",
                                      allow_infinity=False)
        pos += len(raw)

    ic = _read_ic(bf, n_public)
    matrix, constraint, signal, value = _read_coefficients(bf, n_vars, domain_size)
    points = {
        name: _read_points(bf, section, count, is_g2, check_points)
        for name, section, count, is_g2 in (("a", 5, n_vars, False), ("b1", 6, n_vars, False),
                                            ("b2", 7, n_vars, True), ("c", 8, n_vars - n_public - 1, False),
                                            ("h", 9, domain_size, False))
    }
    return Zkey(
        path=source, n_vars=n_vars, n_public=n_public, domain_size=domain_size,
        alpha_g1=header["alpha1"], beta_g1=header["beta1"], beta_g2=header["beta2"],
        gamma_g2=header["gamma2"], delta_g1=header["delta1"], delta_g2=header["delta2"], ic=ic,
        coef_matrix=matrix, coef_constraint=constraint, coef_signal=signal, coef_value=value,
        affine=points,
    )


def _fq_from_mont(raw: bytes, *, source: str, offset: int, field: str) -> int:
    """One Montgomery little-endian Fq coordinate as a canonical int."""
    v = int.from_bytes(raw, "little")
    if v >= P_MODULUS:
        raise PointDecodeError("coordinate is not below q (not a canonical Montgomery value)", source=source,
                               offset=offset, field=field)
    return v * _FQ_R_INV % P_MODULUS


def _checked_point(raw: bytes, is_g2: bool, *, source: str, offset: int, field: str,
                   allow_infinity: bool) -> G1Point | G2Point:
    """A header/IC point, fully checked (on curve and in the subgroup) through py-arkworks."""
    cls = G2Point if is_g2 else G1Point
    if not any(raw):
        if not allow_infinity:
            raise PointDecodeError("is the point at infinity, which a valid setup never produces",
                                   source=source, offset=offset, field=field)
        return cls.identity()
    coords = [_fq_from_mont(raw[k:k + FQ_BYTES], source=source, offset=offset + k, field=field)
              for k in range(0, len(raw), FQ_BYTES)]
    xy = b"".join(c.to_bytes(FQ_BYTES, "big") for c in coords)  # py-arkworks order: x.c0, x.c1, y.c0, ...
    try:
        return cls.from_xy_bytes_be(xy)
    except ValueError as exc:
        raise PointDecodeError(f"not a valid {'G2' if is_g2 else 'G1'} point: {exc}", source=source,
                               offset=offset, field=field) from None


def _read_ic(bf: BinFile, n_public: int) -> list[G1Point]:
    off, size = bf.sections[3]
    if size != (n_public + 1) * G1_RAW:
        raise FormatError(f"IC section is {size} bytes, expected {(n_public + 1) * G1_RAW} "
                          f"(nPublic + 1 = {n_public + 1} G1 points)", source=bf.path, offset=off,
                          field=_section_field(3))
    return [_checked_point(bf.read(off + i * G1_RAW, G1_RAW), False, source=bf.path, offset=off + i * G1_RAW,
                           field=f"{_section_field(3)}: IC[{i}]", allow_infinity=True)
            for i in range(n_public + 1)]


def _read_coefficients(bf: BinFile, n_vars: int,
                       domain_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    source, field = bf.path, _section_field(4)
    off, size = bf.sections[4]
    if size < 4:
        raise FormatError(f"section is {size} bytes, too short for the coefficient count", source=source,
                          offset=off, field=field)
    count = bf.u32(off)
    if size != 4 + count * _COEF_DTYPE.itemsize:
        raise FormatError(f"section is {size} bytes but holds {count} coefficients of "
                          f"{_COEF_DTYPE.itemsize} bytes (expected {4 + count * _COEF_DTYPE.itemsize})",
                          source=source, offset=off, field=field)
    records = bf.array(off + 4, _COEF_DTYPE, count)

    def entry_offset(i: int, member: str) -> int:
        return off + 4 + i * _COEF_DTYPE.itemsize + _COEF_DTYPE.fields[member][1]

    def first(mask: np.ndarray) -> int:
        bad = np.flatnonzero(mask)
        return int(bad[0]) if bad.size else -1

    matrix = records["matrix"].astype(np.uint32)
    i = first(matrix > 1)
    if i >= 0:
        raise FormatError(f"coefficient #{i}: matrix {int(matrix[i])}, expected 0 (A) or 1 (B)",
                          source=source, offset=entry_offset(i, "matrix"), field=field)
    constraint = records["constraint"].astype(np.uint32)
    i = first(constraint >= domain_size)
    if i >= 0:
        raise FormatError(f"coefficient #{i}: constraint {int(constraint[i])} is not below domainSize = "
                          f"{domain_size}", source=source, offset=entry_offset(i, "constraint"), field=field)
    signal = records["signal"].astype(np.uint32)
    i = first(signal >= n_vars)
    if i >= 0:
        raise FormatError(f"coefficient #{i}: signal {int(signal[i])} is not below nVars = {n_vars}",
                          source=source, offset=entry_offset(i, "signal"), field=field)
    stored = np.require(records["value"], dtype=np.uint64, requirements=["C", "A"])  # aligned copy
    del records
    # stored = v * R^2 mod r: two Montgomery reductions give v.
    value, i = mont_reduce(stored, R_MODULUS, times=2)
    if i >= 0:
        raw = int.from_bytes(stored[i].tobytes(), "little")
        raise FormatError(f"coefficient #{i}: value {raw} is not below r", source=source,
                          offset=entry_offset(i, "value"), field=field)
    return matrix.astype(np.uint8), constraint, signal, value


def _read_points(bf: BinFile, section_type: int, count: int, is_g2: bool, check_points: bool) -> np.ndarray:
    """One point section as blst affine limbs ((count, 12) / (count, 24) uint64), validated.

    snarkjs's own layout (x then y, Montgomery little-endian limbs, Fp2 as c0 then c1, infinity all
    zeros) is blst's affine layout, so the bytes are copied out of the file and checked in place.
    """
    source, field = bf.path, _section_field(section_type)
    off, size = bf.sections[section_type]
    width = G2_RAW if is_g2 else G1_RAW
    if size != count * width:
        raise FormatError(f"section is {size} bytes, expected {count * width} ({count} "
                          f"{'G2' if is_g2 else 'G1'} points of {width} bytes)", source=source, offset=off,
                          field=field)
    # A copy (the file's map closes when reading ends), aligned for the kernels.
    limbs = np.array(bf.array(off, np.uint8, count * width)).view("<u8").reshape(count, width // 8)
    bad, problem = find_invalid_affine_limbs(limbs, is_g2=is_g2, check_curve=check_points)
    if bad >= 0:
        if "below q" in problem:
            problem += " (not a canonical Montgomery value)"
        raise PointDecodeError(f"point #{bad} of {count} {problem}", source=source, offset=off + bad * width,
                               field=field)
    return limbs
