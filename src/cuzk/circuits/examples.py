"""Small self-contained circuits for tests, demos and benchmarks (not Filecoin circuits).

- `MimcCircuit`: knowledge of a preimage x₀ with MiMC-5(x₀) = y for a public y. Each round is
  x ← (x + cᵢ)^5, three constraints; its witness is dense random field elements, the expensive case
  for MSM.
- `BitsCircuit`: public values each proven to fit in 253 bits by decomposition: most of its witness
  is 0/1, like a SHA-256 circuit's.
Both can be sized to fill a domain exactly, so benchmarks measure 2^k constraints, not 2^k + ε.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from functools import cached_property

from cuzk.field.constants import R_MODULUS
from cuzk.r1cs import ConstraintSystem, LinearCombination, Variable, lc

#: Every Groth16 circuit gets one extra row per input (ONE included) from the generator/prover.
MIMC_INPUTS = 2  # ONE and y


def mimc_round_constants(rounds: int) -> list[int]:
    """cᵢ = SHA-256("cuzk-mimc5" ‖ i) mod r: nothing-up-my-sleeve constants."""
    return [int.from_bytes(hashlib.sha256(b"cuzk-mimc5" + i.to_bytes(4, "little")).digest(), "little")
            % R_MODULUS for i in range(rounds)]


def mimc5(x: int, constants: list[int]) -> int:
    for c in constants:
        x = pow((x + c) % R_MODULUS, 5, R_MODULUS)
    return x


@dataclass
class MimcCircuit:
    """y = MiMC-5(x₀) with `rounds` rounds, then `extra` squarings of y (padding to an exact size).

    `preimage=None` gives a blank circuit (structure only, for key generation).
    """

    rounds: int
    extra: int = 0
    preimage: int | None = None

    @classmethod
    def with_total_constraints(cls, total: int, preimage: int | None = None) -> MimcCircuit:
        """A circuit whose constraint count, input rows included, is exactly `total` (>= 5)."""
        body = total - MIMC_INPUTS
        if body < 3:
            raise ValueError(f"a MiMC circuit needs at least {3 + MIMC_INPUTS} constraints")
        return cls(rounds=body // 3, extra=body % 3, preimage=preimage)

    @cached_property
    def constants(self) -> list[int]:
        return mimc_round_constants(self.rounds)

    @property
    def num_constraints(self) -> int:
        return 3 * self.rounds + self.extra + MIMC_INPUTS

    def output(self) -> int:
        if self.preimage is None:
            raise ValueError("a blank circuit has no output")
        return mimc5(self.preimage, self.constants)

    def public_inputs(self) -> list[int]:
        return [self.output()]

    def synthesize(self, cs: ConstraintSystem) -> None:
        known = self.preimage is not None and cs.needs_values
        x_val = self.preimage % R_MODULUS if known else None
        x: Variable = cs.alloc("x0", x_val)
        y_val = self.output() if known else None
        y: Variable | None = None
        for i, c in enumerate(self.constants):
            t_val = (x_val + c) % R_MODULUS if x_val is not None else None
            t = lc(x, (cs.one, c))
            with cs.namespace(f"round {i}"):
                s2 = cs.alloc("t^2", None if t_val is None else t_val * t_val % R_MODULUS)
                cs.enforce("t*t=t^2", t, t, lc(s2))
                s4 = cs.alloc("t^4", None if t_val is None else pow(t_val, 4, R_MODULUS))
                cs.enforce("t^2*t^2=t^4", lc(s2), lc(s2), lc(s4))
                out_val = None if t_val is None else pow(t_val, 5, R_MODULUS)
                last = i == self.rounds - 1
                # The last round's output is the public input itself: no extra equality row.
                nxt = cs.alloc_input("y", y_val) if last else cs.alloc("t^5", out_val)
                cs.enforce("t^4*t=t^5", lc(s4), t, lc(nxt))
            x, x_val = nxt, out_val
            if last:
                y = nxt
        sq, sq_val = y, y_val
        for j in range(self.extra):
            nv = None if sq_val is None else sq_val * sq_val % R_MODULUS
            nxt = cs.alloc(f"y^(2^{j + 1})", nv)
            cs.enforce(f"square {j}", lc(sq), lc(sq), lc(nxt))
            sq, sq_val = nxt, nv


@dataclass
class BitsCircuit:
    """Each public value v is decomposed into 253 boolean aux bits with Σ 2^i·bᵢ = v.

    Rows per value: 253 booleanity rows + 1 packing row, plus 1 input row.
    """

    values: list[int | None] = field(default_factory=list)
    bits: int = 253

    @classmethod
    def blank(cls, count: int) -> BitsCircuit:
        return cls(values=[None] * count)

    @classmethod
    def random(cls, count: int, rng: random.Random | None = None) -> BitsCircuit:
        rng = rng or random.Random()
        return cls(values=[rng.getrandbits(253) for _ in range(count)])

    @property
    def num_constraints(self) -> int:
        return len(self.values) * (self.bits + 2) + 1

    def public_inputs(self) -> list[int]:
        return [int(v) for v in self.values if v is not None]

    def synthesize(self, cs: ConstraintSystem) -> None:
        for k, value in enumerate(self.values):
            known = value is not None and cs.needs_values
            with cs.namespace(f"value {k}"):
                packed = LinearCombination()
                for i in range(self.bits):
                    bit_val = (value >> i) & 1 if known else None  # type: ignore[operator]
                    b = cs.alloc(f"bit {i}", bit_val)
                    # (1 - b) * b = 0
                    cs.enforce(f"bit {i} is boolean", lc((cs.one, 1), (b, -1)), lc(b), LinearCombination())
                    packed.add_term(b, 1 << i)
                v = cs.alloc_input("value", value if known else None)
                cs.enforce("packing", packed, lc(cs.one), lc(v))
