"""Circuits by id, for the CLI and benchmarks.

Ids: `mimc-K` (MiMC-5 preimage, exactly 2^K constraints), `bits-N` (N values decomposed to bits).
The Filecoin circuit ids (`porep-*`, `winning-*`, `wpost-*`, `snap-*`) are added with those circuits.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from cuzk.circuits.examples import BitsCircuit, MimcCircuit
from cuzk.errors import CuzkError
from cuzk.field.constants import R_MODULUS
from cuzk.r1cs import Circuit


class UnknownCircuitError(CuzkError):
    pass


@dataclass(frozen=True)
class CircuitSpec:
    circuit_id: str
    description: str

    def blank(self) -> Circuit:
        return _build(self.circuit_id, None)

    def example(self, rng: random.Random | None = None) -> Circuit:
        """An instance with a (random) witness, for demos and benchmarks."""
        return _build(self.circuit_id, rng or random.Random())


_PATTERNS = {
    "mimc": (re.compile(r"^mimc-(\d+)$"), "MiMC-5 preimage proof with exactly 2^K constraints"),
    "bits": (re.compile(r"^bits-(\d+)$"), "N field elements decomposed into 253 bits each"),
}


def _build(circuit_id: str, rng: random.Random | None) -> Circuit:
    if m := _PATTERNS["mimc"][0].match(circuit_id):
        k = int(m.group(1))
        if not 3 <= k <= 27:
            raise UnknownCircuitError(f"mimc-K needs 3 <= K <= 27, got {k}")
        pre = None if rng is None else rng.randrange(R_MODULUS)
        return MimcCircuit.with_total_constraints(1 << k, preimage=pre)
    if m := _PATTERNS["bits"][0].match(circuit_id):
        n = int(m.group(1))
        if not 1 <= n <= 1 << 20:
            raise UnknownCircuitError(f"bits-N needs 1 <= N <= 2^20, got {n}")
        return BitsCircuit.blank(n) if rng is None else BitsCircuit.random(n, rng)
    raise UnknownCircuitError(
        f"unknown circuit {circuit_id!r}; known: " + ", ".join(f"{k}-… ({d})" for k, (_, d) in _PATTERNS.items())
    )


def lookup(circuit_id: str) -> CircuitSpec:
    _build(circuit_id, None)  # validates the id
    kind = circuit_id.split("-", 1)[0]
    return CircuitSpec(circuit_id, _PATTERNS[kind][1])
