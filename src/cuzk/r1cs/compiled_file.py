"""The on-disk form of a compiled circuit: versioned header, raw arrays, atomic write, mmap load.

Layout (all integers little-endian):

    offset  size  field
    0       8     magic b"CUZKR1CS"
    8       4     format version (u32, currently 1)
    12      4     metadata length L (u32)
    16      32    BLAKE2b-256 of the metadata bytes
    48      L     metadata: UTF-8 JSON (below)
    ...           zero padding to a multiple of 64, then the arrays at the offsets the metadata gives,
                  each 64-byte aligned, raw C-order little-endian

The metadata names the circuit id, its counts, the synthesis code digest, the fingerprint (a
digest of the circuit's exact R1CS, `CompiledCircuit.compute_fingerprint`), the total file size
and, per array, dtype, shape, offset, byte length and BLAKE2b-256. Loading maps the file read-only
(`np.memmap`), so a 25 GB PoRep-32GiB circuit costs no reading until the SpMV touches it and the
page cache is shared by every process that proves that circuit.

Errors (`CompiledFileError`, naming the file): wrong magic, unsupported version, a metadata
checksum mismatch, a file shorter (truncated) or longer than its header declares, arrays out of
bounds or inconsistent, and, when verified, an array whose content digest differs. A file for
another circuit id or other synthesis code is refused with `expect_circuit_id` / `expect_code_digest`.

Writes are atomic: a temporary file in the same directory, fsync, rename over the target, fsync of
the directory. A reader sees the old file, the new one or none, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from cuzk.errors import FormatError
from cuzk.r1cs.compiled import CompiledCircuit, array_digest, check_witness_counts

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "CompiledFileError",
    "CompiledHeader",
    "load_compiled",
    "read_header",
    "write_compiled",
]

MAGIC = b"CUZKR1CS"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sII32s")
_ALIGN = 64
_MAX_METADATA = 1 << 20
_DTYPES = {"<u2", "<u4", "<i8", "<u8", "|u1"}


class CompiledFileError(FormatError):
    """A compiled-circuit file that cannot be used as it is (the message says why)."""


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


class CompiledHeader:
    """What the header of a compiled file states (read without touching the arrays)."""

    def __init__(self, path: Path, version: int, meta: dict[str, Any], data_start: int) -> None:
        self.path = path
        self.version = version
        self.meta = meta
        self.data_start = data_start

    @property
    def circuit_id(self) -> str:
        return str(self.meta["circuit_id"])

    @property
    def code_digest(self) -> str:
        return str(self.meta["code_digest"])

    @property
    def fingerprint(self) -> str:
        return str(self.meta["fingerprint"])

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.meta["counts"])

    @property
    def file_size(self) -> int:
        return int(self.meta["file_size"])

    @property
    def num_constraints(self) -> int:
        return int(self.meta["counts"]["num_constraints"])

    def check_witness(self, num_inputs: int, num_aux: int, num_constraints: int | None = None) -> None:
        """`CompiledCircuit.check_witness` from the header alone (CompiledMismatchError)."""
        c = self.counts
        want = (int(c["num_inputs"]), int(c["num_aux"]), int(c["num_constraints"]))
        check_witness_counts(self.circuit_id, want,
                             (num_inputs, num_aux, want[2] if num_constraints is None else num_constraints))

    def check_expected(self, circuit_id: str | None = None, code_digest: str | None = None) -> None:
        """CompiledFileError unless the file holds `circuit_id`, compiled from synthesis code `code_digest`."""
        if circuit_id is not None and self.circuit_id != circuit_id:
            raise CompiledFileError(f"holds circuit {self.circuit_id!r}, not {circuit_id!r}", source=str(self.path))
        if code_digest is not None and self.code_digest != code_digest:
            raise CompiledFileError(f"was compiled from other synthesis code (digest {self.code_digest[:16]}…, this "
                                    f"code is {code_digest[:16]}…): stale, rebuild it", source=str(self.path))

    def summary(self) -> dict[str, Any]:
        """A JSON-friendly description (for status and logs)."""
        return {"circuit_id": self.circuit_id, "version": self.version, "counts": self.counts,
                "nnz": {m: self.meta["arrays"][f"{m}_cols"]["shape"][0] for m in "abc"},
                "coefficients": self.meta["arrays"]["coeff_table"]["shape"][0], "file_size": self.file_size,
                "fingerprint": self.fingerprint, "code_digest": self.code_digest}


# -- writing ----------------------------------------------------------------------------------------

def _metadata(compiled: CompiledCircuit, digests: dict[str, str], fingerprint: str) -> tuple[bytes, dict, int]:
    """The metadata bytes; array offsets depend on the metadata length, so iterate to a fixed point."""
    arrays = compiled.arrays()
    meta_len = 0
    while True:
        offset = _align(_PREFIX.size + meta_len)
        table = {}
        for name in CompiledCircuit.ARRAY_NAMES:
            arr = arrays[name]
            table[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "offset": offset, "nbytes": arr.nbytes,
                           "blake2b": digests[name]}
            offset = _align(offset + arr.nbytes)
        meta = {"circuit_id": compiled.circuit_id, "counts": compiled.counts(), "code_digest": compiled.code_digest,
                "fingerprint": fingerprint, "file_size": offset, "arrays": table}
        raw = json.dumps(meta, sort_keys=True).encode()
        if len(raw) == meta_len:
            return raw, meta, offset
        meta_len = len(raw)


def write_compiled(compiled: CompiledCircuit, path: str | Path) -> Path:
    """Write `compiled` to `path` atomically; returns the path. The fingerprint is recomputed from
    the arrays being written, so the file always describes its own content."""
    path = Path(path)
    digests = compiled.array_digests()
    fingerprint = compiled.compute_fingerprint(digests)
    if compiled.fingerprint and compiled.fingerprint != fingerprint:
        raise ValueError(f"{compiled.circuit_id}: the compiled circuit's fingerprint does not match its arrays")
    raw, meta, size = _metadata(compiled, digests, fingerprint)
    arrays = compiled.arrays()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(_PREFIX.pack(MAGIC, FORMAT_VERSION, len(raw), hashlib.blake2b(raw, digest_size=32).digest()))
            f.write(raw)
            for name in CompiledCircuit.ARRAY_NAMES:
                entry = meta["arrays"][name]
                f.write(b"\0" * (entry["offset"] - f.tell()))
                flat = np.ascontiguousarray(arrays[name]).reshape(-1).view(np.uint8)
                step = 1 << 26
                for start in range(0, flat.size, step):
                    f.write(memoryview(flat[start:start + step]))
            f.write(b"\0" * (size - f.tell()))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- reading ----------------------------------------------------------------------------------------

def read_header(path: str | Path) -> CompiledHeader:
    """Parse and check the header and metadata of a compiled file (cheap: reads the head only)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            prefix = f.read(_PREFIX.size)
            if len(prefix) < _PREFIX.size:
                raise CompiledFileError(f"truncated: {len(prefix)} bytes, shorter than the {_PREFIX.size}-byte header",
                                        source=str(path))
            magic, version, meta_len, meta_sum = _PREFIX.unpack(prefix)
            if magic != MAGIC:
                raise CompiledFileError(f"not a compiled circuit (magic {magic!r}, expected {MAGIC!r})",
                                        source=str(path), offset=0)
            if version != FORMAT_VERSION:
                raise CompiledFileError(f"unsupported compiled-circuit format version {version} (this cuzk reads "
                                        f"version {FORMAT_VERSION}); rebuild the file", source=str(path), offset=8)
            if meta_len > _MAX_METADATA:
                raise CompiledFileError(f"metadata length {meta_len} exceeds {_MAX_METADATA} bytes", source=str(path),
                                        offset=12)
            raw = f.read(meta_len)
    except OSError as err:
        raise CompiledFileError(f"cannot read: {err.strerror or err}", source=str(path)) from None
    if len(raw) < meta_len:
        raise CompiledFileError(f"truncated: the header declares {meta_len} bytes of metadata, the file has "
                                f"{size - _PREFIX.size}", source=str(path), offset=_PREFIX.size)
    if hashlib.blake2b(raw, digest_size=32).digest() != meta_sum:
        raise CompiledFileError("metadata checksum mismatch (the header is corrupted)", source=str(path),
                                offset=_PREFIX.size)
    try:
        meta = json.loads(raw)
        _check_meta(meta)
    except (ValueError, KeyError, TypeError) as err:
        raise CompiledFileError(f"malformed metadata: {err}", source=str(path), offset=_PREFIX.size) from None
    declared = int(meta["file_size"])
    if size < declared:
        raise CompiledFileError(f"truncated: {size} bytes, the header declares {declared}", source=str(path))
    if size > declared:
        raise CompiledFileError(f"{size} bytes, longer than the {declared} the header declares", source=str(path))
    return CompiledHeader(path, version, meta, _align(_PREFIX.size + meta_len))


def _check_meta(meta: Any) -> None:
    if not isinstance(meta, dict):
        raise TypeError("metadata is not a JSON object")
    for key in ("circuit_id", "counts", "code_digest", "fingerprint", "file_size", "arrays"):
        if key not in meta:
            raise KeyError(key)
    for key in ("num_inputs", "num_aux", "num_constraints", "a_input_density"):
        if not isinstance(meta["counts"].get(key), int) or meta["counts"][key] < 0:
            raise ValueError(f"counts.{key} must be a non-negative integer")
    for name in CompiledCircuit.ARRAY_NAMES:
        entry = meta["arrays"][name]
        if entry["dtype"] not in _DTYPES:
            raise ValueError(f"array {name}: unsupported dtype {entry['dtype']!r}")
        shape = entry["shape"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError(f"array {name}: bad shape {shape!r}")
        want = int(np.prod(shape, dtype=np.int64)) * np.dtype(entry["dtype"]).itemsize
        if entry["nbytes"] != want or entry["offset"] % _ALIGN or entry["offset"] + want > meta["file_size"]:
            raise ValueError(f"array {name}: offset {entry['offset']} / {entry['nbytes']} bytes inconsistent with "
                             f"its shape {shape} or the file size {meta['file_size']}")


def load_compiled(path: str | Path, *, expect_circuit_id: str | None = None, expect_code_digest: str | None = None,
                  verify: bool = True) -> CompiledCircuit:
    """Map a compiled file read-only. `verify` recomputes every array's digest and the fingerprint
    (a pass over the file at hash speed, ~1 GB/s); the header and structure are always checked."""
    header = read_header(path)
    path = header.path
    header.check_expected(expect_circuit_id, expect_code_digest)
    mm = np.memmap(path, dtype=np.uint8, mode="r") if header.file_size else np.zeros(0, np.uint8)
    arrays = {}
    for name, entry in header.meta["arrays"].items():
        if name not in CompiledCircuit.ARRAY_NAMES:
            continue
        start = entry["offset"]
        arrays[name] = mm[start:start + entry["nbytes"]].view(np.dtype(entry["dtype"])).reshape(entry["shape"])
    if verify:
        for name, arr in arrays.items():
            if array_digest(arr) != header.meta["arrays"][name]["blake2b"]:
                raise CompiledFileError(f"array {name} is corrupted (content digest mismatch)", source=str(path),
                                        offset=header.meta["arrays"][name]["offset"])
    try:
        compiled = CompiledCircuit.from_arrays(header.circuit_id, header.counts, arrays, header.code_digest)
    except (ValueError, KeyError) as err:
        raise CompiledFileError(f"inconsistent content: {err}", source=str(path)) from None
    if verify:
        digests = {name: header.meta["arrays"][name]["blake2b"] for name in CompiledCircuit.ARRAY_NAMES}
        if compiled.compute_fingerprint(digests) != header.fingerprint:
            raise CompiledFileError("fingerprint mismatch: the header's fingerprint does not describe these arrays",
                                    source=str(path))
    return compiled.with_fingerprint(header.fingerprint)
