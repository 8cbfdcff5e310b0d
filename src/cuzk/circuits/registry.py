"""Circuits by id, for the CLI, the engine and benchmarks.

Test circuits: `mimc-K` (MiMC-5 preimage, exactly 2^K constraints), `bits-N` (N values decomposed to
bits). Filecoin circuits: `porep-S`, `winning-S`, `wpost-S`, `snap-S` with S one of 2k, 8m, 512m,
32g, 64g (cuzk.filecoin.sizes.circuit_id) — one partition of the production circuit, so that
`cuzk params gen --insecure porep-2k OUT` makes (insecure) parameters with the layout of the
published `v28-…` file named in `params_file_name`.

`example()` of a Filecoin id builds a real instance: fresh vanilla proofs of a test sector — a
densely sealed 2KiB sector, a sparse synthetic sector (cuzk.filecoin.sparse) for the larger sizes,
which takes seconds where dense sealing would take minutes (8MiB) or be impossible (32GiB) — mapped
through the compound proof of its kind; the instance's `public_inputs()` are the verifier's. The
instance is partition 0 of the proof. Synthesizing it costs what the circuit costs (2.7M rows for
porep-2k, 130M for porep-32g); building it does not.
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


TEST = "test"
FILECOIN = "filecoin"


@dataclass(frozen=True)
class CircuitSpec:
    circuit_id: str
    description: str
    family: str = TEST  #: "test" (cuzk's example circuits) or "filecoin" (published parameter sets)
    params_file_name: str | None = None  #: the official `v28-….params` name (Filecoin ids only), for display

    @property
    def is_filecoin(self) -> bool:
        return self.family == FILECOIN

    def blank(self) -> Circuit:
        """The key-generation circuit (no values)."""
        return _build(self.circuit_id, None)

    def example(self, rng: random.Random | None = None) -> Circuit:
        """An instance with a (random) witness, for demos and benchmarks."""
        return _build(self.circuit_id, rng or random.Random())


_PATTERNS = {
    "mimc": (re.compile(r"^mimc-(\d+)$"), "MiMC-5 preimage proof with exactly 2^K constraints"),
    "bits": (re.compile(r"^bits-(\d+)$"), "N field elements decomposed into 253 bits each"),
}
_FILECOIN_RE = re.compile(r"^(porep|winning|wpost|snap)-(2k|8m|512m|32g|64g)$")
_FILECOIN_DESCRIPTIONS = {
    "porep": "Filecoin PoRep C2 (StackedDRG), {size} sectors, one of {parts} partition(s)",
    "winning": "Filecoin WinningPoSt, {size} sectors (66 challenges, 1 partition)",
    "wpost": "Filecoin WindowPoSt, {size} sectors, one partition of {sectors} sectors",
    "snap": "Filecoin SnapDeals (EmptySectorUpdate), {size} sectors, one of {parts} partition(s)",
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
    if _FILECOIN_RE.match(circuit_id):
        from cuzk.circuits.filecoin.compound import blank_circuit, sample_compound

        if rng is None:
            return blank_circuit(circuit_id)
        return sample_compound(circuit_id, rng.getrandbits(32)).instance(0)
    known = [f"{k}-… ({d})" for k, (_, d) in _PATTERNS.items()]
    known.append("porep|winning|wpost|snap-2k|8m|512m|32g|64g (Filecoin)")
    raise UnknownCircuitError(f"unknown circuit {circuit_id!r}; known: " + ", ".join(known))


def _filecoin_spec(circuit_id: str) -> CircuitSpec:
    from cuzk.filecoin.sizes import parameter_file_name, parse_circuit_id

    kind, size = parse_circuit_id(circuit_id)
    parts = {"porep": size.porep_partitions, "snap": size.snap_partitions}.get(kind.value, 1)
    description = _FILECOIN_DESCRIPTIONS[kind.value].format(size=size.name, parts=parts,
                                                            sectors=size.window_post_sectors)
    return CircuitSpec(circuit_id, description, FILECOIN, parameter_file_name(kind, size))


def lookup(circuit_id: str) -> CircuitSpec:
    if _FILECOIN_RE.match(circuit_id):
        return _filecoin_spec(circuit_id)
    _build(circuit_id, None)  # validates the id
    kind = circuit_id.split("-", 1)[0]
    return CircuitSpec(circuit_id, _PATTERNS[kind][1])
