"""Key residency: the proving keys and compiled circuits a device holds, and their pinned host copies.

`DeviceKeys.load_key` plans a key within the device's memory (`cuzk.backends.cuda.plan`, with
`[gpus] memory_limit` a cap) and converts the five base vectors to device form once. In the plan's
resident mode all stay on the device. In its streaming mode (small cards) the vectors that do not
fit are kept in pinned host memory in device form and streamed per MSM batch
(`cuzk.backends.cuda.streaming`). A key the plan cannot fit is refused when it is loaded
(`DeviceTooSmallError`), and a proof that still meets an out-of-memory error is retried once with a
plan that holds less (`retry_smaller`, `DevicePlan.smaller`), counted in `oom_retries`.

A compiled circuit's matrices stay resident between proofs when the memory plan allows
(`load_compiled`), otherwise each proof uploads them one at a time, from pinned copies where the host
can spare the memory. Pinned pages cannot be swapped or reclaimed, so every pinned copy leaves the
host `HOST_PIN_SPARE` free, or is not made.
"""

from __future__ import annotations

import hashlib
import logging
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from cuzk.backends.cuda.msm import AFFINE_WORDS
from cuzk.backends.cuda.plan import (
    CONTEXT_BYTES,
    DevicePlan,
    DeviceTooSmallError,
    KeyShape,
    Products,
    format_gib,
    plan_beside,
    products_fit,
    resident_reserve,
)
from cuzk.backends.cuda.runtime import get_cupyx
from cuzk.backends.cuda.shared_pinned import SharedHostCopy, room_for
from cuzk.backends.cuda.shared_pinned import made as shared_made
from cuzk.backends.cuda.spmv import DeviceCompiled, largest_matrix_bytes, matrix_bytes
from cuzk.backends.cuda.staging import HostStaging, staging_bytes
from cuzk.groth16.formats.params_file import vk_to_bytes
from cuzk.groth16.keys import ProvingKey
from cuzk.r1cs.compiled import CompiledCircuit, CompiledMatrix

if TYPE_CHECKING:
    from cuzk.backends.cuda.gpu import Gpu

log = logging.getLogger("cuzk.backends.cuda")

QUERIES = (("h", "g1"), ("l", "g1"), ("a", "g1"), ("b_g1", "g1"), ("b_g2", "g2"))
GROUP = dict(QUERIES)

#: Host memory a streaming plan's pinned copies must leave free (pinned pages cannot be swapped or
#: reclaimed, so a host that pins its last gigabytes has its processes killed instead).
HOST_PIN_SPARE = 4 << 30


def host_available() -> int:
    """Host memory that may still be pinned: MemAvailable, bounded by the process's cgroup memory limits
    (a container's, a systemd unit's: pinned pages count against them), less `HOST_PIN_SPARE`."""
    import psutil

    from cuzk.config.host import memory_available

    limit = memory_available(psutil.virtual_memory().available)
    return max(0, (limit.available if limit is not None else 0) - HOST_PIN_SPARE)


def empty_pinned(gpu: Gpu, specs: list[tuple[tuple[int, ...], np.dtype]], what: str,
                 otherwise: str) -> list[np.ndarray] | None:
    """Empty pinned host arrays of these (shape, dtype)s for `what` on `gpu`; None, with a warning
    that says `otherwise` happens, when they would leave the host less than `HOST_PIN_SPARE`
    available or pinned memory cannot be had."""
    need = sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in specs)
    available = host_available()
    if need > available:
        log.warning("device %d: %s of %s would not leave this host %s of memory to spare (%s available): they "
                    "stay unpinned, and %s", gpu.device_id, format_gib(need), what, format_gib(HOST_PIN_SPARE),
                    format_gib(available + HOST_PIN_SPARE), otherwise)
        return None
    try:
        return [get_cupyx().empty_pinned(shape, dtype=dtype) for shape, dtype in specs]
    except (gpu.cp.cuda.runtime.CUDARuntimeError, MemoryError) as err:
        log.warning("device %d: no pinned host memory for %s of %s (%s): %s", gpu.device_id, format_gib(need),
                    what, err, otherwise)
        return None


@dataclass
class DeviceKey:
    """A proving key's bases in device form (None for a vector that is streamed per MSM), the
    streamed ones' pinned host copies in device form (None: converted from the key's bytes per
    batch, when pinned memory could not be had), the key's memory plan, and under a streaming plan the
    pinned buffer its proofs copy their inputs into before they take the device (`Lane.prestage`)."""

    plan: DevicePlan
    shape: KeyShape
    bases: dict[str, Any] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)
    staging: HostStaging | None = None
    #: The host copies in `host` that this host's device processes share (`shared_pinned`).
    shared: list[SharedHostCopy] = field(default_factory=list)

    def nbytes(self) -> int:
        return sum(int(b.nbytes) for b in self.bases.values() if b is not None)

    def host_bytes(self) -> int:
        return sum(int(b.nbytes) for b in self.host.values() if b is not None)


def compiled_key(compiled: CompiledCircuit) -> str:
    """A compiled circuit's name in `DeviceKeys.compiled` (it holds arrays: it cannot be a dict key)."""
    return compiled.fingerprint or compiled.compute_fingerprint()


class DeviceKeys:
    """The keys (`loaded`) and compiled circuits (`compiled`, by `compiled_key`) resident on `gpu`.
    They change with the device held (`lock`, the device lock, which proofs take too)."""

    def __init__(self, gpu: Gpu, lock: Any) -> None:
        self.gpu, self.lock = gpu, lock
        self.loaded: weakref.WeakKeyDictionary[ProvingKey, DeviceKey] = weakref.WeakKeyDictionary()
        self.compiled: dict[str, DeviceCompiled] = {}
        self.oom_retries = 0  # proofs retried with a smaller plan after an out-of-memory error

    def plan_key(self, pk: ProvingKey, shape: KeyShape, products: Products | None = None) -> DevicePlan:
        """The key's plan within what the other keys leave (`plan.plan_beside`). `products`: the
        compiled circuit its proofs compute, whose a, b, c the plan places (`plan_device`)."""
        memory = self.gpu.memory
        others = [(dk.nbytes(), dk.plan.reserve) for other, dk in self.loaded.items() if other is not pk]
        held = sum(nbytes for nbytes, _ in others)
        limit_note = (f"memory_limit = {format_gib(memory.limit)}" if memory.limit is not None
                      else f"{format_gib(memory.budget() + CONTEXT_BYTES)} free")
        try:
            plan = plan_beside(shape, memory.budget(), others, products)
        except DeviceTooSmallError as err:
            held_note = f" ({format_gib(held)} held by other keys)" if held else ""
            raise DeviceTooSmallError(f"{err} with {limit_note}{held_note} (a key of {format_gib(shape.key_bytes)}, "
                                      f"domain 2^{shape.domain.bit_length() - 1})") from None
        return plan

    def load_key(self, pk: ProvingKey, device_bases: Mapping[str, Any] | None = None,
                 plan: DevicePlan | None = None, compiled: CompiledCircuit | None = None) -> None:
        """`CudaBackend.load_key`."""
        given = dict(device_bases or {})
        unknown = sorted(set(given) - set(GROUP))
        if unknown:
            raise ValueError(f"unknown query names in device_bases: {', '.join(unknown)}")
        for name, group in QUERIES:
            arr = given.get(name)
            if arr is not None and tuple(arr.shape) != (len(getattr(pk, name)), AFFINE_WORDS[group]):
                raise ValueError(f"device bases for {name} must have shape ({len(getattr(pk, name))}, "
                                 f"{AFFINE_WORDS[group]}), got {tuple(arr.shape)}")
        gpu = self.gpu
        with self.lock, gpu.device:
            if pk in self.loaded:
                return
            gpu.memory.release_cached()
            shape = KeyShape.of(pk)
            products = None if compiled is None else Products(
                compiled.num_constraints, largest_matrix_bytes(compiled), matrix_bytes(compiled))
            plan = plan if plan is not None else self.plan_key(pk, shape, products)
            dk = DeviceKey(plan, shape)
            key_id = hashlib.sha256(vk_to_bytes(pk.vk)).hexdigest()[:20]
            try:
                for name, group in QUERIES:
                    raw, ready = getattr(pk, name).raw, given.get(name)
                    on_host = isinstance(ready, np.ndarray)
                    if name in plan.resident:
                        dk.bases[name] = (gpu.msm.upload_bases(group, raw) if ready is None
                                          else gpu.cp.asarray(ready) if on_host else ready)
                    else:
                        dk.bases[name] = None
                        dk.host[name] = ready if on_host else pinned_bases(gpu, group, raw, ready, dk,
                                                                           f"{key_id}-{name}")
                gpu.cp.cuda.Device().synchronize()
            except BaseException:
                # A load that failed half way leaves the host copies it joined (the other device
                # processes may hold them still).
                dk.host.clear()
                for copy in dk.shared:
                    copy.release()
                raise
            self.loaded[pk] = dk
            if plan.mode == "streaming":
                where = "" if products is None else (
                    f", a, b, c on the {'device' if products_fit(plan, shape, products.largest_matrix) else 'host'}")
                log.info("device %d: key of domain 2^%d planned for streaming within %s: resident %s, streamed %s "
                         "(%s a proof), MSM batches of 2^%d, working reserve %s%s", gpu.device_id,
                         shape.domain.bit_length() - 1, format_gib(plan.budget), ", ".join(plan.resident) or "none",
                         ", ".join(plan.streamed), format_gib(plan.streamed_bytes(shape)),
                         (plan.batch or 1).bit_length() - 1, format_gib(plan.reserve), where)

    def unload_key(self, pk: ProvingKey) -> None:
        with self.lock, self.gpu.device:
            dk = self.loaded.pop(pk, None)
            # A compiled circuit's residency was planned beside this key: it goes with it (and its pinned
            # matrices with it), and the next proof prepares it again beside what is loaded then.
            for key in [k for k, c in self.compiled.items() if c.owner is pk]:
                del self.compiled[key]
            if dk is not None:
                dk.bases.clear()
                dk.host.clear()
                for copy in dk.shared:
                    copy.release()
                self.gpu.memory.release_cached()

    def largest_reserve(self) -> int:
        """The largest working reserve of the loaded keys' plans."""
        while True:
            try:
                return max((dk.plan.reserve for dk in list(self.loaded.values())), default=0)
            except RuntimeError:  # a key was loaded meanwhile (the keys change under `lock`, not the caller's)
                continue

    def retry_smaller(self, pk: ProvingKey, exc: BaseException) -> bool:
        """After an out-of-memory error: make the key's plan one that holds less at once (kept for
        later proofs too), counted and logged; False when there is none."""
        with self.lock:
            dk = self.loaded.get(pk)
            smaller = dk.plan.smaller(dk.shape) if dk is not None else None
            if dk is None or smaller is None:
                return False
            log.warning("device %d: out of device memory in a proof (%s); retrying it with MSM batches of 2^%d and "
                        "tree groups of %d MiB (was %s, %d MiB)", self.gpu.device_id, exc,
                        (smaller.batch or 1).bit_length() - 1, smaller.tree_bytes >> 20,
                        f"2^{dk.plan.batch.bit_length() - 1}" if dk.plan.batch else "whole MSMs",
                        dk.plan.tree_bytes >> 20)
            dk.plan = smaller
            self.oom_retries += 1
            self.gpu.memory.release_cached()
        return True

    def load_compiled(self, compiled: CompiledCircuit, pk: ProvingKey | None,
                      upload_now: Callable[..., Any]) -> DeviceCompiled:
        """`CudaBackend.load_compiled`: the circuit as prepared (idempotent)."""
        key = compiled_key(compiled)
        gpu = self.gpu
        with self.lock, gpu.device:
            prepared = self.compiled.get(key)
            if prepared is None:
                rows, nvars = compiled.num_constraints, compiled.num_variables
                dk = self.loaded.get(pk) if pk is not None else None
                if dk is not None and dk.plan.mode == "streaming":
                    # Beside a streaming plan's working memory, or the products' own (witness, a, b, c).
                    reserve = max(dk.plan.reserve, 32 * (3 * pk.domain_size + nvars) + largest_matrix_bytes(compiled))
                else:
                    reserve = resident_reserve(KeyShape.of(pk)) if pk is not None else 32 * (3 * rows + nvars)
                gpu.memory.release_cached()
                resident = gpu.memory.fits(matrix_bytes(compiled), reserve)
                prepared = gpu.spmv.prepare(compiled, resident, upload_now)
                gpu.cp.cuda.Device().synchronize()  # the long-row lists were made on the default stream
                # Pinned copies only where proofs will upload them: a plan whose products do not fit
                # computes them on the host, from the compiled file.
                on_device = dk is None or products_fit(dk.plan, dk.shape, largest_matrix_bytes(compiled))
                if not resident and on_device:
                    prepared.host = [pinned_matrix(gpu, m, name) for m, name in
                                     zip((compiled.a, compiled.b, compiled.c), "ABC", strict=True)]
                if dk is not None and dk.plan.mode == "streaming":
                    host_staging(gpu, dk, compiled, on_device)
                prepared.owner = pk
                self.compiled[key] = prepared
            return prepared

    def unload_compiled(self, compiled: CompiledCircuit) -> None:
        with self.lock, self.gpu.device:
            if self.compiled.pop(compiled_key(compiled), None) is not None:
                self.gpu.memory.release_cached()

    def status(self, names: Mapping[ProvingKey, str] | None = None) -> list[dict[str, Any]]:
        """Per key, `CudaBackend.memory_plan`'s entry."""
        keys = []
        for pk, dk in list(self.loaded.items()):
            p = dk.plan
            owned = [c for c in list(self.compiled.values()) if c.owner is pk]
            matrices = sum(c.host_bytes for c in owned)
            staging = dk.staging
            # Where its compiled circuit's a, b, c are computed (prove_compiled's choice); None: none loaded.
            products = None if not owned else "device" if all(
                products_fit(p, dk.shape, largest_matrix_bytes(c.compiled)) for c in owned) else "host"
            keys.append({"circuit_id": (names or {}).get(pk, ""), "mode": p.mode, "resident": list(p.resident),
                         "streamed": list(p.streamed),
                         "resident_bytes": p.resident_bytes(dk.shape), "streamed_bytes": p.streamed_bytes(dk.shape),
                         "host_pinned_bytes": dk.host_bytes() + matrices + (staging.nbytes if staging else 0),
                         "host_pinned_compiled_bytes": matrices,
                         # Of the key's pinned bases, those this host's device processes share (counted once).
                         "host_pinned_shared_bytes": sum(c.nbytes for c in dk.shared),
                         "host_pinned_staging_bytes": staging.nbytes if staging else 0,
                         # Host products read the compiled file's matrices on every proof: pages
                         # the host must keep beside the pinned memory, or read again from disk.
                         "host_mapped_compiled_bytes": sum(matrix_bytes(c.compiled) for c in owned)
                         if products == "host" else 0,
                         "inputs_prestaged": staging.fills if staging else 0,
                         "inputs_prestage_missed": staging.missed if staging else 0,
                         "working_reserve": p.reserve, "products": products,
                         "msm_batch": p.batch, "domain": dk.shape.domain})
        return keys


def pinned_bases(gpu: Gpu, group: str, raw: np.ndarray, device: Any = None, dk: DeviceKey | None = None,
                 shared: str | None = None) -> Any:
    """A streamed vector's bases in device form in pinned host memory (from `device` when given,
    else converted from the key's bytes chunk by chunk on the device); None when pinned memory
    cannot be had, so each batch converts from `raw` instead. With `shared` (the vector's name on
    this host) the copy is the one this host's device processes share (`shared_pinned`), kept in
    `dk.shared`; a copy of its own where that cannot be."""
    n = raw.shape[0]
    shape, dtype = (n, AFFINE_WORDS[group]), np.dtype(np.uint32)

    def fill(host: np.ndarray) -> None:
        step = 1 << 22
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            dev = device[lo:hi] if device is not None else gpu.msm.upload_bases(group, raw[lo:hi])
            dev.get(out=host[lo:hi])
            del dev

    nbytes = n * AFFINE_WORDS[group] * 4
    if (shared is not None and dk is not None and room_for(shared, nbytes)
            and (shared_made(shared) or nbytes <= host_available())):  # joining pins nothing more
        runtime = gpu.cp.cuda.runtime
        try:
            copy = SharedHostCopy.open(shared, shape, dtype, fill,
                                       lambda ptr, size: runtime.hostRegister(ptr, size, 0),
                                       runtime.hostUnregister)
            dk.shared.append(copy)
            return copy.array
        except (OSError, runtime.CUDARuntimeError) as err:
            log.warning("device %d: no shared host copy of the %s bases (%s): a copy of its own instead",
                        gpu.device_id, group, err)
    pinned = empty_pinned(gpu, [(shape, dtype)], f"{group} bases", "each proof converts them from the key's bytes")
    if pinned is None:
        return None
    fill(pinned[0])
    return pinned[0]


def host_staging(gpu: Gpu, dk: DeviceKey, compiled: CompiledCircuit, on_device: bool) -> None:
    """Give a streaming key the pinned buffer its proofs of `compiled` copy their inputs into
    before they take the device (`cuzk.backends.cuda.staging`): the witness when the products run
    on the device (`on_device`), else the a, b, c the host computed. Kept when the key has one
    large enough; none when it cannot be pinned (proofs then stage with the device held)."""
    nin, naux, rows = compiled.num_inputs, compiled.num_aux, compiled.num_constraints
    sizes = [32 * nin, 32 * naux, naux, naux, nin] if on_device else [32 * rows] * 3
    nbytes = staging_bytes(sizes)
    if dk.staging is not None and dk.staging.nbytes >= nbytes:
        return
    what = "witness" if on_device else "a, b, c"
    arrays = empty_pinned(gpu, [((nbytes,), np.dtype(np.uint8))], f"{what} staging",
                          f"each proof copies its {what} with the device held")
    if arrays is not None:
        dk.staging = HostStaging(arrays[0])


def pinned_matrix(gpu: Gpu, mat: CompiledMatrix, name: str) -> CompiledMatrix | None:
    """A copy of a matrix that each proof uploads, in pinned host memory; None when it cannot be
    pinned (`empty_pinned`), so proofs upload it from the compiled file."""
    parts = (mat.row_ptr, mat.cols, mat.coeff_idx)
    arrays = empty_pinned(gpu, [(a.shape, a.dtype) for a in parts], f"matrix {name}",
                          "each proof uploads it from the compiled file")
    if arrays is None:
        return None
    for dst, src in zip(arrays, parts, strict=True):
        np.copyto(dst, src)
    return CompiledMatrix(*arrays)
