"""The Filecoin partition recipe: one partition's circuit, synthesized in a synthesis process.

Partition k's recipe carries partition k's circuit — the compound's mapping of just that
partition's vanilla proofs to witness values (ints and paths; PoRep's labeling proofs are not part
of it) — plus the public inputs it must expose, never the whole C1 or sector list. In the synthesis
process it synthesizes, refuses a witness whose allocated inputs differ from the plan's, and
returns the Assignment. The engine concatenates the partition proofs in order, which is the proof
format of every kind (P × 192 bytes).

With a ready compiled circuit (`cuzk.engine.compiled_store`) the recipe synthesizes from it instead of
the constraint system, see `FilecoinPartitionRecipe.assignment`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cuzk.engine.providers import CircuitRecipe
from cuzk.errors import SynthesisError

log = logging.getLogger("cuzk.providers.filecoin")

__all__ = ["FilecoinPartitionRecipe", "differences"]


@dataclass(frozen=True)
class FilecoinPartitionRecipe(CircuitRecipe):
    """One partition: its circuit (only this partition's witness) and the inputs it must expose."""

    circuit_id: str
    index: int
    circuit: Any
    public_inputs: tuple[int, ...]
    label: str
    #: A ready compiled circuit of `circuit_id` (`cuzk.engine.compiled_store`) when planned, else None.
    compiled_path: str | None = None
    #: Where a compiled circuit's a, b, c are computed: here ("synthesis") or by the prover's
    #: backend ("prover": the recipe returns a `CompiledWitness`; the GPU for the CUDA backend).
    sparse_products: str = "synthesis"
    #: False when the engine reserved memory for the compiled path only: a compiled circuit that cannot
    #: be used then fails the partition instead of falling back to the (much larger) constraint system.
    fallback: bool = True
    #: With the products on the prover: leave a generator's bulk (PoRep's SHA-256 gadgets and Poseidon
    #: paths, 99% of its aux; PoSt's Merkle openings, 99%) for the prover's device to write
    #: (`cuzk.witness_gen.deferred`).
    device_witness: bool = False

    def build(self) -> Any:
        return self.circuit

    @property
    def batched_witness(self) -> bool:
        """Whether the circuit has a batched witness generator (`generated_witness`), whose memory
        needs on the compiled path are a fraction of WitnessCS's (`PartitionEstimate.compiled`)."""
        return callable(getattr(self.circuit, "witness_arrays", None))

    @property
    def defers_witness(self) -> bool:
        """Whether its openings (or SHA-256 gadgets) are left for the prover's device to write."""
        from cuzk.groth16.synthesis import defers_witness

        return self.sparse_products == "prover" and self.device_witness and defers_witness(self.circuit)

    def compiled_only(self) -> FilecoinPartitionRecipe:
        return replace(self, fallback=False) if self.compiled_path is not None else self

    def assignment(self) -> Any:
        """Synthesize, and refuse a witness exposing other public inputs than the plan derived
        (its proof could only fail verification): checked on the Python ints, before conversion.

        With a compiled circuit, the witness comes from the circuit's batched generator (PoSt,
        SnapDeals, ...; `generated_witness`) or else WitnessCS, and a, b, c from its sparse
        products; whenever that path cannot be used (file unusable, counts differ, a row a·b != c)
        it is logged and the constraint-system path below runs instead, as without the file. With
        `sparse_products = "prover"` the witness alone comes back (`CompiledWitness`): the prover
        computes the products and checks the rows, and a failed row check fails the partition."""
        return self.assignment_into(None)

    def assignment_into(self, segment: Callable[[int, int], Any] | None) -> Any:
        """`assignment`; on the prover-products path a circuit that states its witness counts (PoRep,
        PoSt, SnapDeals) writes inputs and aux straight into `segment(num_inputs, num_aux)` (a
        `WitnessSegment`)."""
        from cuzk.groth16.assignment import Assignment
        from cuzk.groth16.synthesis import synthesize_for_proving

        if self.compiled_path is not None:
            asg = self._compiled_assignment(segment)
            if asg is not None:
                return asg
            if not self.fallback:
                raise SynthesisError(f"{self.circuit_id} {self.label}: the compiled circuit {self.compiled_path} could "
                                     "not be used (see the log) and this partition's memory was reserved for the "
                                     "compiled path, which the constraint system would far exceed")
        cs = synthesize_for_proving(self.circuit)
        self._check_inputs(cs.input_assignment)
        return Assignment.from_proving_assignment(cs)

    def _check_inputs(self, allocated: Sequence[int]) -> None:
        from cuzk.circuits.filecoin.compound import PublicInputMismatchError

        diff = differences(allocated[1:], self.public_inputs)
        if diff:
            raise PublicInputMismatchError(
                f"{self.circuit_id} {self.label}: the witness allocates public inputs that differ from the ones "
                f"derived from the public data at {len(diff)} position(s) (first: {diff[:8]})")

    def _compiled_assignment(self, make_segment: Callable[[int, int], Any] | None) -> Any:
        from cuzk.engine.compiled_store import header_for_synthesis, load_for_synthesis
        from cuzk.field.limbs import limbs_to_ints
        from cuzk.groth16.assignment import Assignment
        from cuzk.groth16.synthesis import (
            generated_witness,
            generated_witness_shape,
            synthesize_witness,
        )
        from cuzk.r1cs.compiled import CompiledMismatchError
        from cuzk.witness_gen.deferred import DeferredWitness

        on_prover = self.sparse_products == "prover"
        # With the products on the prover only the counts are used here: the header, not the matrices.
        compiled = (header_for_synthesis if on_prover else load_for_synthesis)(self.compiled_path, self.circuit_id)
        if compiled is None:
            return None
        segment = None
        try:
            shape = generated_witness_shape(self.circuit) if on_prover and make_segment is not None else None
            if shape is not None:  # generated in place, into a segment of the stated counts
                try:
                    compiled.check_witness(*shape)
                except CompiledMismatchError as err:
                    return self._compiled_not_used(err)
                segment = make_segment(*shape)
            deferred = DeferredWitness() if self.defers_witness else None
            generated = generated_witness(self.circuit, None if segment is None else segment.aux, deferred)
            witness: Any
            if generated is not None:  # the circuit's batched generator: limb arrays, no constraint system
                witness, counts = generated, (generated[0].shape[0], generated[1].shape[0], None)
                self._check_inputs(limbs_to_ints(generated[0]))
            else:
                witness = synthesize_witness(self.circuit)
                counts = (witness.num_inputs, witness.num_aux, witness.num_constraints)
                self._check_inputs(witness.input_assignment)
            try:
                compiled.check_witness(*counts)
                if on_prover:
                    asg = self._witness_for_prover(generated, witness, compiled.num_constraints, segment, deferred)
                    segment = None  # it travels with the witness now
                    return asg
                return Assignment.from_compiled(compiled, witness, check=True)
            except (CompiledMismatchError, SynthesisError) as err:
                return self._compiled_not_used(err)
        finally:
            if segment is not None:  # not handed over: failed, or not used
                segment.discard()

    def _compiled_not_used(self, err: Exception) -> None:
        log.warning("%s %s: compiled circuit %s not used (%s); synthesizing with the constraint system",
                    self.circuit_id, self.label, self.compiled_path, err)

    def _witness_for_prover(self, generated: Any, witness: Any, num_constraints: int, segment: Any,
                            deferred: Any) -> Any:
        """The `CompiledWitness`: in `segment` when it was generated there (the segment then travels
        with it), else as limb arrays of its own; with the gadgets `deferred` left out of aux."""
        from cuzk.engine.synthesis import CompiledWitness
        from cuzk.field.limbs import ints_to_limbs

        assert self.compiled_path is not None
        if segment is not None:
            segment.inputs[...] = generated[0]
            return CompiledWitness(segment.inputs, segment.aux, self.compiled_path, num_constraints, segment, deferred)
        inputs, aux = (generated if generated is not None else
                       (ints_to_limbs(witness.input_assignment), ints_to_limbs(witness.aux_assignment)))
        return CompiledWitness(inputs, aux, self.compiled_path, num_constraints, deferred=deferred)


def differences(a: Sequence[int], b: Sequence[int]) -> list[int]:
    n = min(len(a), len(b))
    return [i for i in range(n) if a[i] != b[i]] + list(range(n, max(len(a), len(b))))


