"""A small circuit whose generator can leave its SHA-256 aux to a device, for the backends' tests of
`prove_compiled(..., deferred=...)` (CPU here, CUDA in tests/gpu): `messages` allocated 256-bit
messages, each hashed by `hash_circuit` and the packed digest made public. One compression a message,
~27k constraints each."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from cuzk.gadgets.boolean import AllocatedBit, Is
from cuzk.gadgets.sha256 import hash_circuit
from cuzk.r1cs import ConstraintSystem
from cuzk.witness_gen.deferred import DeferredWitness
from cuzk.witness_gen.sha256 import Sha256WitnessPlan

MESSAGE_BITS = 256
PLAN = Sha256WitnessPlan.all_allocated(MESSAGE_BITS)


@dataclass
class HashesCircuit:
    count: int
    messages: np.ndarray | None  #: (count, 256) uint8 bits, stream order; None: the blank circuit

    DEFERS_WITNESS: ClassVar[bool] = True

    @classmethod
    def random(cls, count: int, seed: int) -> HashesCircuit:
        rng = random.Random(seed)
        return cls(count, np.array([[rng.getrandbits(1) for _ in range(MESSAGE_BITS)] for _ in range(count)],
                                   dtype=np.uint8))

    def synthesize(self, cs: ConstraintSystem) -> None:
        for k in range(self.count):
            bits = [Is(AllocatedBit.alloc(cs, None if self.messages is None else bool(self.messages[k, j])))
                    for j in range(MESSAGE_BITS)]
            hash_circuit(cs, bits).inputize(cs)

    @property
    def per_message(self) -> int:
        return MESSAGE_BITS + PLAN.num_aux + 1

    def witness_arrays(self, out: np.ndarray | None = None,
                       deferred: DeferredWitness | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(inputs, aux) limbs: per message its bits, the SHA-256 aux (left unwritten with `deferred`)
        and the packed digest; the inputs are ONE and the digests."""
        assert self.messages is not None
        aux = np.zeros((self.count * self.per_message, 4), dtype=np.uint64) if out is None else out
        per = aux.reshape(self.count, self.per_message, 4)
        per[:, :MESSAGE_BITS] = 0
        per[:, :MESSAGE_BITS, 0] = self.messages
        if deferred is None:
            witness = PLAN.generate_hash_circuit(self.messages)
            per[:, MESSAGE_BITS:MESSAGE_BITS + PLAN.num_aux] = 0
            per[:, MESSAGE_BITS:MESSAGE_BITS + PLAN.num_aux, 0] = witness.aux
            packed = witness.packed
        else:
            rows = np.arange(self.count, dtype=np.int64) * self.per_message + MESSAGE_BITS
            packed = deferred.hash_circuit(PLAN, self.messages, rows)
        per[:, -1] = packed
        inputs = np.zeros((1 + self.count, 4), dtype=np.uint64)
        inputs[0, 0] = 1
        inputs[1:] = packed
        return inputs, aux
