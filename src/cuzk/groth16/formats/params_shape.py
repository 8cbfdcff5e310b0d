"""What a `.params` file made for a circuit must look like, and how a real file differs from it.

bellperson's generator fixes every vector length from the circuit's shape (docs/circuits.md §4,
docs/formats.md §2): |IC| = inputs (ONE included), |L| = aux variables, |H| = domain size − 1 with the domain the
smallest power of two ≥ the rows (input rows included), |A| = variables with a non-zero A
coefficient somewhere, |B_G1| = |B_G2| = the same for B (points at infinity are dropped, so a
variable that never reaches a query has no point in it). Comparing these with a file's header
(`scan_layout`, which reads only the length fields) says whether a circuit can use the file
without loading a single point.
"""

from __future__ import annotations

from dataclasses import dataclass

from cuzk.curve.points import G1_UNCOMPRESSED_BYTES as G1B
from cuzk.curve.points import G2_UNCOMPRESSED_BYTES as G2B
from cuzk.groth16.formats.params_file import VECTOR_NAMES, VK_HEADER_BYTES, ParamsLayout
from cuzk.r1cs import CircuitShape

__all__ = ["ExpectedParamsLayout", "LayoutMismatch", "domain_size_for"]

#: What each header length stands for, as the mismatch messages name it.
_MEANING = {
    "ic": "public inputs, ONE included (vk IC)",
    "h": "domain size − 1 (H)",
    "l": "aux variables (L)",
    "a": "A density: inputs + aux in some A row (A)",
    "b_g1": "B density: inputs + aux in some B row (B_G1)",
    "b_g2": "B density: inputs + aux in some B row (B_G2)",
}


def domain_size_for(num_constraints: int) -> int:
    """The smallest power of two ≥ the row count (bellperson's EvaluationDomain; at least 1)."""
    return 1 << max(num_constraints - 1, 0).bit_length()


@dataclass(frozen=True)
class LayoutMismatch:
    """One header length that differs from the circuit's."""

    vector: str  #: "ic", "h", "l", "a", "b_g1" or "b_g2"
    expected: int
    found: int

    @property
    def meaning(self) -> str:
        return _MEANING[self.vector]

    def __str__(self) -> str:
        return (f"{self.vector} length {self.found:,} in the file, the circuit needs {self.expected:,} "
                f"({self.meaning}; {self.found - self.expected:+,})")


@dataclass(frozen=True)
class ExpectedParamsLayout:
    """The vector lengths (points) of the `.params` file of one circuit shape."""

    ic: int
    h: int
    l: int  #: the vector's name in bellperson and in the file
    a: int
    b_g1: int
    b_g2: int

    @classmethod
    def of_shape(cls, shape: CircuitShape) -> ExpectedParamsLayout:
        return cls(ic=shape.num_inputs, h=domain_size_for(shape.num_constraints) - 1, l=shape.num_aux,
                   a=shape.a_query_len, b_g1=shape.b_query_len, b_g2=shape.b_query_len)

    @property
    def domain_size(self) -> int:
        return self.h + 1

    def counts(self) -> dict[str, int]:
        return {"ic": self.ic, **{name: getattr(self, name) for name in VECTOR_NAMES}}

    @property
    def vk_file_size(self) -> int:
        return VK_HEADER_BYTES + self.ic * G1B

    @property
    def params_file_size(self) -> int:
        """Bytes of the whole `.params`: the vk, then five u32-prefixed vectors."""
        g1_points = self.h + self.l + self.a + self.b_g1
        return self.vk_file_size + 4 * len(VECTOR_NAMES) + g1_points * G1B + self.b_g2 * G2B

    def mismatches(self, layout: ParamsLayout) -> list[LayoutMismatch]:
        """Every header length of `layout` (a `.params`, not a `.vk`) that differs from this one."""
        if layout.is_vk_only:
            raise ValueError(f"{layout.path} is a verifying key: it has no vectors to compare")
        found = {"ic": layout.num_ic, **{v.name: v.count for v in layout.vectors}}
        return [LayoutMismatch(name, expected, found[name]) for name, expected in self.counts().items()
                if found[name] != expected]
