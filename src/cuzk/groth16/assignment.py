"""What the prover needs from synthesis, as flat arrays.

The Python constraint system records Python ints; the prover works on (n, 4) uint64 limb arrays
(canonical form), which is also the layout a compiled circuit or a GPU backend produces directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cuzk.field.limbs import as_limb_array, check_canonical, ints_to_limbs
from cuzk.r1cs import ProvingAssignment, WitnessCS

if TYPE_CHECKING:
    from collections.abc import Callable

    from cuzk.r1cs.compiled import CompiledCircuit


@dataclass(eq=False)
class Assignment:
    """Per-constraint evaluations of A, B, C, the witness, and the query densities."""

    a: np.ndarray  #: (constraints, 4) canonical
    b: np.ndarray
    c: np.ndarray
    inputs: np.ndarray  #: (num_inputs, 4) canonical, inputs[0] == 1
    aux: np.ndarray  #: (num_aux, 4) canonical
    a_aux_density: np.ndarray  #: bool (num_aux,)
    b_input_density: np.ndarray  #: bool (num_inputs,)
    b_aux_density: np.ndarray  #: bool (num_aux,)

    @property
    def num_constraints(self) -> int:
        return self.a.shape[0]

    @classmethod
    def from_proving_assignment(cls, cs: ProvingAssignment) -> Assignment:
        def density(d: bytearray) -> np.ndarray:
            return np.frombuffer(bytes(d), dtype=np.uint8).astype(bool)

        return cls(
            a=ints_to_limbs(cs.a),
            b=ints_to_limbs(cs.b),
            c=ints_to_limbs(cs.c),
            inputs=ints_to_limbs(cs.input_assignment),
            aux=ints_to_limbs(cs.aux_assignment),
            a_aux_density=density(cs.a_aux_density),
            b_input_density=density(cs.b_input_density),
            b_aux_density=density(cs.b_aux_density),
        )

    @classmethod
    def from_compiled(cls, compiled: CompiledCircuit, witness: WitnessCS | tuple[np.ndarray, np.ndarray], *,
                      check: bool = True, out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                      ready: Callable[[int], None] | None = None) -> Assignment:
        """a, b, c by sparse products of a compiled circuit with a witness: a `WitnessCS` or
        (inputs, aux) canonical limb arrays. Identical to `from_proving_assignment` of the same
        circuit and witness; `check` refuses rows with a·b != c (SynthesisError). `out`: three
        (constraints, 4) uint64 arrays that a, b, c are written into, part by part after `ready(end
        row)` when given (`CompiledCircuit.evaluate`)."""
        if isinstance(witness, WitnessCS):
            inputs, aux = ints_to_limbs(witness.input_assignment), ints_to_limbs(witness.aux_assignment)
        else:
            inputs, aux = (as_limb_array(x, name) for x, name in zip(witness, ("inputs", "aux"), strict=True))
            for arr, name in ((inputs, "inputs"), (aux, "aux")):
                if (bad := check_canonical(arr)) >= 0:
                    raise ValueError(f"witness {name}[{bad}] is not a canonical field element")
        a, b, c = compiled.evaluate(inputs, aux, out, check=check, ready=ready)
        return cls(a=a, b=b, c=c, inputs=inputs, aux=aux, a_aux_density=compiled.a_aux_density.copy(),
                   b_input_density=compiled.b_input_density.copy(), b_aux_density=compiled.b_aux_density.copy())

    def public_inputs(self) -> list[int]:
        """The inputs a verifier is given (ONE excluded)."""
        raw = self.inputs[1:].tobytes()
        return [int.from_bytes(raw[k:k + 32], "little") for k in range(0, len(raw), 32)]
