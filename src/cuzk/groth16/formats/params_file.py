"""bellperson's `.params` and `.vk` files, byte for byte (docs/formats.md §2).

.vk     = α_G1 β_G1 β_G2 γ_G2 δ_G1 δ_G2 ‖ u32-BE |IC| ‖ IC…         (points uncompressed)
.params = the .vk bytes ‖ five vectors H, L, A, B_G1 (G1) and B_G2 (G2), each u32-BE length ‖ points

Reading maps the file and keeps the vectors as views of the map, so a 47 GiB file costs no memory
until its points are used, and nothing is read twice. The vk is always fully checked (on curve, in
the subgroup, not the identity, as bellperson does); vector points are checked when decoded, and
all of them by `check_params_points`.
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cuzk.curve import encoding
from cuzk.curve.bases import G1Bases, G2Bases
from cuzk.curve.points import G1_UNCOMPRESSED_BYTES as G1B
from cuzk.curve.points import G2_UNCOMPRESSED_BYTES as G2B
from cuzk.errors import CuzkError, FormatError
from cuzk.groth16.keys import ProvingKey, VerifyingKey

#: Bytes of a .vk before its IC vector (six points and the IC length).
VK_HEADER_BYTES = 3 * G1B + 3 * G2B + 4  # α, β_G1, δ_G1 (G1) + β_G2, γ_G2, δ_G2 (G2) + u32 = 868
VECTOR_NAMES = ("h", "l", "a", "b_g1", "b_g2")
OFFICIAL_PREFIX = "v28-"


class OfficialNameError(CuzkError):
    """Refusal to store insecure parameters under a name Filecoin nodes would trust."""


def check_output_name(path: str | os.PathLike, *, force_official_name: bool) -> None:
    name = Path(path).name
    if name.startswith(OFFICIAL_PREFIX) and not force_official_name:
        raise OfficialNameError(
            f"refusing to write {name!r}: names starting with {OFFICIAL_PREFIX!r} belong to Filecoin's "
            "published trusted-setup parameters, and these are insecure test parameters "
            "(pass --force-official-name to override)"
        )


# -- writing ------------------------------------------------------------------------------------

def vk_to_bytes(vk: VerifyingKey) -> bytes:
    if vk.beta_g1 is None or vk.delta_g1 is None:
        raise CuzkError("this verifying key has no beta_g1/delta_g1 (it came from a snarkjs vk.json), "
                        "so it cannot be written as a bellperson .vk")
    parts = [
        encoding.g1_to_uncompressed(vk.alpha_g1),
        encoding.g1_to_uncompressed(vk.beta_g1),
        encoding.g2_to_uncompressed(vk.beta_g2),
        encoding.g2_to_uncompressed(vk.gamma_g2),
        encoding.g1_to_uncompressed(vk.delta_g1),
        encoding.g2_to_uncompressed(vk.delta_g2),
        struct.pack(">I", len(vk.ic)),
    ]
    parts.extend(encoding.g1_to_uncompressed(p) for p in vk.ic)
    return b"".join(parts)


def _atomic_write(path: str | os.PathLike, chunks: Iterator[bytes | memoryview]) -> None:
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_vk(path: str | os.PathLike, vk: VerifyingKey, *, force_official_name: bool = False) -> None:
    check_output_name(path, force_official_name=force_official_name)
    _atomic_write(path, iter([vk_to_bytes(vk)]))


def write_params(path: str | os.PathLike, pk: ProvingKey, *, force_official_name: bool = False) -> None:
    """Write `.params` atomically (a reader never sees half a file), through `ParamsFileWriter`."""
    with ParamsFileWriter(path, pk.vk, {name: len(getattr(pk, name)) for name in VECTOR_NAMES},
                          force_official_name=force_official_name) as writer:
        for name in VECTOR_NAMES:
            writer.vector(name)[:] = getattr(pk, name).raw
        writer.commit()


def _remove_dead_writers_temporaries(path: Path) -> None:
    """Temporaries of `path` left by writers that died without cleaning up (killed): tens of GB each
    for a large key, which would otherwise fill the disk a retry needs. A live writer's stays."""
    for tmp in path.parent.glob(f".{path.name}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except PermissionError:  # alive, another user's
            pass


class ParamsFileWriter:
    """A `.params` file written in place: the verifying key and the five vector lengths first, then
    each vector's points filled through a writable view of a memory map (`vector`), so a 47 GiB key
    never exists in memory and its producer (a GPU) can copy its results straight into the file.

    Atomic like `write_params`: the points go to a hidden temporary next to the target, which
    `commit` flushes, fsyncs and renames; leaving the `with` block without `commit` (an error)
    removes it, so a reader never sees a partial file."""

    def __init__(self, path: str | os.PathLike, vk: VerifyingKey, counts: dict[str, int], *,
                 force_official_name: bool = False) -> None:
        check_output_name(path, force_official_name=force_official_name)
        missing = [name for name in VECTOR_NAMES if name not in counts]
        if missing:
            raise ValueError(f"vector lengths missing: {', '.join(missing)}")
        for name in VECTOR_NAMES:
            if not 0 <= counts[name] < 1 << 32:
                raise CuzkError(f"the {name} vector has {counts[name]} points; the format stores a u32 length")
        self.path = Path(path)
        self._tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        _remove_dead_writers_temporaries(self.path)
        header = vk_to_bytes(vk)
        self._views: dict[str, tuple[int, int, int]] = {}
        offset = len(header)
        for name in VECTOR_NAMES:
            width = G2B if name == "b_g2" else G1B
            self._views[name] = (offset + 4, counts[name], width)
            offset += 4 + counts[name] * width
        self.size = offset
        self._map: np.memmap | None = None
        # A memory map cannot report a full disk (a write fault kills the process), so the file's blocks
        # are claimed up front: a disk without room is an error naming the sizes, before any work.
        free = shutil.disk_usage(self.path.parent).free
        if free < self.size:
            raise CuzkError(f"{self.path.parent}: {self.size:,} bytes are needed for {self.path.name}, "
                            f"{free:,} are free")
        try:
            with open(self._tmp, "wb") as f:
                f.write(header)
                for name in VECTOR_NAMES:
                    start, count, _ = self._views[name]
                    f.seek(start - 4)
                    f.write(struct.pack(">I", count))
                f.flush()
                try:
                    os.posix_fallocate(f.fileno(), 0, self.size)
                except OSError as err:
                    if err.errno == errno.ENOSPC:
                        raise CuzkError(f"{self.path.parent}: no room for {self.size:,} bytes "
                                        f"({err.strerror})") from None
                    f.truncate(self.size)  # a file system without fallocate: the free-space check above stands
            self._map = np.memmap(self._tmp, dtype=np.uint8, mode="r+")
        except BaseException:
            self._tmp.unlink(missing_ok=True)
            raise

    def vector(self, name: str) -> np.ndarray:
        """The (count, point bytes) writable view of vector `name`'s points."""
        if self._map is None:
            raise CuzkError(f"{self.path}: the writer is closed")
        start, count, width = self._views[name]
        return self._map[start:start + count * width].reshape(count, width)

    def commit(self) -> None:
        if self._map is None:
            raise CuzkError(f"{self.path}: the writer is closed")
        self._map.flush()
        self._map = None  # drop the map before the rename (its pages are flushed)
        with open(self._tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(self._tmp, self.path)

    def close(self) -> None:
        self._map = None
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> ParamsFileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- reading ------------------------------------------------------------------------------------

class _Cursor:
    """Sequential reads over a buffer, with errors that say where and what."""

    def __init__(self, buf: np.ndarray | bytes, source: str) -> None:
        self.buf = buf
        self.pos = 0
        self.source = source

    def take(self, n: int, what: str) -> np.ndarray | bytes:
        end = self.pos + n
        if end > len(self.buf):
            raise FormatError(f"file ends at byte {len(self.buf)} while reading {what} "
                              f"({n} bytes needed)", source=self.source, offset=self.pos)
        out = self.buf[self.pos:end]
        self.pos = end
        return out

    def u32(self, what: str) -> int:
        return struct.unpack(">I", bytes(self.take(4, what)))[0]


def _read_vk(cur: _Cursor) -> VerifyingKey:
    def g1(name: str) -> object:
        off = cur.pos
        return encoding.g1_from_uncompressed(bytes(cur.take(G1B, name)), checked=True, allow_identity=False,
                                             field=name, offset=off)

    def g2(name: str) -> object:
        off = cur.pos
        return encoding.g2_from_uncompressed(bytes(cur.take(G2B, name)), checked=True, allow_identity=False,
                                             field=name, offset=off)

    try:
        alpha_g1, beta_g1 = g1("vk.alpha_g1"), g1("vk.beta_g1")
        beta_g2, gamma_g2 = g2("vk.beta_g2"), g2("vk.gamma_g2")
        delta_g1, delta_g2 = g1("vk.delta_g1"), g2("vk.delta_g2")
        n_ic = cur.u32("vk.ic length")
        if n_ic == 0:
            raise FormatError("IC must hold at least one point (for ONE)", source=cur.source,
                              offset=cur.pos - 4, field="vk.ic length")
        if cur.pos + n_ic * G1B > len(cur.buf):
            raise FormatError(f"IC declares {n_ic} points ({n_ic * G1B} bytes) but only "
                              f"{len(cur.buf) - cur.pos} bytes follow", source=cur.source,
                              offset=cur.pos - 4, field="vk.ic length")
        ic = [g1(f"vk.ic[{i}]") for i in range(n_ic)]
    except FormatError as err:
        if err.source is None:
            raise type(err)(err.what, source=cur.source, offset=err.offset, field=err.field) from None
        raise
    return VerifyingKey(alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2, ic)  # type: ignore[arg-type]


def vk_from_bytes(data: bytes, *, source: str = "<vk bytes>") -> VerifyingKey:
    cur = _Cursor(data, source)
    vk = _read_vk(cur)
    if cur.pos != len(data):
        raise FormatError(f"{len(data) - cur.pos} unexpected bytes after the verifying key", source=source,
                          offset=cur.pos)
    return vk


def _map(path: str | os.PathLike) -> np.ndarray:
    try:
        size = os.path.getsize(path)
        if size == 0:
            return np.zeros(0, np.uint8)
        return np.memmap(path, dtype=np.uint8, mode="r")
    except OSError as err:
        raise CuzkError(f"cannot read {path}: {err.strerror}") from None


def read_vk(path: str | os.PathLike) -> VerifyingKey:
    """A `.vk` file, or the verifying key at the head of a `.params` file."""
    buf = _map(path)
    cur = _Cursor(buf, str(path))
    vk = _read_vk(cur)
    return vk


@dataclass(frozen=True)
class VectorInfo:
    name: str
    count: int
    offset: int  #: byte offset of the first point
    point_bytes: int

    @property
    def nbytes(self) -> int:
        return self.count * self.point_bytes


@dataclass(frozen=True)
class ParamsLayout:
    path: str
    file_size: int
    num_ic: int
    vectors: tuple[VectorInfo, ...]  #: empty for a .vk file

    @property
    def is_vk_only(self) -> bool:
        return not self.vectors

    def vector(self, name: str) -> VectorInfo:
        return next(v for v in self.vectors if v.name == name)


def scan_layout(path: str | os.PathLike) -> ParamsLayout:
    """Lengths and offsets of every part of a .params or .vk file, reading only the length fields."""
    buf = _map(path)
    source = str(path)
    cur = _Cursor(buf, source)
    cur.take(VK_HEADER_BYTES - 4, "the verifying key's fixed points")
    n_ic = cur.u32("vk.ic length")
    if n_ic == 0:
        raise FormatError("IC must hold at least one point (for ONE)", source=source, offset=cur.pos - 4,
                          field="vk.ic length")
    cur.take(n_ic * G1B, f"vk.ic ({n_ic} points)")
    if cur.pos == len(buf):
        return ParamsLayout(source, len(buf), n_ic, ())
    vectors = []
    for name in VECTOR_NAMES:
        width = G2B if name == "b_g2" else G1B
        count = cur.u32(f"the {name} vector length")
        start = cur.pos
        if start + count * width > len(buf):
            raise FormatError(f"the {name} vector declares {count} points ({count * width} bytes) but only "
                              f"{len(buf) - start} bytes remain", source=source, offset=start - 4,
                              field=f"{name} length")
        cur.pos += count * width
        vectors.append(VectorInfo(name, count, start, width))
    if cur.pos != len(buf):
        raise FormatError(f"{len(buf) - cur.pos} unexpected bytes after the b_g2 vector", source=source,
                          offset=cur.pos)
    return ParamsLayout(source, len(buf), n_ic, tuple(vectors))


def read_params(path: str | os.PathLike) -> ProvingKey:
    """A `.params` file as a proving key whose vectors are views of a read-only memory map."""
    layout = scan_layout(path)
    if layout.is_vk_only:
        raise FormatError("this is a verifying key (.vk), not a parameter file: it has no H, L, A, B vectors",
                          source=str(path), offset=layout.file_size)
    buf = _map(path)
    vk = _read_vk(_Cursor(buf, str(path)))
    vecs = {}
    for info in layout.vectors:
        view = buf[info.offset:info.offset + info.nbytes].reshape(info.count, info.point_bytes)
        vecs[info.name] = (G2Bases if info.name == "b_g2" else G1Bases)(view)
    return ProvingKey(vk=vk, **vecs)


def check_params_points(path: str | os.PathLike, *, check_subgroup: bool = False) -> None:
    """Validate every point of a .params file (flags, canonical coordinates, on curve; optionally subgroup)."""
    layout = scan_layout(path)
    buf = _map(path)
    for info in layout.vectors:
        view = buf[info.offset:info.offset + info.nbytes].reshape(info.count, info.point_bytes)
        find = encoding.find_invalid_g2_rows if info.name == "b_g2" else encoding.find_invalid_g1_rows
        bad = find(view, check_subgroup=check_subgroup)
        if bad >= 0:
            off = info.offset + bad * info.point_bytes
            # Decode the single bad row checked, for the precise reason.
            decode = encoding.g2_from_uncompressed if info.name == "b_g2" else encoding.g1_from_uncompressed
            try:
                decode(bytes(view[bad]), checked=check_subgroup, allow_identity=True, field=f"{info.name}[{bad}]",
                       offset=off)
            except FormatError as err:
                raise type(err)(err.what, source=str(path), offset=off, field=f"{info.name}[{bad}]") from None
            raise FormatError("invalid point", source=str(path), offset=off, field=f"{info.name}[{bad}]")
