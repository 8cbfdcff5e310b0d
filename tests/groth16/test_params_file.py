"""bellperson .params/.vk files and 192-byte proofs: byte-exact round trips and precise errors."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from cuzk.circuits.registry import lookup
from cuzk.curve import encoding
from cuzk.errors import FormatError, PointDecodeError
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.formats.params_file import (
    VK_HEADER_BYTES,
    OfficialNameError,
    check_params_points,
    read_params,
    read_vk,
    scan_layout,
    vk_from_bytes,
    vk_to_bytes,
    write_params,
    write_vk,
)
from cuzk.groth16.proof import PROOF_BYTES, Proof, proofs_from_bytes, proofs_to_bytes
from cuzk.groth16.prover import prove
from cuzk.groth16.synthesis import circuit_shape, synthesize_for_proving
from cuzk.groth16.verifier import verify_proof


def test_params_round_trip_is_byte_identical(mimc_params, tmp_path: Path) -> None:
    original = mimc_params.params_path.read_bytes()
    pk = read_params(mimc_params.params_path)
    again = tmp_path / "again.params"
    write_params(again, pk)
    assert again.read_bytes() == original
    vk_again = tmp_path / "again.vk"
    write_vk(vk_again, read_vk(mimc_params.vk_path))
    assert vk_again.read_bytes() == mimc_params.vk_path.read_bytes()
    # the .vk is exactly the head of the .params
    assert original.startswith(mimc_params.vk_path.read_bytes())


def test_reading_gives_back_the_same_points(mimc_params) -> None:
    pk = read_params(mimc_params.params_path)
    assert pk.vk == mimc_params.pk.vk
    for name in ("h", "l", "a", "b_g1", "b_g2"):
        ours, theirs = getattr(pk, name), getattr(mimc_params.pk, name)
        assert len(ours) == len(theirs)
        assert ours.points() == theirs.points()


def test_layout_matches_the_circuit(mimc_params) -> None:
    layout = scan_layout(mimc_params.params_path)
    shape = circuit_shape(lookup(mimc_params.circuit_id).blank())
    assert layout.num_ic == shape.num_inputs
    assert layout.vector("h").count == 2 ** 10 - 1
    assert layout.vector("l").count == shape.num_aux
    assert layout.vector("a").count == shape.a_query_len
    assert layout.vector("b_g1").count == layout.vector("b_g2").count == shape.b_query_len
    assert layout.file_size == mimc_params.params_path.stat().st_size


def test_proving_from_a_memory_mapped_file(mimc_params) -> None:
    pk = read_params(mimc_params.params_path)
    circuit = lookup(mimc_params.circuit_id).example(random.Random(5))
    asg = Assignment.from_proving_assignment(synthesize_for_proving(circuit))
    assert verify_proof(pk.vk, prove(pk, asg), asg.public_inputs())


@pytest.mark.parametrize("cut", [0, 50, VK_HEADER_BYTES - 2, VK_HEADER_BYTES + 10, -1000, -1])
def test_truncated_params_name_the_offset(mimc_params, tmp_path: Path, cut: int) -> None:
    data = mimc_params.params_path.read_bytes()
    bad = tmp_path / "cut.params"
    bad.write_bytes(data[:cut])  # cut < 0 drops the tail; 0 leaves an empty file
    with pytest.raises(FormatError) as info:
        read_params(bad)
    msg = str(info.value)
    assert str(bad) in msg and "offset" in msg


def test_trailing_bytes_and_bad_lengths(mimc_params, tmp_path: Path) -> None:
    data = mimc_params.params_path.read_bytes()
    bad = tmp_path / "long.params"
    bad.write_bytes(data + b"\0")
    with pytest.raises(FormatError, match="1 unexpected bytes after the b_g2 vector"):
        read_params(bad)
    layout = scan_layout(mimc_params.params_path)
    h_len_at = layout.vector("h").offset - 4
    inflated = bytearray(data)
    inflated[h_len_at:h_len_at + 4] = struct.pack(">I", 1 << 30)
    bad.write_bytes(bytes(inflated))
    with pytest.raises(FormatError, match="h vector declares 1073741824 points"):
        read_params(bad)


def test_corrupted_vk_point_is_named(mimc_params, tmp_path: Path) -> None:
    data = bytearray(mimc_params.vk_path.read_bytes())
    data[96 + 95] ^= 1  # last byte of beta_g1.y: no longer on the curve
    bad = tmp_path / "bad.vk"
    bad.write_bytes(bytes(data))
    with pytest.raises(PointDecodeError) as info:
        read_vk(bad)
    assert "vk.beta_g1" in str(info.value) and "offset 96" in str(info.value)


def test_corrupted_vector_point_is_found_by_check(mimc_params, tmp_path: Path) -> None:
    layout = scan_layout(mimc_params.params_path)
    data = bytearray(mimc_params.params_path.read_bytes())
    row = 3
    pos = layout.vector("l").offset + row * 96 + 95
    data[pos] ^= 1
    bad = tmp_path / "bad.params"
    bad.write_bytes(bytes(data))
    with pytest.raises(PointDecodeError) as info:
        check_params_points(bad)
    assert f"l[{row}]" in str(info.value)


def test_official_names_are_refused_unless_forced(mimc_params, tmp_path: Path) -> None:
    name = tmp_path / "v28-stacked-proof-of-replication-test.params"
    with pytest.raises(OfficialNameError, match="v28-"):
        write_params(name, mimc_params.pk)
    assert not name.exists()
    write_params(name, mimc_params.pk, force_official_name=True)
    assert name.exists()


def test_vk_bytes_round_trip_and_size(mimc_params) -> None:
    raw = vk_to_bytes(mimc_params.pk.vk)
    assert len(raw) == VK_HEADER_BYTES + 96 * len(mimc_params.pk.vk.ic)
    assert vk_from_bytes(raw) == mimc_params.pk.vk
    with pytest.raises(FormatError, match="unexpected bytes"):
        vk_from_bytes(raw + b"x")


def test_proof_bytes_round_trip(mimc_params) -> None:
    circuit = lookup(mimc_params.circuit_id).example(random.Random(8))
    asg = Assignment.from_proving_assignment(synthesize_for_proving(circuit))
    proof = prove(mimc_params.pk, asg)
    raw = proof.to_bytes()
    assert len(raw) == PROOF_BYTES
    assert Proof.from_bytes(raw) == proof
    assert Proof.from_bytes(raw).to_bytes() == raw
    assert raw[:48] == encoding.g1_to_compressed(proof.a)
    multi = proofs_to_bytes([proof, proof, proof])
    assert len(multi) == 3 * PROOF_BYTES and proofs_from_bytes(multi, expected=3) == [proof] * 3
    with pytest.raises(FormatError, match="expected 2 partition proofs"):
        proofs_from_bytes(multi, expected=2)
    with pytest.raises(FormatError, match=r"multiple of 192"):
        proofs_from_bytes(multi[:-1])


def test_bad_proof_bytes(mimc_params) -> None:
    circuit = lookup(mimc_params.circuit_id).example(random.Random(9))
    asg = Assignment.from_proving_assignment(synthesize_for_proving(circuit))
    raw = bytearray(prove(mimc_params.pk, asg).to_bytes())
    identity = bytes([0xC0]) + bytes(47)
    with pytest.raises(PointDecodeError, match=r"proof\.A"):
        Proof.from_bytes(identity + bytes(raw[48:]))
    raw[150] ^= 0xFF  # C's x coordinate: almost surely not on the curve
    with pytest.raises(PointDecodeError) as info:
        Proof.from_bytes(bytes(raw), source="p.bin")
    assert "proof.C" in str(info.value) and "p.bin" in str(info.value)
