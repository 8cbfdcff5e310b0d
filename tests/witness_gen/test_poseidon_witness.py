"""The batched Poseidon witness equals, hash by hash, what the gadget allocates under WitnessCS."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs, limbs_to_ints
from cuzk.gadgets.poseidon import poseidon_hash_circuit
from cuzk.hashes.poseidon import poseidon_hash
from cuzk.hashes.poseidon_constants import custom_tag, merkle_tree_tag, poseidon_constants
from cuzk.r1cs import WitnessCS
from cuzk.witness_gen.poseidon import poseidon_aux_count, poseidon_witness

# Every (arity, tag) the Filecoin circuits hash with: tree levels and comm_r (MerkleTree tags of
# 2, 4, 8), PoRep columns (arity = layers: 2 at 2KiB, 11 at 32GiB) and SnapDeals' Poseidon_GR.
CASES = [(2, merkle_tree_tag(2)), (2, custom_tag(1)), (4, merkle_tree_tag(4)), (8, merkle_tree_tag(8)),
         (11, merkle_tree_tag(11))]
AUX_PER_HASH = {2: 311, 4: 377, 8: 505, 11: 598}


def _gadget_aux(arity: int, tag: int, values: list[int]) -> tuple[list[int], int]:
    """The aux the gadget allocates for one hash under WitnessCS (inputs excluded), and its digest."""
    cs = WitnessCS()
    cs.alloc_input("ONE", 1)
    inputs = [cs.alloc(f"x{i}", v) for i, v in enumerate(values)]
    out = poseidon_hash_circuit(cs, inputs, poseidon_constants(arity), tag, values)
    assert out.variable.index == cs.num_aux - 1
    return cs.aux_assignment[arity:], out.value  # type: ignore[return-value]


@pytest.mark.parametrize(("arity", "tag"), CASES)
def test_batch_equals_gadget_per_instance(arity: int, tag: int) -> None:
    rng = random.Random(arity * 7 + tag % 97)
    instances = [[rng.randrange(R_MODULUS) for _ in range(arity)] for _ in range(3)]
    instances += [[0] * arity, [R_MODULUS - 1] * arity]  # the edges of the field
    batch = ints_to_limbs([v for values in instances for v in values]).reshape(len(instances), arity, 4)
    witness = poseidon_witness(batch, poseidon_constants(arity), tag)
    assert witness.aux.shape == (len(instances), AUX_PER_HASH[arity], 4)
    assert poseidon_aux_count(poseidon_constants(arity)) == AUX_PER_HASH[arity]
    digests = limbs_to_ints(witness.digests)
    for i, values in enumerate(instances):
        aux, digest = _gadget_aux(arity, tag, values)
        assert limbs_to_ints(witness.aux[i]) == aux
        assert digests[i] == digest == poseidon_hash(values, arity=arity, tag=tag)


def test_empty_batch() -> None:
    witness = poseidon_witness(np.zeros((0, 8, 4), dtype=np.uint64), poseidon_constants(8), merkle_tree_tag(8))
    assert witness.aux.shape == (0, 505, 4)
    assert witness.digests.shape == (0, 4)


def test_bad_inputs_are_named() -> None:
    constants, tag = poseidon_constants(2), merkle_tree_tag(2)
    with pytest.raises(SynthesisError, match=r"shape \(N, 2, 4\), got \(3, 8, 4\)"):
        poseidon_witness(np.zeros((3, 8, 4), dtype=np.uint64), constants, tag)
    with pytest.raises(SynthesisError, match="uint64"):
        poseidon_witness(np.zeros((3, 2, 4), dtype=np.int64), constants, tag)
    bad = np.zeros((3, 2, 4), dtype=np.uint64)
    bad[2, 1] = np.uint64(2**64 - 1)
    with pytest.raises(SynthesisError, match="input 1 of hash 2 is not a canonical"):
        poseidon_witness(bad, constants, tag)
    with pytest.raises(SynthesisError, match="domain tag"):
        poseidon_witness(np.zeros((1, 2, 4), dtype=np.uint64), constants, R_MODULUS)
