"""The Filecoin partition recipe: one partition's circuit, synthesized in a synthesis process.

Partition k's recipe carries partition k's circuit — the compound's mapping of just that
partition's vanilla proofs to witness values (ints and paths; PoRep's labeling proofs are not part
of it) — plus the public inputs it must expose, never the whole C1 or sector list. In the synthesis
process it synthesizes, refuses a witness whose allocated inputs differ from the plan's, and
returns the Assignment. The engine concatenates the partition proofs in order, which is the proof
format of every kind (P × 192 bytes).

With a ready compiled circuit the engine synthesizes the recipe's circuit from it instead of the
constraint system (`cuzk.engine.compiled_recipe`); the input check below runs on that path too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cuzk.engine.providers import CircuitRecipe

__all__ = ["FilecoinPartitionRecipe", "differences"]


@dataclass(frozen=True)
class FilecoinPartitionRecipe(CircuitRecipe):
    """One partition: its circuit (only this partition's witness) and the inputs it must expose."""

    circuit_id: str
    index: int
    circuit: Any
    public_inputs: tuple[int, ...]
    label: str

    def build(self) -> Any:
        return self.circuit

    def check_inputs(self, allocated: Sequence[int]) -> None:
        """Refuse a witness exposing other public inputs than the plan derived (its proof could only
        fail verification): checked on the Python ints, before conversion."""
        from cuzk.circuits.filecoin.compound import PublicInputMismatchError

        diff = differences(allocated[1:], self.public_inputs)
        if diff:
            raise PublicInputMismatchError(
                f"{self.circuit_id} {self.label}: the witness allocates public inputs that differ from the ones "
                f"derived from the public data at {len(diff)} position(s) (first: {diff[:8]})")


def differences(a: Sequence[int], b: Sequence[int]) -> list[int]:
    n = min(len(a), len(b))
    return [i for i in range(n) if a[i] != b[i]] + list(range(n, max(len(a), len(b))))
