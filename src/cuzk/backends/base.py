"""The one interface between the engine and whatever computes proofs (CPU now, CUDA later).

A backend turns (proving key, assignment) into a proof. Keys are made resident explicitly so the
engine can account for the memory and time of loading them; everything device-specific stays
behind this interface (the engine never imports a GPU library).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import MutableMapping
from dataclasses import dataclass, field

from cuzk.groth16.assignment import Assignment
from cuzk.groth16.keys import ProvingKey
from cuzk.groth16.proof import Proof


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    kind: str  #: "cpu" or "cuda"
    memory_total: int | None = None
    memory_free: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


class ProverBackend(ABC):
    name: str

    @abstractmethod
    def devices(self) -> list[DeviceInfo]:
        """What this backend computes on."""

    @abstractmethod
    def load_key(self, pk: ProvingKey) -> None:
        """Make `pk` ready for fast proving (decode points / upload them); idempotent."""

    @abstractmethod
    def unload_key(self, pk: ProvingKey) -> None:
        """Release what `load_key` made resident."""

    @abstractmethod
    def prove(self, pk: ProvingKey, asg: Assignment, *, r: int | None = None, s: int | None = None,
              timings: MutableMapping[str, float] | None = None) -> Proof:
        """One proof; r and s default to fresh randomness."""
