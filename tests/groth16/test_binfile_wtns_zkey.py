"""The .zkey/.wtns readers against files made by the real circom2 + snarkjs, and against broken files.

Reference values come from snarkjs itself (`zkey export json`, `wtns export json`), so these tests pin
down the formats: Montgomery point coordinates, the R^2 factor of the coefficients, the all-zero
infinity, and the odd coset snarkjs's prover evaluates H on (checked by proving in Python with the
decoded key and verifying with a pairing).
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

from cuzk.curve.encoding import find_invalid_affine_limbs, uncompressed_from_affine_limbs
from cuzk.errors import FormatError, PointDecodeError
from cuzk.field.constants import FR_MONT_R, P_MODULUS, R_MODULUS, fr_root_of_unity
from cuzk.groth16.formats import _fq_mont
from cuzk.groth16.formats.binfile import read_binfile
from cuzk.groth16.formats.wtns import read_wtns, write_wtns
from cuzk.groth16.formats.zkey import Zkey, read_zkey, snarkjs_coset_shift

try:
    import snarkjs_tools
except ImportError:  # tests/ is on sys.path only once tests/conftest.py has been loaded
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import snarkjs_tools

pytestmark = pytest.mark.external

CIRCUITS = ["multiplier", "square_chain"]
FQ_R = 1 << 384
BN254_R = 21888242871839275222246405745257275088548364400416034343698204186575808495617


# --- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def circom(tmp_path_factory: pytest.TempPathFactory) -> dict[str, snarkjs_tools.Paths]:
    reason = snarkjs_tools.tools_missing_reason()
    if reason:
        pytest.skip(reason)
    return snarkjs_tools.standard_fixtures(tmp_path_factory.mktemp("circom"))


@pytest.fixture(scope="module", params=CIRCUITS)
def built(request: pytest.FixtureRequest, circom: dict[str, snarkjs_tools.Paths]) -> snarkjs_tools.Paths:
    return circom[request.param]


@pytest.fixture(scope="module")
def zkey_json(built: snarkjs_tools.Paths) -> dict[str, Any]:
    return snarkjs_tools.zkey_export_json(built.zkey)


@pytest.fixture(scope="module")
def zkey(built: snarkjs_tools.Paths) -> Zkey:
    return read_zkey(built.zkey)


@pytest.fixture(scope="module")
def witness_ints(built: snarkjs_tools.Paths) -> list[int]:
    return [_int_le(row) for row in read_wtns(built.wtns)]


# --- helpers ---------------------------------------------------------------------------------------


def _int_le(row: np.ndarray) -> int:
    return int.from_bytes(row.tobytes(), "little")


def _g1_json(row: np.ndarray) -> list[str]:
    """blstrs uncompressed G1 -> the snarkjs JSON form (infinity included)."""
    b = row.tobytes()
    if b[0] & 0x40:
        assert b == b"\x40" + bytes(95)
        return ["0", "1", "0"]
    return [str(int.from_bytes(b[:48], "big")), str(int.from_bytes(b[48:], "big")), "1"]


def _g2_json(row: np.ndarray) -> list[list[str]]:
    b = row.tobytes()
    if b[0] & 0x40:
        assert b == b"\x40" + bytes(191)
        return [["0", "0"], ["1", "0"], ["0", "0"]]
    x1, x0, y1, y0 = (str(int.from_bytes(b[k:k + 48], "big")) for k in range(0, 192, 48))
    return [[x0, x1], [y0, y1], ["1", "0"]]


def _ark_g1(row: np.ndarray) -> G1Point:
    b = row.tobytes()
    return G1Point.identity() if b[0] & 0x40 else G1Point.from_xy_bytes_unchecked_be(b)


def _ark_g2(row: np.ndarray) -> G2Point:
    b = row.tobytes()
    if b[0] & 0x40:
        return G2Point.identity()
    return G2Point.from_xy_bytes_unchecked_be(b[48:96] + b[:48] + b[144:] + b[96:144])


def _g1_point_json(p: G1Point) -> list[str]:
    if p == G1Point.identity():
        return ["0", "1", "0"]
    xy = p.to_xy_bytes_be()
    return [str(int.from_bytes(xy[:48], "big")), str(int.from_bytes(xy[48:], "big")), "1"]


def _g2_point_json(p: G2Point) -> list[list[str]]:
    xy = p.to_xy_bytes_be()
    x0, x1, y0, y1 = (str(int.from_bytes(xy[k:k + 48], "big")) for k in range(0, 192, 48))
    return [[x0, x1], [y0, y1], ["1", "0"]]


def _scalar(v: int) -> Scalar:
    return Scalar.from_le_bytes(v.to_bytes(32, "little"))


def _ntt(values: list[int], root: int) -> list[int]:
    """Evaluations at root^i of the polynomial with coefficients `values` (radix-2, Python ints)."""
    n = len(values)
    if n == 1:
        return list(values)
    even = _ntt(values[0::2], root * root % R_MODULUS)
    odd = _ntt(values[1::2], root * root % R_MODULUS)
    out = [0] * n
    w = 1
    for i in range(n // 2):
        t = w * odd[i] % R_MODULUS
        out[i] = (even[i] + t) % R_MODULUS
        out[i + n // 2] = (even[i] - t) % R_MODULUS
        w = w * root % R_MODULUS
    return out


def _intt(values: list[int], root: int) -> list[int]:
    n_inv = pow(len(values), -1, R_MODULUS)
    return [v * n_inv % R_MODULUS for v in _ntt(values, pow(root, -1, R_MODULUS))]


def _python_prove(zk: Zkey, w: list[int], shift: int) -> tuple[G1Point, G2Point, G1Point]:
    """A Groth16 proof with r = s = 0 from the decoded zkey, following snarkjs's prover.

    A·w and B·w per row from the coefficients, C = A∘B, and the H scalars are A·B − C evaluated on
    the coset shift·ω^i (through an inverse NTT on ω = shift^2 and a forward NTT of the shifted
    coefficients).
    """
    n = zk.domain_size
    a_ev, b_ev = [0] * n, [0] * n
    for m, row, sig, val in zip(zk.coef_matrix.tolist(), zk.coef_constraint.tolist(), zk.coef_signal.tolist(),
                                zk.coef_value, strict=True):
        target = a_ev if m == 0 else b_ev
        target[row] = (target[row] + _int_le(val) * w[sig]) % R_MODULUS
    c_ev = [x * y % R_MODULUS for x, y in zip(a_ev, b_ev, strict=True)]
    omega = shift * shift % R_MODULUS

    def on_coset(ev: list[int]) -> list[int]:
        coeffs = _intt(ev, omega)
        return _ntt([c * pow(shift, i, R_MODULUS) % R_MODULUS for i, c in enumerate(coeffs)], omega)

    ao, bo, co = on_coset(a_ev), on_coset(b_ev), on_coset(c_ev)
    h = [(x * y - z) % R_MODULUS for x, y, z in zip(ao, bo, co, strict=True)]
    ws = [_scalar(v) for v in w]
    priv = ws[zk.n_public + 1:]
    a = zk.alpha_g1 + G1Point.multiexp_unchecked([_ark_g1(r) for r in zk.a], ws)
    b = zk.beta_g2 + G2Point.multiexp_unchecked([_ark_g2(r) for r in zk.b2], ws)
    c = (G1Point.multiexp_unchecked([_ark_g1(r) for r in zk.c], priv)
         + G1Point.multiexp_unchecked([_ark_g1(r) for r in zk.h], [_scalar(v) for v in h]))
    return a, b, c


def _groth16_check(zk: Zkey, publics: list[int], a: G1Point, b: G2Point, c: G1Point) -> bool:
    vk_x = zk.ic[0] + G1Point.multiexp_unchecked(zk.ic[1:], [_scalar(v) for v in publics])
    return GT.pairing_check([-a, zk.alpha_g1, vk_x, c], [b, zk.beta_g2, zk.gamma_g2, zk.delta_g2])


def _patched(src: Path, dest: Path, offset: int, data: bytes) -> Path:
    raw = bytearray(src.read_bytes())
    raw[offset:offset + len(data)] = data
    dest.write_bytes(bytes(raw))
    return dest


def _truncated(src: Path, dest: Path, length: int) -> Path:
    dest.write_bytes(src.read_bytes()[:length])
    return dest


def _sections(path: Path) -> dict[int, tuple[int, int]]:
    with read_binfile(path, path.suffix[1:].encode(), 2) as bf:
        return dict(bf.sections)


def _expect_format_error(reader: Any, path: Path, *fragments: str,
                         kind: type[FormatError] = FormatError) -> FormatError:
    with pytest.raises(kind) as info:
        reader(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message
    return info.value


# --- the real files --------------------------------------------------------------------------------


def test_fixture_build_and_container(circom: dict[str, snarkjs_tools.Paths]) -> None:
    """Both circuits built; the containers have the sections snarkjs writes; report the build time."""
    for paths in circom.values():
        print(f"{paths.workdir.name}: built in {paths.build_seconds:.1f} s")
        with read_binfile(paths.zkey, b"zkey", 1) as bf:
            assert bf.version == 1
            assert sorted(bf.sections) == list(range(1, 11))
            end = max(off + size for off, size in bf.sections.values())
            assert end == bf.size
        with read_binfile(paths.wtns, b"wtns", 2) as bf:
            assert bf.version == 2
            assert sorted(bf.sections) == [1, 2]


def test_zkey_header_matches_snarkjs(zkey: Zkey, zkey_json: dict[str, Any]) -> None:
    assert zkey_json["protocol"] == "groth16"
    assert (zkey.n_vars, zkey.n_public, zkey.domain_size) == (
        zkey_json["nVars"], zkey_json["nPublic"], zkey_json["domainSize"])
    assert zkey.log_domain_size == zkey_json["power"]
    for ours, key in ((zkey.alpha_g1, "vk_alpha_1"), (zkey.beta_g1, "vk_beta_1"), (zkey.delta_g1, "vk_delta_1")):
        assert _g1_point_json(ours) == zkey_json[key], key
    for ours, key in ((zkey.beta_g2, "vk_beta_2"), (zkey.gamma_g2, "vk_gamma_2"), (zkey.delta_g2, "vk_delta_2")):
        assert _g2_point_json(ours) == zkey_json[key], key
    assert [_g1_point_json(p) for p in zkey.ic] == zkey_json["IC"]


def test_zkey_coefficients_match_snarkjs(zkey: Zkey, zkey_json: dict[str, Any]) -> None:
    """Every coefficient, with the R^2 factor removed, equals snarkjs's own decoding."""
    ref = zkey_json["ccoefs"]
    assert len(zkey.coef_value) == len(ref)
    assert zkey.coef_matrix.dtype == np.uint8
    assert zkey.coef_matrix.tolist() == [c["matrix"] for c in ref]
    assert zkey.coef_constraint.tolist() == [c["constraint"] for c in ref]
    assert zkey.coef_signal.tolist() == [c["signal"] for c in ref]
    assert [str(_int_le(v)) for v in zkey.coef_value] == [c["value"] for c in ref]
    # The extra A rows snarkjs appends for the public inputs: A[nConstraints + i][i] = 1.
    a_rows = sorted((c["constraint"], c["signal"], c["value"]) for c in ref if c["matrix"] == 0)
    last = a_rows[-(zkey.n_public + 1):]
    assert [(s, v) for _, s, v in last] == [(i, "1") for i in range(zkey.n_public + 1)]
    assert [row for row, _, _ in last] == list(range(last[0][0], last[0][0] + zkey.n_public + 1))


def test_zkey_coefficients_stored_times_r_squared(built: snarkjs_tools.Paths, zkey: Zkey) -> None:
    """The raw bytes of coefficient values are v * R^2 mod r, R = 2^256 (not v, not v * R)."""
    off, _ = _sections(built.zkey)[4]
    raw = built.zkey.read_bytes()
    for i in range(min(8, len(zkey.coef_value))):
        stored = int.from_bytes(raw[off + 4 + 44 * i + 12: off + 4 + 44 * i + 44], "little")
        assert stored == _int_le(zkey.coef_value[i]) * FR_MONT_R * FR_MONT_R % R_MODULUS


def test_zkey_point_sections_match_snarkjs(zkey: Zkey, zkey_json: dict[str, Any]) -> None:
    n_private = zkey.n_vars - zkey.n_public - 1
    assert zkey.a.shape == (zkey.n_vars, 96) and zkey.b1.shape == (zkey.n_vars, 96)
    assert zkey.b2.shape == (zkey.n_vars, 192)
    assert zkey.c.shape == (n_private, 96) and zkey.h.shape == (zkey.domain_size, 96)
    assert [_g1_json(r) for r in zkey.a] == zkey_json["A"]
    assert [_g1_json(r) for r in zkey.b1] == zkey_json["B1"]
    assert [_g2_json(r) for r in zkey.b2] == zkey_json["B2"]
    # snarkjs's C array is indexed by variable, with nulls for the public ones.
    assert zkey_json["C"][: zkey.n_public + 1] == [None] * (zkey.n_public + 1)
    assert [_g1_json(r) for r in zkey.c] == zkey_json["C"][zkey.n_public + 1:]
    assert [_g1_json(r) for r in zkey.h] == zkey_json["hExps"]


def test_zkey_points_in_subgroup(zkey: Zkey) -> None:
    """The decoded big-section points are valid for py-arkworks' checked decoder (a sample)."""
    for rows, g2 in ((zkey.a, False), (zkey.b1, False), (zkey.c, False), (zkey.h, False), (zkey.b2, True)):
        for row in rows[:: max(1, len(rows) // 16)]:
            b = row.tobytes()
            if b[0] & 0x40:
                continue
            if g2:
                assert G2Point.from_xy_bytes_be(b[48:96] + b[:48] + b[144:] + b[96:144]).is_in_subgroup()
            else:
                assert G1Point.from_xy_bytes_be(b).is_in_subgroup()


def test_infinity_encoding(circom: dict[str, snarkjs_tools.Paths]) -> None:
    """snarkjs writes infinity as all-zero bytes; we return the flagged blstrs form.

    In square_chain neither the constant 1 (variable 0) nor the output y (variable 1) appears in B.
    """
    paths = circom["square_chain"]
    zk = read_zkey(paths.zkey)
    off, _ = _sections(paths.zkey)[6]
    raw = paths.zkey.read_bytes()
    for var in (0, 1):
        assert raw[off + 96 * var: off + 96 * (var + 1)] == bytes(96)
        assert zk.b1[var].tobytes() == b"\x40" + bytes(95)
        assert zk.b2[var].tobytes() == b"\x40" + bytes(191)
    flagged = [i for i in range(zk.n_vars) if zk.b1[i, 0] & 0x40]
    assert flagged == [0, 1]


def test_wtns_matches_snarkjs(built: snarkjs_tools.Paths, zkey: Zkey) -> None:
    w = read_wtns(built.wtns)
    assert w.dtype == np.uint64 and w.shape == (zkey.n_vars, 4) and w.flags.c_contiguous
    assert [str(_int_le(r)) for r in w] == snarkjs_tools.wtns_export_json(built.wtns)
    # The layout is exactly the 32 little-endian bytes of each value.
    off, size = _sections(built.wtns)[2]
    assert w.tobytes() == built.wtns.read_bytes()[off:off + size]


def test_public_signals_are_witness_prefix(built: snarkjs_tools.Paths, witness_ints: list[int],
                                           zkey: Zkey) -> None:
    import json

    publics = [int(v) for v in json.loads(built.public_json.read_text())]
    assert witness_ints[0] == 1
    assert publics == witness_ints[1:zkey.n_public + 1]


def test_coset_shift_constants() -> None:
    """ffjavascript's Fr.w[k + 1] (from the non-residue 5) for domains 2^9 and 2^10, established by
    running ffjavascript itself once; `test_python_proof_with_snarkjs_coset` checks the 2^9 one works."""
    assert snarkjs_coset_shift(1 << 9) == \
        21328829733576761151404230261968752855781179864716879432436835449516750606329
    assert snarkjs_coset_shift(1 << 10) == \
        30450688096165933124094588052280452792793350252342406284806180166247113753719
    for log_n in (0, 3, 9, 10, 20, 31):
        s = snarkjs_coset_shift(1 << log_n)
        assert pow(s, 1 << log_n, R_MODULUS) == R_MODULUS - 1  # order exactly 2^(log_n + 1)
    with pytest.raises(ValueError):
        snarkjs_coset_shift(3)


def test_python_proof_with_snarkjs_coset(zkey: Zkey, witness_ints: list[int]) -> None:
    """Proving from the decoded key with snarkjs's conventions gives a valid proof; with bellperson's
    coset (generator 7) instead, it does not. This pins the coefficient values, the point decoding
    and the H-section semantics together."""
    publics = witness_ints[1:zkey.n_public + 1]
    assert _groth16_check(zkey, publics, *_python_prove(zkey, witness_ints, zkey.coset_shift))
    bellperson_shift = fr_root_of_unity(zkey.log_domain_size + 1)
    assert bellperson_shift != zkey.coset_shift
    assert not _groth16_check(zkey, publics, *_python_prove(zkey, witness_ints, bellperson_shift))


# --- point sections on synthetic data (checked as limbs, encoded on demand) ------------------------


def _mont_le(v: int) -> bytes:
    return (v * FQ_R % P_MODULUS).to_bytes(48, "little")


def test_point_decoders_synthetic() -> None:
    """Many points (several per thread chunk), infinity and broken points."""
    g1_rows, g1_expect, g2_rows, g2_expect = [], [], [], []
    for k in range(1, 70):
        xy = (G1Point() * _scalar(k * 7919)).to_xy_bytes_be()
        g1_rows.append(_mont_le(int.from_bytes(xy[:48], "big")) + _mont_le(int.from_bytes(xy[48:], "big")))
        g1_expect.append(xy)
        xy2 = (G2Point() * _scalar(k * 104729)).to_xy_bytes_be()
        c = [int.from_bytes(xy2[i:i + 48], "big") for i in range(0, 192, 48)]
        g2_rows.append(b"".join(_mont_le(v) for v in c))
        g2_expect.append(xy2[48:96] + xy2[:48] + xy2[144:] + xy2[96:144])
        if k % 17 == 0:
            g1_rows.append(bytes(96))
            g1_expect.append(b"\x40" + bytes(95))
            g2_rows.append(bytes(192))
            g2_expect.append(b"\x40" + bytes(191))
    g1 = np.frombuffer(b"".join(g1_rows), np.uint64).reshape(-1, 12)
    assert find_invalid_affine_limbs(g1, is_g2=False) == (-1, "")
    assert [r.tobytes() for r in uncompressed_from_affine_limbs(g1, is_g2=False)] == g1_expect
    g2 = np.frombuffer(b"".join(g2_rows), np.uint64).reshape(-1, 24)
    assert find_invalid_affine_limbs(g2, is_g2=True) == (-1, "")
    assert [r.tobytes() for r in uncompressed_from_affine_limbs(g2, is_g2=True)] == g2_expect

    def flip(limbs: np.ndarray, row: int, byte: int) -> None:
        limbs.view(np.uint8).reshape(limbs.shape[0], -1)[row, byte] ^= 1

    broken = g1.copy()
    flip(broken, 40, 60)
    flip(broken, 50, 10)
    assert find_invalid_affine_limbs(broken, is_g2=False) == (40, "is not on the curve")
    assert find_invalid_affine_limbs(broken, is_g2=False, check_curve=False) == (-1, "")
    broken = g2.copy()
    flip(broken, 33, 100)
    assert find_invalid_affine_limbs(broken, is_g2=True) == (33, "is not on the curve")
    broken = g1.copy()
    broken[3, :6] = np.frombuffer(P_MODULUS.to_bytes(48, "little"), np.uint64)
    assert find_invalid_affine_limbs(broken, is_g2=False, check_curve=False) == (
        3, "has a coordinate that is not below q")


def test_mont_reduce_fr_twice() -> None:
    rng = np.random.default_rng(5)
    values = [int(v) % R_MODULUS for v in rng.integers(0, 2**63, size=50)] + [0, 1, R_MODULUS - 1]
    values += [int.from_bytes(rng.bytes(32), "little") % R_MODULUS for _ in range(50)]
    stored = np.array([_fq_mont.int_to_limbs(v * FR_MONT_R * FR_MONT_R % R_MODULUS, 4) for v in values])
    out, bad = _fq_mont.mont_reduce(stored, R_MODULUS, times=2)
    assert bad == -1 and [_int_le(r) for r in out] == values
    stored[7] = _fq_mont.int_to_limbs(R_MODULUS, 4)
    assert _fq_mont.mont_reduce(stored, R_MODULUS, times=2)[1] == 7


# --- malformed files -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(circom: dict[str, snarkjs_tools.Paths]) -> snarkjs_tools.Paths:
    return circom["multiplier"]


def test_wtns_truncated(small: snarkjs_tools.Paths, tmp_path: Path) -> None:
    size = small.wtns.stat().st_size
    (h_off, _), (d_off, _) = _sections(small.wtns)[1], _sections(small.wtns)[2]
    for cut, fragment in ((0, "shorter than the 12-byte header"), (7, "shorter than the 12-byte header"),
                          (12, "section table truncated"), (20, "section table truncated"),
                          (h_off + 10, "claims 40 bytes"), (d_off - 4, "section table truncated"),
                          (size - 1, "but only")):
        path = _truncated(small.wtns, tmp_path / f"cut{cut}.wtns", cut)
        _expect_format_error(read_wtns, path, fragment)


def test_zkey_truncated(small: snarkjs_tools.Paths, tmp_path: Path) -> None:
    sections = _sections(small.zkey)
    for cut in (0, 11, 15, sections[2][0] + 100, sections[4][0] + 50, sections[7][0] + 1,
                sections[9][0] + 96 * 3 + 7, small.zkey.stat().st_size - 1):
        path = _truncated(small.zkey, tmp_path / f"cut{cut}.zkey", cut)
        err = _expect_format_error(read_zkey, path)
        assert err.offset is not None or "missing section" in str(err)


def test_wrong_magic(small: snarkjs_tools.Paths, tmp_path: Path) -> None:
    path = _patched(small.zkey, tmp_path / "magic.zkey", 0, b"zkex")
    _expect_format_error(read_zkey, path, "bad magic b'zkex', expected b'zkey'", "offset 0")
    _expect_format_error(read_zkey, small.wtns, "bad magic b'wtns', expected b'zkey'")
    _expect_format_error(read_wtns, small.zkey, "bad magic b'zkey', expected b'wtns'")


def test_wrong_version(small: snarkjs_tools.Paths, tmp_path: Path) -> None:
    path = _patched(small.zkey, tmp_path / "v2.zkey", 4, struct.pack("<I", 2))
    _expect_format_error(read_zkey, path, "unsupported version 2", "offset 4")
    path = _patched(small.wtns, tmp_path / "v3.wtns", 4, struct.pack("<I", 3))
    _expect_format_error(read_wtns, path, "unsupported version 3")


def test_wtns_wrong_prime_and_values(small: snarkjs_tools.Paths, tmp_path: Path) -> None:
    w = read_wtns(small.wtns)
    path = tmp_path / "ok.wtns"
    write_wtns(path, w)
    assert np.array_equal(read_wtns(path), w)
    assert path.read_bytes() == small.wtns.read_bytes()

    path = tmp_path / "bn.wtns"
    write_wtns(path, [1, 2, 3], prime=BN254_R)
    _expect_format_error(read_wtns, path, f"witness is for another curve: prime {BN254_R} (BN254 scalar field)")

    values = [_int_le(r) for r in w]
    values[5] = R_MODULUS
    path = tmp_path / "noncanonical.wtns"
    write_wtns(path, values)
    d_off, _ = _sections(small.wtns)[2]
    err = _expect_format_error(read_wtns, path, "witness value #5", "not below r")
    assert err.offset == d_off + 5 * 32

    path = tmp_path / "n8.wtns"
    write_wtns(path, [1, 2], n8=40)
    _expect_format_error(read_wtns, path, "n8 = 40", "expected 32")

    h_off, _ = _sections(small.wtns)[1]
    path = _patched(small.wtns, tmp_path / "count.wtns", h_off + 36, struct.pack("<I", len(w) + 1))
    _expect_format_error(read_wtns, path, f"announces {len(w) + 1} values")


def test_duplicate_and_missing_sections(tmp_path: Path) -> None:
    def container(magic: bytes, sections: list[tuple[int, bytes]]) -> bytes:
        out = magic + struct.pack("<II", 1, len(sections))
        for kind, data in sections:
            out += struct.pack("<IQ", kind, len(data)) + data
        return out

    path = tmp_path / "dup.zkey"
    path.write_bytes(container(b"zkey", [(1, struct.pack("<I", 1)), (1, struct.pack("<I", 1))]))
    _expect_format_error(read_zkey, path, "section type 1 appears twice", "offset 28")
    path = tmp_path / "missing.zkey"
    path.write_bytes(container(b"zkey", [(1, struct.pack("<I", 1))]))
    _expect_format_error(read_zkey, path, "missing section 2 (groth16 header)")
    path = tmp_path / "plonk.zkey"
    path.write_bytes(container(b"zkey", [(1, struct.pack("<I", 2))]))
    _expect_format_error(read_zkey, path, "protocol id 2 (plonk), expected 1 (groth16)")
    path = tmp_path / "nowitness.wtns"
    path.write_bytes(container(b"wtns", [(1, struct.pack("<I", 32) + R_MODULUS.to_bytes(32, "little")
                                          + struct.pack("<I", 0))]))
    _expect_format_error(read_wtns, path, "missing section 2 (witness values)")


def test_zkey_wrong_curve(small: snarkjs_tools.Paths, tmp_path: Path) -> None:
    off, _ = _sections(small.zkey)[2]
    path = _patched(small.zkey, tmp_path / "q.zkey", off + 4, (P_MODULUS + 2).to_bytes(48, "little"))
    _expect_format_error(read_zkey, path, "zkey is for another curve: q = ", "section 2")
    path = _patched(small.zkey, tmp_path / "r.zkey", off + 56, BN254_R.to_bytes(32, "little"))
    _expect_format_error(read_zkey, path, "zkey is for another curve: r = ")
    path = _patched(small.zkey, tmp_path / "n8q.zkey", off, struct.pack("<I", 32))
    _expect_format_error(read_zkey, path, "another curve")


def test_zkey_bad_counts(small: snarkjs_tools.Paths, tmp_path: Path) -> None:
    zk = read_zkey(small.zkey)
    off, _ = _sections(small.zkey)[2]
    counts = off + 4 + 48 + 4 + 32
    path = _patched(small.zkey, tmp_path / "domain.zkey", counts + 8, struct.pack("<I", 12))
    _expect_format_error(read_zkey, path, "domainSize = 12, expected a power of two")
    path = _patched(small.zkey, tmp_path / "nvars.zkey", counts, struct.pack("<I", zk.n_vars + 1))
    _expect_format_error(read_zkey, path, "section 5 (A points)", f"expected {(zk.n_vars + 1) * 96}")
    path = _patched(small.zkey, tmp_path / "npub.zkey", counts + 4, struct.pack("<I", zk.n_public + 1))
    _expect_format_error(read_zkey, path, "section 3 (IC points)", "nPublic + 1")


def test_zkey_bad_coefficients(small: snarkjs_tools.Paths, tmp_path: Path) -> None:
    zk = read_zkey(small.zkey)
    off, _ = _sections(small.zkey)[4]
    entry = off + 4 + 44 * 2  # coefficient #2
    path = _patched(small.zkey, tmp_path / "signal.zkey", entry + 8, struct.pack("<I", zk.n_vars))
    err = _expect_format_error(read_zkey, path, f"coefficient #2: signal {zk.n_vars} is not below nVars = "
                                                 f"{zk.n_vars}", "section 4 (coefficients)")
    assert err.offset == entry + 8
    path = _patched(small.zkey, tmp_path / "matrix.zkey", entry, struct.pack("<I", 2))
    _expect_format_error(read_zkey, path, "coefficient #2: matrix 2, expected 0 (A) or 1 (B)")
    path = _patched(small.zkey, tmp_path / "row.zkey", entry + 4, struct.pack("<I", zk.domain_size))
    _expect_format_error(read_zkey, path, f"constraint {zk.domain_size} is not below domainSize")
    path = _patched(small.zkey, tmp_path / "value.zkey", entry + 12, R_MODULUS.to_bytes(32, "little"))
    _expect_format_error(read_zkey, path, "coefficient #2: value", "is not below r")
    path = _patched(small.zkey, tmp_path / "count.zkey", off, struct.pack("<I", len(zk.coef_value) - 1))
    _expect_format_error(read_zkey, path, f"holds {len(zk.coef_value) - 1} coefficients")


def test_zkey_bad_points(small: snarkjs_tools.Paths, tmp_path: Path) -> None:
    sections = _sections(small.zkey)
    raw = small.zkey.read_bytes()
    # A point of the A section pushed off the curve.
    a_off, _ = sections[5]
    point = 1 if raw[a_off + 96: a_off + 192] != bytes(96) else 2
    pos = a_off + 96 * point + 50
    path = _patched(small.zkey, tmp_path / "a.zkey", pos, bytes([raw[pos] ^ 1]))
    err = _expect_format_error(read_zkey, path, f"point #{point} of", "is not on the curve",
                               "section 5 (A points)", kind=PointDecodeError)
    assert err.offset == a_off + 96 * point
    read_zkey(path, check_points=False)  # the curve check can be skipped for trusted keys
    # A non-canonical coordinate in H.
    h_off, _ = sections[9]
    path = _patched(small.zkey, tmp_path / "h.zkey", h_off + 96 * 3, P_MODULUS.to_bytes(48, "little"))
    _expect_format_error(read_zkey, path, "point #3 of", "not below q", "section 9 (H points)",
                         kind=PointDecodeError)
    # B2 off the curve.
    b2_off, _ = sections[7]
    g2_point = next(i for i in range(len(raw)) if raw[b2_off + 192 * i: b2_off + 192 * (i + 1)] != bytes(192))
    pos = b2_off + 192 * g2_point + 150
    path = _patched(small.zkey, tmp_path / "b2.zkey", pos, bytes([raw[pos] ^ 4]))
    _expect_format_error(read_zkey, path, f"point #{g2_point} of", "section 7 (B2 points)", kind=PointDecodeError)

    # Header points: off the curve, on the curve but outside G1, at infinity.
    header = sections[2][0] + 4 + 48 + 4 + 32 + 12
    delta1 = header + 96 * 2 + 192 * 2
    path = _patched(small.zkey, tmp_path / "alpha.zkey", header + 5, bytes([raw[header + 5] ^ 1]))
    _expect_format_error(read_zkey, path, "alpha1", "not a valid G1 point", kind=PointDecodeError)
    outside = G1Point.from_xy_bytes_unchecked_be(bytes(48) + (2).to_bytes(48, "big"))
    assert not outside.is_in_subgroup()
    path = _patched(small.zkey, tmp_path / "delta.zkey", delta1, bytes(48) + _mont_le(2))
    _expect_format_error(read_zkey, path, "delta1", "not a valid G1 point", kind=PointDecodeError)
    path = _patched(small.zkey, tmp_path / "gamma.zkey", header + 96 * 2 + 192, bytes(192))
    _expect_format_error(read_zkey, path, "gamma2", "point at infinity", kind=PointDecodeError)
    # IC points are checked too.
    ic_off, _ = sections[3]
    path = _patched(small.zkey, tmp_path / "ic.zkey", ic_off + 96 + 60, bytes([raw[ic_off + 96 + 60] ^ 1]))
    _expect_format_error(read_zkey, path, "IC[1]", kind=PointDecodeError)


def test_section_past_eof(small: snarkjs_tools.Paths, tmp_path: Path) -> None:
    off, _ = _sections(small.zkey)[4]
    path = _patched(small.zkey, tmp_path / "big.zkey", off - 8, struct.pack("<Q", 1 << 40))
    _expect_format_error(read_zkey, path, f"claims {1 << 40} bytes", f"offset {off - 12}")
