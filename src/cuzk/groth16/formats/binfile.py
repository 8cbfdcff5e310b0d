"""Reader for the iden3 binary container used by snarkjs and circom (.zkey, .wtns, .r1cs, .ptau).

Layout (all integers little-endian): 4-byte magic, u32 version, u32 number of sections, then for each
section a u32 type, a u64 byte size and the data. The file is memory-mapped rather than read, so that a
multi-gigabyte proving key is paged in once, straight into whatever array the caller decodes it into.

Every section type must appear at most once. That is true of every format this package reads, and
snarkjs itself refuses duplicates when it reads a section ("Section Duplicated"); refusing them while
scanning the table means a crafted file cannot make two readers see different data.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import TracebackType

import numpy as np

from cuzk.errors import FormatError

__all__ = ["BinFile", "read_binfile"]

_HEADER = struct.Struct("<4sII")
_SECTION_HEADER = struct.Struct("<IQ")


@dataclass
class BinFile:
    """An open, memory-mapped iden3 container.

    `sections` maps a section type to `(offset, size)`: the absolute byte offset of the section's data
    in the file and its length. Use it as a context manager, or call `close()`, when done. Arrays made
    with `array()` are views of the mapping and must be dropped (or copied) before closing.
    """

    path: str
    magic: bytes
    version: int
    sections: dict[int, tuple[int, int]]
    size: int
    _mm: mmap.mmap | None = field(repr=False, default=None)

    def section(self, section_type: int, name: str) -> tuple[int, int]:
        """`(offset, size)` of a section the format requires; FormatError names it when missing."""
        try:
            return self.sections[section_type]
        except KeyError:
            raise FormatError(f"missing section {section_type} ({name})", source=self.path) from None

    def read(self, offset: int, length: int) -> bytes:
        """Bytes at an absolute offset; FormatError if they run past the end of the file."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise FormatError(f"expected {length} bytes but the file ends at byte {self.size}",
                              source=self.path, offset=offset)
        if length == 0 or self._mm is None:
            return b""
        return self._mm[offset:offset + length]

    def u32(self, offset: int) -> int:
        """A little-endian u32 at an absolute offset."""
        return int.from_bytes(self.read(offset, 4), "little")

    def array(self, offset: int, dtype: np.dtype | str, count: int) -> np.ndarray:
        """A zero-copy numpy view of `count` items of `dtype` at an absolute offset."""
        dt = np.dtype(dtype)
        if offset < 0 or offset + dt.itemsize * count > self.size:
            raise FormatError(f"expected {count} items of {dt.itemsize} bytes but the file ends at byte "
                              f"{self.size}", source=self.path, offset=offset)
        if count == 0:
            return np.empty(0, dtype=dt)
        return np.frombuffer(self._mm, dtype=dt, count=count, offset=offset)

    def close(self) -> None:
        """Unmap the file now if no `array()` view is alive, else when the last view is collected.

        Views can outlive a reader legitimately (a caller keeping a zero-copy array) or by accident
        (a traceback frame holding one while a FormatError propagates); neither may turn into a
        BufferError here, so the mapping is then left to the garbage collector.
        """
        if self._mm is not None:
            with contextlib.suppress(BufferError):
                self._mm.close()
            self._mm = None

    def __enter__(self) -> BinFile:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def read_binfile(path: str | os.PathLike[str], expected_magic: bytes, max_version: int, *,
                 required: Iterable[tuple[int, str]] = ()) -> BinFile:
    """Open and validate the container of `path`: magic, version, section table.

    `required` lists `(section type, name)` pairs that must be present (the name goes into the error
    message). Raises FormatError naming the file and byte offset on a wrong magic, a version above
    `max_version` (or 0), a truncated header or section table, a section running past the end of the
    file, or a duplicated section type.
    """
    source = str(path)
    if len(expected_magic) != 4:
        raise ValueError("an iden3 magic is 4 bytes")
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else None
    except OSError as exc:
        raise FormatError(f"cannot open: {exc.strerror or exc}", source=source) from exc
    try:
        binfile = _parse_table(source, mm, size, expected_magic, max_version)
        for section_type, name in required:
            binfile.section(section_type, name)
    except BaseException:
        if mm is not None:
            mm.close()
        raise
    return binfile


def _parse_table(source: str, mm: mmap.mmap | None, size: int, expected_magic: bytes,
                 max_version: int) -> BinFile:
    buf = mm if mm is not None else b""
    if size < _HEADER.size:
        raise FormatError(f"file is {size} bytes, shorter than the {_HEADER.size}-byte header "
                          f"(magic {expected_magic!r}, version, section count)", source=source, offset=0)
    magic, version, n_sections = _HEADER.unpack_from(buf, 0)
    if magic != expected_magic:
        raise FormatError(f"bad magic {magic!r}, expected {expected_magic!r} "
                          f"(is this a {expected_magic.decode(errors='replace')} file?)",
                          source=source, offset=0)
    if version == 0 or version > max_version:
        raise FormatError(f"unsupported version {version}, this reader handles versions 1..{max_version}",
                          source=source, offset=4)
    sections: dict[int, tuple[int, int]] = {}
    pos = _HEADER.size
    for index in range(n_sections):
        if pos + _SECTION_HEADER.size > size:
            raise FormatError(f"section table truncated: header of section #{index} of {n_sections} "
                              f"needs {_SECTION_HEADER.size} bytes but the file ends at byte {size}",
                              source=source, offset=pos)
        section_type, section_size = _SECTION_HEADER.unpack_from(buf, pos)
        data = pos + _SECTION_HEADER.size
        if section_size > size - data:
            raise FormatError(f"section #{index} (type {section_type}) claims {section_size} bytes of data "
                              f"but only {size - data} remain in the file", source=source, offset=pos)
        if section_type in sections:
            raise FormatError(f"section type {section_type} appears twice (first at offset "
                              f"{sections[section_type][0]})", source=source, offset=pos)
        sections[section_type] = (data, section_size)
        pos = data + section_size
    return BinFile(path=source, magic=magic, version=version, sections=sections, size=size, _mm=mm)
