"""Aux left for a device to write: a partition's witness with its bulk generated elsewhere.

Two kinds of gadgets make up the bulk of the Filecoin partitions' witnesses, and a generator given a
`DeferredWitness` records them instead of writing their aux:

* SHA-256 (`Sha256Job`): nearly all of a PoRep-32GiB partition's 130M aux values (98%) are the bits
  of its 5,040 SHA-256 compressions. The generator computes each gadget's digest on the host
  (hashlib: the next hash's input and the packed digest row need it) and records its message and
  the aux row where its bits start.
* Merkle paths over Poseidon trees (`PoseidonPathJob`): a WindowPoSt-32GiB partition's 127M aux are
  almost all its 23,490 openings of tree_r_last (bits, siblings, insertion, ten arity-8 hashes each).
  The generator records each path's leaf, index and siblings and the aux row where the path starts;
  nothing of the path is computed on the host (the circuit checks the root by a constraint).

Everything else (inputs, other hashes, bit decompositions, packed digests) is written into the aux
vector as usual. A device then uploads only the rows the host wrote (`host_ranges`: 0.9% of a PoRep
partition, whose tree_c and tree_r_last paths are deferred too; 0.6% of a WindowPoSt one) and writes
the recorded gadgets' aux straight into its copy of the vector (`cuzk.backends.cuda.deferred`);
`complete_on_host` does the same on the CPU, for a prover without a device and for tests.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from cuzk.gadgets.por import POSEIDON, TreeShape
from cuzk.witness_gen.bits import spread_rows
from cuzk.witness_gen.merkle import PathLayout, merkle_path_witness, path_aux_count, path_inputs
from cuzk.witness_gen.sha256 import Sha256WitnessPlan, fr32_packed_limbs

__all__ = ["DeferredWitness", "PoseidonPathJob", "Sha256Job"]

#: Aux rows of Poseidon paths that `complete_on_host` computes at once: each batch's aux (and its
#: row index) is a copy on the way into the vector, so a WindowPoSt-32GiB partition's 127M deferred
#: rows are not held twice over (4 GB and a 1 GB index) beside a small card's pinned key.
HOST_PATH_ROWS = 1 << 22


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


@dataclass(frozen=True)
class PoseidonPathJob:
    """N openings of one Poseidon tree shape (`merkle_path_witness`'s inputs, checked by
    `path_inputs`) and the aux row where each one's aux start."""

    shape: TreeShape
    layout: PathLayout
    leaves: np.ndarray  #: (N, 4) uint64 canonical limbs
    indices: np.ndarray  #: (N,) int64 leaf indices
    siblings: np.ndarray  #: (N, S, 4) uint64 canonical limbs, level by level
    rows: np.ndarray  #: (N,) int64: aux row of each path's first aux

    @property
    def path_aux(self) -> int:
        """Aux rows of one path."""
        return path_aux_count(self.shape, self.layout)


@dataclass
class DeferredWitness:
    """The gadgets a generator left unwritten in an aux vector (see the module docstring)."""

    sha256_jobs: list[Sha256Job] = field(default_factory=list)
    path_jobs: list[PoseidonPathJob] = field(default_factory=list)

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
        self.sha256_jobs.append(Sha256Job(plan, bits, rows))
        return fr32_packed_limbs(np.unpackbits(digests, axis=1))

    def poseidon_paths(self, shape: TreeShape, layout: PathLayout, leaves: np.ndarray, indices: np.ndarray,
                       siblings: np.ndarray, rows: np.ndarray) -> None:
        """Record N openings whose aux (`merkle_path_witness`'s, in `layout`) go to rows[n] ..
        rows[n] + path_aux - 1. Refuses what `merkle_path_witness` refuses."""
        if shape.hasher != POSEIDON:
            raise ValueError(f"only Poseidon paths are deferred whole, not {shape.hasher} ones")
        leaves, indices, siblings = path_inputs(shape, leaves, indices, siblings)
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if rows.shape != (leaves.shape[0],):
            raise ValueError(f"rows must hold one aux row per path ({leaves.shape[0]}), got shape {rows.shape}")
        self.path_jobs.append(PoseidonPathJob(shape, layout, leaves, indices, siblings, rows))

    def _spans(self) -> list[tuple[np.ndarray, int]]:
        """Each job's first rows and the rows one instance covers."""
        return ([(j.rows, j.plan.num_aux) for j in self.sha256_jobs]
                + [(j.rows, j.path_aux) for j in self.path_jobs])

    @property
    def num_rows(self) -> int:
        """Aux rows the jobs cover."""
        return sum(rows.shape[0] * length for rows, length in self._spans())

    def host_ranges(self, num_aux: int) -> tuple[np.ndarray, np.ndarray]:
        """(starts, lengths) of the aux rows in 0..num_aux that the jobs do not cover (the ones the
        host wrote), in order. ValueError if the jobs overlap or reach outside the vector."""
        spans = self._spans()
        if not spans:
            return np.array([0], dtype=np.int64), np.array([num_aux], dtype=np.int64)
        starts = np.concatenate([rows for rows, _ in spans])
        stops = np.concatenate([rows + length for rows, length in spans])
        order = np.argsort(starts, kind="stable")
        starts, stops = starts[order], stops[order]
        if starts.size and (starts[0] < 0 or stops[-1] > num_aux):
            raise ValueError(f"deferred rows reach outside the aux vector: {int(starts[0])}..{int(stops[-1])} "
                             f"of {num_aux}")
        if (starts[1:] < stops[:-1]).any():
            k = int(np.flatnonzero(starts[1:] < stops[:-1])[0])
            raise ValueError(f"deferred jobs overlap at aux row {int(starts[k + 1])}")
        gap_starts = np.concatenate([[0], stops])
        gap_lengths = np.concatenate([starts, [num_aux]]) - gap_starts
        keep = gap_lengths > 0
        return gap_starts[keep].astype(np.int64), gap_lengths[keep].astype(np.int64)

    def complete_on_host(self, aux: np.ndarray) -> None:
        """Write every job's aux into `aux` ((num_aux, 4) uint64 limbs) on the CPU."""
        for job in self.sha256_jobs:
            spread_rows(job.plan.generate(job.message_bits).aux, aux, job.rows)
        for path in self.path_jobs:
            if path.rows.size and (int(path.rows.min()) < 0 or int(path.rows.max()) + path.path_aux > aux.shape[0]):
                raise ValueError(f"path rows reach outside the aux vector of {aux.shape[0]} rows")
            step = max(1, HOST_PATH_ROWS // max(1, path.path_aux))
            for lo in range(0, path.rows.shape[0], step):
                hi = lo + step
                witness = merkle_path_witness(path.shape, path.layout, path.leaves[lo:hi], path.indices[lo:hi],
                                              path.siblings[lo:hi])
                aux[path.rows[lo:hi, None] + np.arange(path.path_aux)] = witness.aux  # path n at rows[n] ..
