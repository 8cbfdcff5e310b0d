"""Batched witness generators: a gadget's aux allocations, in its allocation order, for N instances at once.

Running a circuit through `WitnessCS` computes its witness one `alloc` call at a time in Python. The
generators here produce the same values without a constraint system: a *plan* is derived once from
what fixes a gadget's layout (for SHA-256, the message length and which bits are constant), then
numba kernels fill one row per instance, on all cores. Row i is exactly the slice of
`cs.aux_assignment` the gadget would append for instance i, so a partition's aux vector can be
assembled from rows at known offsets and fed to a compiled circuit (`Assignment.from_compiled`).

- `cuzk.witness_gen.sha256`: the SHA-256 gadget (`sha256`, `hash_circuit`) for any constant pattern
  (`Sha256WitnessPlan`); aux bits as uint8 0/1, the packed digest as canonical limbs.
- `cuzk.witness_gen.sha256_trace`: the symbolic walk of one compression that the plan is built from.
- `cuzk.witness_gen.poseidon` / `merkle`: Poseidon hashes and Merkle paths (imported by full path).
- `cuzk.witness_gen.values`: a circuit's input values checked and reduced mod r, naming a missing one.
"""

from cuzk.witness_gen.sha256 import HashCircuitWitness, Sha256Witness, Sha256WitnessPlan, fr32_packed_limbs

__all__ = ["HashCircuitWitness", "Sha256Witness", "Sha256WitnessPlan", "fr32_packed_limbs"]
