"""Errors shared by every layer.

A `CuzkError` is a user-facing failure: the CLI prints its message and exits non-zero, without a
traceback. Anything else escaping to the CLI is a bug in cuzk.
"""

from __future__ import annotations


class CuzkError(Exception):
    """Base class of errors caused by the user's input or environment."""


class FormatError(CuzkError):
    """A file or byte string does not have the expected layout or content.

    The message always names where the problem is (file, byte offset, field) and what was expected.
    """

    def __init__(self, what: str, *, source: str | None = None, offset: int | None = None,
                 field: str | None = None) -> None:
        self.what = what
        self.source = source
        self.offset = offset
        self.field = field
        where = []
        if source is not None:
            where.append(str(source))
        if offset is not None:
            where.append(f"offset {offset}")
        if field is not None:
            where.append(field)
        super().__init__(f"{': '.join(where)}: {what}" if where else what)


class PointDecodeError(FormatError):
    """Bytes that do not encode a valid curve point (bad flags, not on curve, not in subgroup, ...)."""


class SynthesisError(CuzkError):
    """A circuit could not be synthesized (missing assignment, unsatisfied constraint, ...)."""
