"""What a device proof is made from: an `Assignment` (a, b, c and the witness), or a compiled
circuit's witness alone (`CompiledWitness`, whose a, b, c the device computes), and the host-side
forms of both that the lanes upload."""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from dataclasses import dataclass

import numpy as np

from cuzk.backends.cuda.staging import Filled, HostStaging
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.keys import ProvingKey
from cuzk.r1cs.compiled import CompiledCircuit
from cuzk.witness_gen.deferred import DeferredWitness


@dataclass(frozen=True)
class CompiledWitness:
    """What `prove_compiled` proves from: the witness, the compiled circuit's densities, no a, b, c."""

    compiled: CompiledCircuit
    inputs: np.ndarray
    aux: np.ndarray
    check: bool
    #: Gadgets whose aux rows `aux` leaves unwritten: written on the device at staging.
    deferred: DeferredWitness | None = None

    @property
    def num_constraints(self) -> int:
        return self.compiled.num_constraints

    @property
    def a_aux_density(self) -> np.ndarray:
        return self.compiled.a_aux_density

    @property
    def b_input_density(self) -> np.ndarray:
        return self.compiled.b_input_density

    @property
    def b_aux_density(self) -> np.ndarray:
        return self.compiled.b_aux_density


ProofInputs = Assignment | CompiledWitness


def words(v: np.ndarray) -> np.ndarray:
    """Field elements (limb arrays) as the (n, 8) u32 words they go up as."""
    return np.ascontiguousarray(v).view(np.uint32).reshape(-1, 8)


def host_witness(asg: ProofInputs) -> dict[str, np.ndarray]:
    """The witness as it goes up: inputs and aux as (n, 8) u32 words, the density masks."""
    return {"inputs": words(asg.inputs), "aux": words(asg.aux), "a_mask": asg.a_aux_density,
            "b_mask": asg.b_aux_density, "b_in_mask": asg.b_input_density}


def staging_bytes(pk: ProvingKey, asg: ProofInputs, witness: bool = True) -> int:
    """Device bytes a lane's `stage` allocates: a, b, c over the domain, and with `witness` the
    witness and the masks."""
    wit = (asg.inputs.nbytes + asg.aux.nbytes + asg.a_aux_density.nbytes + asg.b_aux_density.nbytes
           + asg.b_input_density.nbytes)
    return 3 * 32 * pk.domain_size + (wit if witness else 0)


def host_products(staging: HostStaging | None, compiled: CompiledCircuit, inputs: np.ndarray, aux: np.ndarray,
                  check: bool, t: MutableMapping[str, float]) -> tuple[Assignment, Filled | None]:
    """a, b, c computed here, written into a key's pinned `staging` (`HostStaging.take`, waiting
    for another proof to hand it back, then writing each part of the rows once that proof's
    transfer has read it) when it has one, else into new arrays; the assignment and the buffer it
    holds, which the proof hands back once a, b, c are on their way up."""
    start = time.perf_counter()
    rows = compiled.num_constraints
    filled = (staging.take({name: 32 * rows for name in "abc"}, wait=True, in_parts=True)
              if staging is not None else None)
    t["staging_wait"] = time.perf_counter() - start
    out = None if filled is None else tuple(filled.views[name].view(np.uint64).reshape(rows, 4) for name in "abc")
    ready = None if filled is None else (lambda end: filled.writable(32 * end))
    start = time.perf_counter()
    try:
        asg = Assignment.from_compiled(compiled, (inputs, aux), check=check, out=out,  # type: ignore[arg-type]
                                       ready=ready)
    except BaseException:
        if filled is not None:
            filled.release(None)
        raise
    t["host_products"] = time.perf_counter() - start
    return asg, filled
