"""SHA-256 aux left for a device to write: a partition's witness with its bulk generated elsewhere.

Nearly all of a PoRep-32GiB partition's 130M aux values (98%) are the bits of its 5,040 SHA-256
compressions. A generator given a `DeferredSha256` computes each SHA-256 gadget's digest on the host
(hashlib: the next hash's input and the packed digest row need it) and records, instead of writing
the gadget's aux bits, its message and the aux row where its bits start. Everything else (inputs,
Poseidon, bit decompositions, packed digests) is written into the aux vector as usual, so the host
touches ~2% of it. A device then uploads only the rows the host wrote (`host_ranges`) and writes the
recorded gadgets' bits straight into its copy of the vector (`cuzk.backends.cuda.sha256_witness`);
`complete_on_host` does the same on the CPU, for a prover without a device and for tests.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from cuzk.witness_gen.bits import spread_rows
from cuzk.witness_gen.sha256 import Sha256WitnessPlan, fr32_packed_limbs

__all__ = ["DeferredSha256", "Sha256Job"]


@dataclass(frozen=True)
class Sha256Job:
    """N instances of one SHA-256 plan: their messages and where each one's aux bits go."""

    plan: Sha256WitnessPlan
    message_bits: np.ndarray  #: (N, plan.message_bits) uint8 0/1, stream order
    rows: np.ndarray  #: (N,) int64: aux row of each instance's first SHA-256 aux

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # A plan is rebuilt from its constants (cached per process) rather than pickled with its tables.
        mask = np.zeros(self.plan.message_bits, dtype=bool)
        mask[self.plan.constant_positions] = True
        values = np.zeros(self.plan.message_bits, dtype=np.uint8)
        values[self.plan.constant_positions] = self.plan.constant_values
        return _job, (mask.tobytes(), values.tobytes(), np.packbits(self.message_bits, axis=1),
                      self.message_bits.shape, self.rows)


@cache
def _plan(mask: bytes, values: bytes) -> Sha256WitnessPlan:
    return Sha256WitnessPlan(np.frombuffer(mask, dtype=bool).copy(), np.frombuffer(values, dtype=np.uint8).copy())


def _job(mask: bytes, values: bytes, packed: np.ndarray, shape: tuple[int, int], rows: np.ndarray) -> Sha256Job:
    bits = np.unpackbits(packed, axis=1, count=shape[1]).reshape(shape)
    return Sha256Job(_plan(mask, values), bits, rows)


@dataclass
class DeferredSha256:
    """The SHA-256 gadgets a generator left unwritten in an aux vector (see the module docstring)."""

    jobs: list[Sha256Job] = field(default_factory=list)

    def hash_circuit(self, plan: Sha256WitnessPlan, message_bits: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """`plan.generate_hash_circuit(message_bits).packed` without the aux: the (N, 4) packed
        digests. Records the messages, whose aux go to rows[i] .. rows[i] + plan.num_aux - 1."""
        words = plan.message_words(message_bits)  # checks the bits against the plan (constants, shape)
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if rows.shape != (words.shape[0],):
            raise ValueError(f"rows must hold one aux row per message ({words.shape[0]}), got shape {rows.shape}")
        bits = np.ascontiguousarray(message_bits, dtype=np.uint8)
        messages = np.packbits(bits, axis=1)
        digests = np.frombuffer(b"".join(hashlib.sha256(m.tobytes()).digest() for m in messages),
                                dtype=np.uint8).reshape(-1, 32)
        self.jobs.append(Sha256Job(plan, bits, rows))
        return fr32_packed_limbs(np.unpackbits(digests, axis=1))

    @property
    def num_rows(self) -> int:
        """Aux rows the jobs cover."""
        return sum(j.plan.num_aux * j.rows.shape[0] for j in self.jobs)

    def host_ranges(self, num_aux: int) -> tuple[np.ndarray, np.ndarray]:
        """(starts, lengths) of the aux rows in 0..num_aux that the jobs do not cover (the ones the
        host wrote), in order. ValueError if the jobs overlap or reach outside the vector."""
        if not self.jobs:
            return np.array([0], dtype=np.int64), np.array([num_aux], dtype=np.int64)
        starts = np.concatenate([j.rows for j in self.jobs])
        stops = np.concatenate([j.rows + j.plan.num_aux for j in self.jobs])
        order = np.argsort(starts, kind="stable")
        starts, stops = starts[order], stops[order]
        if starts.size and (starts[0] < 0 or stops[-1] > num_aux):
            raise ValueError(f"SHA-256 rows reach outside the aux vector: {int(starts[0])}..{int(stops[-1])} "
                             f"of {num_aux}")
        if (starts[1:] < stops[:-1]).any():
            k = int(np.flatnonzero(starts[1:] < stops[:-1])[0])
            raise ValueError(f"SHA-256 jobs overlap at aux row {int(starts[k + 1])}")
        gap_starts = np.concatenate([[0], stops])
        gap_lengths = np.concatenate([starts, [num_aux]]) - gap_starts
        keep = gap_lengths > 0
        return gap_starts[keep].astype(np.int64), gap_lengths[keep].astype(np.int64)

    def complete_on_host(self, aux: np.ndarray) -> None:
        """Write every job's aux bits into `aux` ((num_aux, 4) uint64 limbs) on the CPU."""
        for job in self.jobs:
            spread_rows(job.plan.generate(job.message_bits).aux, aux, job.rows)
