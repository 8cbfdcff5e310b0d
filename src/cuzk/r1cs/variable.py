"""Variables of a rank-1 constraint system, in bellperson's two index spaces.

bellperson numbers public inputs and auxiliary (private) variables separately, each in allocation
order; input 0 is the constant ONE. Published Filecoin parameters depend on that numbering, so we
keep it. A variable is an `int` subclass so that it hashes and compares at C speed: input i is
encoded as i (>= 0), aux j as -(j + 1).
"""

from __future__ import annotations


class Variable(int):
    """An input or auxiliary variable. Use `Variable.input(i)` / `Variable.aux(j)`."""

    __slots__ = ()

    @classmethod
    def input(cls, index: int) -> Variable:
        return cls(index)

    @classmethod
    def aux(cls, index: int) -> Variable:
        return cls(-index - 1)

    @property
    def is_input(self) -> bool:
        return self >= 0

    @property
    def index(self) -> int:
        """Position within its own index space (inputs or aux)."""
        return int(self) if self >= 0 else -int(self) - 1

    def __repr__(self) -> str:
        return f"Input({self.index})" if self >= 0 else f"Aux({self.index})"


ONE = Variable.input(0)
"""The constant-one input every Groth16 circuit starts with (bellperson allocates it first)."""
