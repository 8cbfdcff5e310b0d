"""The constraint-system interface circuits are written against (bellperson's `ConstraintSystem`).

A circuit calls `alloc`, `alloc_input` and `enforce` in a fixed order; each back end (proving,
witness-only, shape counting, recording) gives those calls its own meaning. Values are passed as
ints, or lazily as zero-argument callables so that back ends that need no values (shape, recording,
parameter generation) never compute them: exactly bellperson's closures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.r1cs.lc import LinearCombination
from cuzk.r1cs.variable import ONE, Variable

Value = int | Callable[[], int | None] | None
Annotation = str | Callable[[], str]


class ConstraintSystem:
    """Base class: namespaces and value resolution shared by all back ends."""

    #: Whether `alloc` values are evaluated. Gadgets may skip witness work when False.
    needs_values: bool = True

    def __init__(self) -> None:
        self._path: list[str] = []

    # -- to be provided by back ends -------------------------------------------------------
    def alloc(self, annotation: Annotation, value: Value = None) -> Variable:
        raise TypeError(f"{type(self).__name__} does not implement alloc")

    def alloc_input(self, annotation: Annotation, value: Value = None) -> Variable:
        raise TypeError(f"{type(self).__name__} does not implement alloc_input")

    def enforce(self, annotation: Annotation, a: LinearCombination, b: LinearCombination,
                c: LinearCombination) -> None:
        raise TypeError(f"{type(self).__name__} does not implement enforce")

    @property
    def num_inputs(self) -> int:
        raise TypeError(f"{type(self).__name__} does not count inputs")

    @property
    def num_aux(self) -> int:
        raise TypeError(f"{type(self).__name__} does not count aux variables")

    @property
    def num_constraints(self) -> int:
        raise TypeError(f"{type(self).__name__} does not count constraints")

    # -- shared ------------------------------------------------------------------------------
    @property
    def one(self) -> Variable:
        return ONE

    @contextmanager
    def namespace(self, name: Annotation) -> Iterator[ConstraintSystem]:
        """Scope annotations under `name`. Names never change the R1CS; they only label errors."""
        self._path.append(name if isinstance(name, str) else name())
        try:
            yield self
        finally:
            self._path.pop()

    def path_of(self, annotation: Annotation) -> str:
        leaf = annotation if isinstance(annotation, str) else annotation()
        return "/".join([*self._path, leaf])

    def resolve(self, annotation: Annotation, value: Value) -> int:
        """Evaluate a value argument to an int in [0, r), or fail naming the variable."""
        if callable(value):
            value = value()
        if value is None:
            raise SynthesisError(f"assignment missing for {self.path_of(annotation)!r}")
        return int(value) % R_MODULUS


class Circuit(Protocol):
    """Anything that can lay out its constraints on a constraint system."""

    def synthesize(self, cs: ConstraintSystem) -> None: ...
