"""The batched SHA-256 witness generator against the real gadget under WitnessCS, bit for bit.

Each configuration (message length + constant bits) gets random instances; per instance the gadget
runs on a fresh WitnessCS and the aux it appended after the message bits must equal the generator's
row, and the digest must equal hashlib's. The Filecoin message shapes (PoRep label, SnapDeals/tree_d
hash2) are captured from the circuits' own code, so their constant patterns are the real ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np
import pytest

import cuzk.circuits.filecoin.porep as porep
import cuzk.gadgets.por as por
import cuzk.gadgets.sha256 as sha256_gadget
from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import limbs_to_int
from cuzk.gadgets.boolean import (
    FALSE,
    IS_KIND,
    TRUE,
    AllocatedBit,
    Boolean,
    reverse_bit_numbering,
    u64_into_boolean_vec_le,
)
from cuzk.gadgets.num import AllocatedNum
from cuzk.gadgets.sha256 import hash2_circuit, sha256
from cuzk.r1cs import ConstraintSystem, WitnessCS
from cuzk.witness_gen import Sha256WitnessPlan, fr32_packed_limbs
from cuzk.witness_gen.sha256_trace import IV_KINDS, trace_compression


def _gadget_aux(mask: np.ndarray, constants: np.ndarray, message: np.ndarray) -> list[int]:
    """Allocate the non-constant bits, run `sha256`, return the aux it allocated."""
    cs = WitnessCS()
    bits = [(TRUE if constants[j] else FALSE) if mask[j] else Boolean(IS_KIND, AllocatedBit.alloc(cs, bool(message[j])))
            for j in range(mask.size)]
    start = cs.num_aux
    sha256(cs, bits)
    return cs.aux_assignment[start:]


def _random_instances(rng: np.random.Generator, mask: np.ndarray, constants: np.ndarray, n: int) -> np.ndarray:
    messages = rng.integers(0, 2, (n, mask.size), dtype=np.uint8)
    messages[:, mask] = constants[mask]
    return messages


def _check(mask: np.ndarray, constants: np.ndarray, n: int, seed: int) -> Sha256WitnessPlan:
    rng = np.random.default_rng(seed)
    plan = Sha256WitnessPlan.for_message(mask, constants)
    messages = _random_instances(rng, mask, constants, n)
    aux, digest_bits = plan.generate(messages)
    assert aux.shape == (n, plan.num_aux) and digest_bits.shape == (n, 256)
    for i in range(n):
        expected = _gadget_aux(mask, constants, messages[i])
        assert len(expected) == plan.num_aux
        np.testing.assert_array_equal(aux[i], np.array(expected, dtype=np.uint8), err_msg=f"instance {i}")
        digest = np.packbits(digest_bits[i]).tobytes()
        assert digest == hashlib.sha256(np.packbits(messages[i]).tobytes()).digest()
    return plan


def _config(length: int, constant_slices: Sequence[slice] = (), seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = np.zeros(length, dtype=bool)
    for s in constant_slices:
        mask[s] = True
    return mask, np.where(mask, rng.integers(0, 2, length), 0).astype(np.uint8)


@pytest.mark.parametrize(("length", "constant_slices"), [
    (8, ()),  # one block, almost all padding
    (440, ()),  # the longest message that fits one block with its padding
    (448, ()),  # the padding spills into a second, all-constant-message block
    (512, ()),  # one full block of allocated bits, then a padding block
    (512, (slice(0, 256),)),  # the first half constant: the IV and constants fold deep into the rounds
    (1024, (slice(100, 300), slice(700, 701))),  # constant runs inside a two-block message
    (1024, (slice(0, 512),)),  # a wholly constant first block: the second starts from a constant, non-IV state
    (1536, (slice(0, 1536, 3),)),  # every third bit constant, over three blocks
])
def test_generator_matches_gadget(length: int, constant_slices: Sequence[slice]) -> None:
    mask, constants = _config(length, constant_slices, seed=length)
    _check(mask, constants, n=2, seed=length + 1)


def test_random_constant_patterns_match_gadget() -> None:
    rng = np.random.default_rng(7)
    for trial in range(3):
        length = 8 * int(rng.integers(1, 80))
        mask = rng.random(length) < rng.random()
        constants = np.where(mask, rng.integers(0, 2, length), 0).astype(np.uint8)
        _check(mask, constants, n=1, seed=100 + trial)


def test_all_constant_message_allocates_nothing() -> None:
    mask, constants = _config(256, (slice(0, 256),), seed=3)
    plan = _check(mask, constants, n=2, seed=4)
    assert plan.num_aux == 0


def _capture(monkeypatch: pytest.MonkeyPatch, module: object) -> list[tuple[list[Boolean], int, int]]:
    """Wrap `module.hash_circuit` to record (message, aux count before, aux count after) of each call."""
    calls: list[tuple[list[Boolean], int, int]] = []
    real: Callable = sha256_gadget.hash_circuit

    def recording(cs: ConstraintSystem, bits: Sequence[Boolean]):  # type: ignore[no-untyped-def]
        before = cs.num_aux
        out = real(cs, bits)
        calls.append((list(bits), before, cs.num_aux))
        return out

    monkeypatch.setattr(module, "hash_circuit", recording)
    return calls


def _check_hash_circuit_calls(calls: list[tuple[list[Boolean], int, int]],
                              cs_list: list[WitnessCS]) -> Sha256WitnessPlan:
    """All calls share one configuration: generate them as a batch and compare every aux (bits + packed digest)
    with the gadget's, and the digests with hashlib."""
    plan = Sha256WitnessPlan.for_booleans(calls[0][0])
    for message, _, _ in calls[1:]:
        other = Sha256WitnessPlan.for_booleans(message)
        np.testing.assert_array_equal(other.constant_positions, plan.constant_positions)
        np.testing.assert_array_equal(other.constant_values, plan.constant_values)
    messages = np.stack([Sha256WitnessPlan.values_of(message) for message, _, _ in calls])
    witness = plan.generate_hash_circuit(messages)
    digest_bits = plan.generate(messages).digest_bits
    np.testing.assert_array_equal(fr32_packed_limbs(digest_bits), witness.packed)
    assert not (witness.packed[:, 3] >> np.uint64(62)).any()  # fr32: below 2^254
    limbs = witness.aux_limbs()
    for i, ((_, before, after), cs) in enumerate(zip(calls, cs_list, strict=True)):
        expected = cs.aux_assignment[before:after]
        assert len(expected) == plan.num_aux + 1
        np.testing.assert_array_equal(witness.aux[i], np.array(expected[:-1], dtype=np.uint8))
        assert limbs_to_int(witness.packed[i]) == expected[-1]
        assert [limbs_to_int(x) for x in limbs[i, -3:]] == expected[-3:]
        assert np.packbits(digest_bits[i]).tobytes() == hashlib.sha256(np.packbits(messages[i]).tobytes()).digest()
    return plan


def _random_num(cs: WitnessCS, rng: np.random.Generator) -> AllocatedNum:
    return AllocatedNum.alloc(cs, "x", int.from_bytes(rng.bytes(32), "little") % R_MODULUS)


def _fr_stream_bits(cs: WitnessCS, rng: np.random.Generator) -> list[Boolean]:
    """A random allocated field element as the circuits feed it to SHA-256: 255 bits + pad, byte-reversed."""
    return reverse_bit_numbering(_random_num(cs, rng).to_bits_le(cs))


def test_porep_label_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    """`_create_label` of layers 1 and 2 (different constant layer index), replica id / node / parents allocated
    as the circuit allocates them; parents repeated as the circuit expands them."""
    calls = _capture(monkeypatch, porep)
    rng = np.random.default_rng(11)
    plans = []
    for layer in (1, 2):
        layer_calls, layer_cs = [], []
        for _ in range(2):
            cs = WitnessCS()
            replica = _fr_stream_bits(cs, rng)
            node_bits_be = u64_into_boolean_vec_le(cs, int(rng.integers(0, 1 << 62)))[::-1]
            if layer == 1:
                base = [_fr_stream_bits(cs, rng) for _ in range(porep.BASE_DEGREE)]
                parents = base * 6 + base[:1]
            else:
                base = [_fr_stream_bits(cs, rng) for _ in range(porep.BASE_DEGREE + porep.EXP_DEGREE)]
                parents = base * 2 + base[:9]
            porep._create_label(cs, replica, parents, layer, node_bits_be)
            layer_calls.append(calls[-1])
            layer_cs.append(cs)
        plans.append(_check_hash_circuit_calls(layer_calls, layer_cs))
    assert plans[0].num_blocks == 20
    np.testing.assert_array_equal(plans[0].constant_positions, plans[1].constant_positions)
    assert not np.array_equal(plans[0].constant_values, plans[1].constant_values)  # the layer index


def test_snap_hash2(monkeypatch: pytest.MonkeyPatch) -> None:
    """hash2 (SnapDeals apex rows): two field elements, 255 allocated bits and one pad bit each."""
    calls = _capture(monkeypatch, sha256_gadget)
    rng = np.random.default_rng(12)
    cs_list = []
    for _ in range(4):
        cs = WitnessCS()
        hash2_circuit(cs, _random_num(cs, rng), _random_num(cs, rng))
        cs_list.append(cs)
    plan = Sha256WitnessPlan.for_booleans(calls[0][0])
    assert plan.message_bits == 512 and plan.constant_positions.tolist() == [248, 504]
    _check_hash_circuit_calls(calls, cs_list)


def test_tree_d_node_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    """A binary SHA-256 tree node as Merkle inclusion hashes it (`node_hash_circuit`, PoRep/SnapDeals tree_d)."""
    calls = _capture(monkeypatch, por)
    rng = np.random.default_rng(13)
    cs_list = []
    for _ in range(3):
        cs = WitnessCS()
        por.node_hash_circuit(cs, por.SHA256, [_random_num(cs, rng), _random_num(cs, rng)])
        cs_list.append(cs)
    _check_hash_circuit_calls(calls, cs_list)


def test_trace_of_the_iv_block_is_cached_per_configuration() -> None:
    """Repeated compressions (a long message's middle blocks) share one trace, so plans stay small."""
    plan = Sha256WitnessPlan.all_allocated(512 * 6)
    assert plan.num_blocks == 7
    assert len(plan._table_len) == 3  # first block (constant IV), middle blocks, the padding block
    assert plan.block_aux_counts[1] == plan.block_aux_counts[5]
    full = trace_compression([list(w) for w in IV_KINDS], [IS_KIND] * 512)
    assert plan.block_aux_counts[0] == full.codes.shape[0]


def test_bad_inputs_are_named() -> None:
    mask, constants = _config(64, (slice(0, 8),), seed=5)
    constants[:8] = 1
    plan = Sha256WitnessPlan.for_message(mask, constants)
    good = _random_instances(np.random.default_rng(0), mask, constants, 2)
    with pytest.raises(ValueError, match=r"shape \(N, 64\)"):
        plan.generate(good[:, :32])
    bad = good.copy()
    bad[1, 3] = 0
    with pytest.raises(SynthesisError, match="message bit 3 of instance 1 is 0, but the plan has it as the constant 1"):
        plan.generate(bad)
    bad = good.copy()
    bad[0, 40] = 2
    with pytest.raises(SynthesisError, match="message bit 40 of instance 0 is 2, not 0 or 1"):
        plan.generate(bad)
    with pytest.raises(TypeError, match="bool or integer"):
        plan.generate(good.astype(np.float32))
    with pytest.raises(ValueError, match="whole bytes"):
        Sha256WitnessPlan.all_allocated(12)
    with pytest.raises(ValueError, match="constant message bit 2 has value 3"):
        Sha256WitnessPlan.for_message(np.ones(8, dtype=bool), np.array([0, 1, 3, 0, 0, 0, 0, 0]))
    cs = WitnessCS()
    bit = AllocatedBit.alloc(cs, True)
    with pytest.raises(ValueError, match="message bit 1 is a negated view"):
        Sha256WitnessPlan.for_booleans([Boolean(IS_KIND, bit), Boolean(IS_KIND, bit).not_()] + [FALSE] * 6)
    with pytest.raises(ValueError, match="C-contiguous"):
        plan.generate(good, out=np.empty((2, plan.num_aux + 1), dtype=np.uint8))


def test_bool_input_and_preallocated_output() -> None:
    mask, constants = _config(128, (slice(0, 16),), seed=6)
    plan = Sha256WitnessPlan.for_message(mask, constants)
    messages = _random_instances(np.random.default_rng(1), mask, constants, 3)
    reference = plan.generate(messages)
    buffer = np.zeros((5, plan.num_aux), dtype=np.uint8)
    out = plan.generate(messages.astype(bool), out=buffer[1:4])
    assert out.aux.base is not None
    np.testing.assert_array_equal(buffer[1:4], reference.aux)
    np.testing.assert_array_equal(out.digest_bits, reference.digest_bits)
    assert not buffer[0].any() and not buffer[4].any()
    empty = plan.generate(np.zeros((0, 128), dtype=np.uint8))
    assert empty.aux.shape == (0, plan.num_aux) and empty.digest_bits.shape == (0, 256)
