"""bincode 1.x (legacy config) and serde-JSON value codecs, with errors that say where and what.

Filecoin's FFI hands vanilla proofs around as bincode: little-endian fixed-width integers, usize as
u64, Vec = u64 length + items, [u8; 32] = 32 raw bytes, enums = u32 variant index + payload
(docs/formats.md §5). The reader tracks the byte offset so that a truncated or corrupted file
produces a FormatError naming the file, the offset and the field being read.

serde_json writes every 32-byte value (commitments, tickets, domain values) as an array of 32
integers; the JSON helpers here check that shape and, for field elements, canonicity, naming the
JSON path of the offending value.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

from cuzk.errors import FormatError
from cuzk.field.constants import R_MODULUS
from cuzk.filecoin.sha256 import check_fr_bytes

__all__ = ["MAX_VEC_LEN", "BincodeReader", "BincodeWriter", "JsonReader", "bytes_json", "collector_paused",
           "loads_in_pieces"]

#: Upper bound for any length prefix we accept: far above every real vector (a 32GiB C1 holds
#: 10 x 18 proofs), far below what would make a corrupted length allocate gigabytes.
MAX_VEC_LEN = 1 << 24


class BincodeReader:
    """Sequential reader over a bytes object; every read names the field for error messages."""

    def __init__(self, data: bytes, source: str = "<bincode>") -> None:
        self.data = memoryview(data)
        self.offset = 0
        self.source = source

    def error(self, what: str, field: str, offset: int | None = None) -> FormatError:
        return FormatError(what, source=self.source, offset=self.offset if offset is None else offset, field=field)

    def take(self, n: int, field: str) -> bytes:
        end = self.offset + n
        if end > len(self.data):
            raise self.error(f"truncated: need {n} bytes, only {len(self.data) - self.offset} left", field)
        out = bytes(self.data[self.offset:end])
        self.offset = end
        return out

    def u32(self, field: str) -> int:
        return int.from_bytes(self.take(4, field), "little")

    def u64(self, field: str) -> int:
        return int.from_bytes(self.take(8, field), "little")

    def length(self, field: str, expected: int | None = None) -> int:
        """A Vec length prefix, bounded, optionally required to equal `expected`."""
        start = self.offset
        n = self.u64(field)
        if n > MAX_VEC_LEN:
            raise self.error(f"implausible vector length {n} (limit {MAX_VEC_LEN})", field, start)
        if expected is not None and n != expected:
            raise self.error(f"vector length {n}, expected {expected}", field, start)
        return n

    def bytes32(self, field: str) -> bytes:
        return self.take(32, field)

    def fr(self, field: str) -> bytes:
        """32 bytes that must be a canonical field element (a Poseidon/Sha256 domain value)."""
        start = self.offset
        return check_fr_bytes(self.take(32, field), field=field, source=self.source, offset=start)

    def tag(self, field: str, variants: int) -> int:
        start = self.offset
        t = self.u32(field)
        if t >= variants:
            raise self.error(f"enum tag {t} out of range (expected 0..{variants - 1})", field, start)
        return t

    def finish(self) -> None:
        if self.offset != len(self.data):
            raise self.error(f"{len(self.data) - self.offset} trailing bytes after the end of the value", "end")


class BincodeWriter:
    """Accumulates bincode output."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def u32(self, v: int) -> None:
        self.parts.append(int(v).to_bytes(4, "little"))

    def u64(self, v: int) -> None:
        self.parts.append(int(v).to_bytes(8, "little"))

    def raw(self, b: bytes) -> None:
        self.parts.append(bytes(b))

    def bytes32(self, b: bytes) -> None:
        if len(b) != 32:
            raise ValueError(f"expected 32 bytes, got {len(b)}")
        self.parts.append(bytes(b))

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def bytes_json(b: bytes) -> list[int]:
    """32 bytes -> serde's JSON form, an array of 32 integers."""
    return list(b)


class JsonReader:
    """Typed access to parsed JSON values; errors name the source and the JSON path."""

    def __init__(self, source: str = "<json>") -> None:
        self.source = source

    def error(self, what: str, path: str) -> FormatError:
        return FormatError(what, source=self.source, field=path)

    def obj(self, value: object, path: str, keys: tuple[str, ...]) -> dict:
        if not isinstance(value, dict):
            raise self.error(f"expected an object, got {type(value).__name__}", path)
        missing = [k for k in keys if k not in value]
        if missing:
            raise self.error(f"missing key(s) {', '.join(missing)}", path)
        return value

    def variant(self, value: object, path: str, names: tuple[str, ...]) -> tuple[str, object]:
        """An externally tagged enum {"Name": payload}."""
        if not isinstance(value, dict) or len(value) != 1:
            raise self.error(f"expected an enum object with exactly one of {', '.join(names)}", path)
        (name, payload), = value.items()
        if name not in names:
            raise self.error(f"unknown variant {name!r}; expected one of {', '.join(names)}", path)
        return name, payload

    def array(self, value: object, path: str, length: int | None = None) -> list:
        if not isinstance(value, list):
            raise self.error(f"expected an array, got {type(value).__name__}", path)
        if length is not None and len(value) != length:
            raise self.error(f"expected {length} entries, got {len(value)}", path)
        return value

    def uint(self, value: object, path: str, bits: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << bits:
            raise self.error(f"expected an unsigned {bits}-bit integer, got {value!r}", path)
        return value

    def bytes32(self, value: object, path: str) -> bytes:
        arr = self.array(value, path, 32)
        if set(map(type, arr)) <= {int}:  # fast path (C loops): bool, float, str are excluded here
            try:
                return bytes(arr)
            except ValueError:
                pass
        raise self.error("expected 32 integers in 0..255", path)

    def fr(self, value: object, path: str) -> bytes:
        return check_fr_bytes(self.bytes32(value, path), field=path, source=self.source)

    def frs(self, value: object, path: str, length: int | None = None) -> tuple[bytes, ...]:
        """An array of field elements, each read as `fr` reads one. A PoRep-32GiB C1 holds 323K of
        them, and one call each (its path formatted, its checks in layers) took most of its decoding;
        this checks them in one loop and only formats a path for the first bad entry, which `fr`
        then names as before."""
        arr = self.array(value, path, length)
        out = []
        for v in arr:
            # The checks of `bytes32` and `check_fr_bytes`, in line.
            if type(v) is not list or len(v) != 32 or not set(map(type, v)) <= _INT:
                break
            try:
                b = bytes(v)
            except ValueError:
                break
            if int.from_bytes(b, "little") >= R_MODULUS:
                break
            out.append(b)
        else:
            return tuple(out)
        return tuple(self.fr(v, f"{path}[{i}]") for i, v in enumerate(arr))


_INT = {int}  #: the only element type of a byte array (bool, a subclass, is refused)
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def loads_in_pieces(text: str | bytes, depth: int) -> Any:
    """`json.loads(text)`, with the arrays and objects of the top `depth` levels walked here and each
    value below them handed to the C decoder on its own. The C decoder holds the GIL until it
    returns: on a whole PoRep-32GiB C1 that is seconds in which no other thread of the process runs (a
    daemon's RPCs and dispatch among them; benchmarks/results/planning-stall-cpu-2026-12-02.jsonl),
    in pieces it is one challenge's proof at a time. Same value, and a ValueError where json.loads
    raises one."""
    s = text.decode(json.detect_encoding(text)) if isinstance(text, bytes | bytearray) else text
    value, end = _piece(s, _WHITESPACE.match(s, 0).end(), depth)
    end = _WHITESPACE.match(s, end).end()
    if end != len(s):
        raise json.JSONDecodeError("Extra data", s, end)
    return value


def _piece(s: str, i: int, depth: int) -> tuple[Any, int]:
    """The value at s[i] (no whitespace before it) and the index after it."""
    opener = s[i:i + 1]
    if depth <= 0 or opener not in ("[", "{"):
        return _DECODER.raw_decode(s, i)
    closer = "]" if opener == "[" else "}"
    items: list[Any] = []
    entries: dict[str, Any] = {}
    i = _WHITESPACE.match(s, i + 1).end()
    if s[i:i + 1] == closer:
        return (items if opener == "[" else entries), i + 1
    while True:
        if opener == "{":
            if s[i:i + 1] != '"':
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes", s, i)
            key, i = _DECODER.raw_decode(s, i)
            i = _WHITESPACE.match(s, i).end()
            if s[i:i + 1] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", s, i)
            i = _WHITESPACE.match(s, i + 1).end()
            entries[key], i = _piece(s, i, depth - 1)
        else:
            item, i = _piece(s, i, depth - 1)
            items.append(item)
        i = _WHITESPACE.match(s, i).end()
        mark = s[i:i + 1]
        if mark == closer:
            return (items if opener == "[" else entries), i + 1
        if mark != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", s, i)
        i = _WHITESPACE.match(s, i + 1).end()


_collector_lock = threading.Lock()
_collector_holders = 0
_collector_was_enabled = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (for every thread; it is back on when the
    last of the blocks running at once ends, if it was on before the first). Decoding a C1 builds
    millions of objects, which set off full collections over the whole heap, each of them a pause
    for every thread (benchmarks/results/planning-stall-cpu-2026-12-02.jsonl); the decoded values
    hold no reference cycles for it to find."""
    global _collector_holders, _collector_was_enabled
    with _collector_lock:
        if _collector_holders == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _collector_holders += 1
    try:
        yield
    finally:
        with _collector_lock:
            _collector_holders -= 1
            if _collector_holders == 0 and _collector_was_enabled:
                gc.enable()
