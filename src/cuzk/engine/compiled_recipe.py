"""Partitions synthesized from a compiled circuit: what the engine adds to a provider's recipe.

A provider that says its circuits may be compiled (`CircuitProvider.compiled_circuits`; its recipes
are `CircuitRecipe`s, whose circuit is the one `cuzk.circuits.registry` knows by the plan's circuit
id) writes no compiled-circuit code. When the engine plans one of its jobs it asks its
`CompiledStore` for the circuit's ready compiled file (`CompiledStore.path_for_job`: on first use a
background build when the store builds automatically, sized by `CircuitProvider.build_size`) and, when
there is one, wraps each partition's recipe in a `CompiledRecipe` (`use_compiled`) that carries the
file, where the sparse products a, b, c are computed (`synthesis.sparse_products` resolved), whether
the prover's device writes the deferred part of the witness (`synthesis.device_witness` and the job's
priority) and whether the partition may fall back to the constraint system (not once its memory was
reserved for the compiled path alone: `compiled_only`).

In the synthesis process `CompiledRecipe.assignment_into` takes the witness from the circuit's batched
generator (`generated_witness`) or else WitnessCS, and a, b, c from the compiled circuit's sparse
products; with the products on the prover it returns the witness alone (`CompiledWitness`), written in
place into a shared-memory segment when the generator states its counts (`WitnessSegment`), and the
prover checks the rows, a failed check failing the partition. Whenever the file cannot be used here
(unusable, counts differ, a row a·b != c) it says so in the log and runs the provider's recipe as
without the file. The provider's recipe keeps what is its own: building its
circuit (`CircuitRecipe.build`) and checking the public inputs a witness allocates
(`CircuitRecipe.check_inputs`), which runs on both paths.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from cuzk.engine.providers import CircuitRecipe, PartitionRecipe
from cuzk.errors import SynthesisError

if TYPE_CHECKING:
    from cuzk.engine.compiled_store import CompiledStore
    from cuzk.engine.jobs import ProofRequest
    from cuzk.engine.providers import CircuitProvider, JobPlan

log = logging.getLogger("cuzk.engine.compiled")

__all__ = ["CompiledRecipe", "use_compiled"]


@dataclass(frozen=True)
class CompiledRecipe(PartitionRecipe):
    """A provider's circuit recipe, synthesized from the ready compiled circuit at `compiled_path`."""

    recipe: CircuitRecipe
    circuit_id: str
    #: Names the partition in the log and in errors ("<request id> partition <k>").
    label: str
    compiled_path: str
    #: Where the compiled circuit's a, b, c are computed: here ("synthesis") or by the prover's
    #: backend ("prover": the witness alone comes back, a `CompiledWitness`; the GPU for the CUDA backend).
    sparse_products: str = "synthesis"
    #: False when the engine reserved memory for the compiled path only: a compiled circuit that cannot
    #: be used then fails the partition instead of falling back to the (much larger) constraint system.
    fallback: bool = True
    #: With the products on the prover: leave the bulk of a circuit's generated witness (the gadgets
    #: its generator defers, `cuzk.groth16.synthesis.defers_witness`) for the prover's device to write
    #: (`cuzk.witness_gen.deferred`).
    device_witness: bool = False

    @property
    def batched_witness(self) -> bool:
        """Whether the circuit has a batched witness generator (`generated_witness`), whose memory
        needs on the compiled path are a fraction of WitnessCS's (`PartitionEstimate.compiled`)."""
        return callable(getattr(self.recipe.build(), "witness_arrays", None))

    @property
    def defers_witness(self) -> bool:
        """Whether part of the witness is left for the prover to write (`cuzk.witness_gen.deferred`): a
        prover that writes it on the host does so on a copy of the aux (`PartitionEstimate.compiled`)."""
        from cuzk.groth16.synthesis import defers_witness

        return self.sparse_products == "prover" and self.device_witness and defers_witness(self.recipe.build())

    def compiled_only(self) -> CompiledRecipe:
        return replace(self, fallback=False)

    def assignment(self) -> Any:
        return self._assignment(None)

    def assignment_into(self, segment: Callable[[int, int], Any]) -> Any:
        """`assignment`; on the prover-products path a circuit that states its witness counts writes
        inputs and aux straight into `segment(num_inputs, num_aux)` (a `WitnessSegment`)."""
        return self._assignment(segment)

    def _assignment(self, segment: Callable[[int, int], Any] | None) -> Any:
        asg = self._compiled_assignment(segment)
        if asg is not None:
            return asg
        if not self.fallback:
            raise SynthesisError(f"{self.circuit_id} {self.label}: the compiled circuit {self.compiled_path} could "
                                 "not be used (see the log) and this partition's memory was reserved for the "
                                 "compiled path, which the constraint system would far exceed")
        return self.recipe.assignment() if segment is None else self.recipe.assignment_into(segment)

    def _compiled_assignment(self, make_segment: Callable[[int, int], Any] | None) -> Any:
        """The assignment (or `CompiledWitness`) from the compiled circuit; None, logged, when it cannot be used."""
        from cuzk.engine.compiled_store import load_verified, read_checked_header
        from cuzk.field.limbs import limbs_to_ints
        from cuzk.groth16.assignment import Assignment
        from cuzk.groth16.synthesis import generated_witness, generated_witness_shape, synthesize_witness
        from cuzk.r1cs.compiled import CompiledMismatchError
        from cuzk.witness_gen.deferred import DeferredWitness

        on_prover = self.sparse_products == "prover"
        # With the products on the prover only the counts are used here: the header, not the matrices.
        compiled = (read_checked_header if on_prover else load_verified)(self.compiled_path, self.circuit_id)
        if compiled is None:
            return None
        circuit = self.recipe.build()
        segment = None
        try:
            shape = generated_witness_shape(circuit) if on_prover and make_segment is not None else None
            if shape is not None:  # generated in place, into a segment of the stated counts
                try:
                    compiled.check_witness(*shape)
                except CompiledMismatchError as err:
                    return self._not_used(err)
                segment = make_segment(*shape)
            deferred = DeferredWitness() if self.defers_witness else None
            generated = generated_witness(circuit, None if segment is None else segment.aux, deferred)
            witness: Any
            if generated is not None:  # the circuit's batched generator: limb arrays, no constraint system
                witness, counts = generated, (generated[0].shape[0], generated[1].shape[0], None)
                self.recipe.check_inputs(limbs_to_ints(generated[0]))
            else:
                witness = synthesize_witness(circuit)
                counts = (witness.num_inputs, witness.num_aux, witness.num_constraints)
                self.recipe.check_inputs(witness.input_assignment)
            try:
                compiled.check_witness(*counts)
                if on_prover:
                    asg = self._witness_for_prover(generated, witness, compiled.num_constraints, segment, deferred)
                    segment = None  # it travels with the witness now
                    return asg
                return Assignment.from_compiled(compiled, witness, check=True)
            except (CompiledMismatchError, SynthesisError) as err:
                return self._not_used(err)
        finally:
            if segment is not None:  # not handed over: failed, or not used
                segment.discard()

    def _not_used(self, err: Exception) -> None:
        log.warning("%s %s: compiled circuit %s not used (%s); synthesizing with the constraint system",
                    self.circuit_id, self.label, self.compiled_path, err)

    def _witness_for_prover(self, generated: Any, witness: Any, num_constraints: int, segment: Any,
                            deferred: Any) -> Any:
        """The `CompiledWitness`: in `segment` when it was generated there (the segment then travels
        with it), else as limb arrays of its own; with the gadgets `deferred` left out of aux."""
        from cuzk.engine.synthesis import CompiledWitness
        from cuzk.field.limbs import ints_to_limbs

        if segment is not None:
            segment.inputs[...] = generated[0]
            return CompiledWitness(segment.inputs, segment.aux, self.compiled_path, num_constraints, segment, deferred)
        inputs, aux = (generated if generated is not None else
                       (ints_to_limbs(witness.input_assignment), ints_to_limbs(witness.aux_assignment)))
        return CompiledWitness(inputs, aux, self.compiled_path, num_constraints, deferred=deferred)


def use_compiled(plan: JobPlan, provider: CircuitProvider, store: CompiledStore, request: ProofRequest, *,
                 sparse_products: str = "synthesis", device_witness: int | None = None) -> bool:
    """Have every partition of `plan` synthesize from the ready compiled circuit of its circuit id, when
    the provider's circuits may be compiled and `store` has one (`CompiledStore.path_for_job`), each
    recipe wrapped in a `CompiledRecipe` that may fall back; whether it does. `device_witness`: the
    lowest priority whose partitions leave their deferred gadgets' aux to the prover's device (None:
    no job's)."""
    if not provider.compiled_circuits:
        return False
    path = store.path_for_job(plan.circuit_id, provider.build_size(plan.circuit_id))
    if path is None:
        return False
    on_device = device_witness is not None and request.priority >= device_witness
    for k, p in enumerate(plan.partitions):
        if not isinstance(p.recipe, CircuitRecipe):
            raise TypeError(f"{provider.name}: a compiled circuit needs CircuitRecipes, not {type(p.recipe).__name__}")
        plan.partitions[k] = replace(p, recipe=CompiledRecipe(p.recipe, plan.circuit_id,
                                                              f"{request.request_id} partition {p.index}", path,
                                                              sparse_products, device_witness=on_device))
    return True
