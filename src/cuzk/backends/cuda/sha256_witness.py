"""SHA-256 witnesses on the device (driving kernels/sha256_witness.cu).

The aux values `cuzk.gadgets.sha256` allocates, for N messages of one configuration, the same as
`cuzk.witness_gen.sha256.Sha256WitnessPlan.generate`'s bits, written as field elements (eight u32
words, 0 or 1: the prover's device aux layout) straight into a device vector: instance i's aux go
to rows dst[i], dst[i] + 1, ..., so a circuit's generator can place each hash where the circuit
allocated it. The plan's tables go up once per plan.

    gen = DeviceSha256Witness(get_module(0, "witness"))
    digest = gen.generate_into(plan, message_bits, aux_vector, dst)    # device arrays
    aux, digest = gen.generate(plan, message_bits)                     # (N, num_aux, 8) u32
    gen.complete(deferred, host_aux, aux_vector)   # a generator's deferred SHA-256 gadgets (below)

`complete` finishes an aux vector whose generator left its SHA-256 gadgets to the device
(`cuzk.witness_gen.deferred`): only the rows the host wrote go up (~2% of a PoRep partition), the
rest is written here.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

from cuzk.witness_gen.deferred import DeferredSha256, Sha256Job
from cuzk.witness_gen.sha256 import Sha256DeviceTables, Sha256WitnessPlan

__all__ = ["DeviceSha256Witness"]

#: Instances per block (one warp each) and the kernel's shared memory: 896 registers + 8 state words.
_WARPS = 4
_SMEM = _WARPS * (896 + 8) * 8
#: Streams `complete` spreads its launches over (a PoRep partition has 12 plans: 11 layers, tree_d).
_SIDE_STREAMS = 16


class DeviceSha256Witness:
    """SHA-256 witness generation on one device (a `KernelModule` of the "witness" unit)."""

    def __init__(self, kernels: Any) -> None:
        self.kernels = kernels
        self.xp = kernels.xp
        self._tables: weakref.WeakKeyDictionary[Sha256WitnessPlan, Sha256DeviceTables] = weakref.WeakKeyDictionary()
        self._tables_lock = threading.Lock()  # two provers' staging threads may complete witnesses at once
        self._streams: list[Any] = []  # `complete`'s side streams, made on first use

    def _device_tables(self, plan: Sha256WitnessPlan) -> Sha256DeviceTables:
        with self._tables_lock:
            tables = self._tables.get(plan)
            if tables is None:
                host = plan.device_tables()
                tables = Sha256DeviceTables(*(self.kernels.to_device(np.ascontiguousarray(a)) for a in host))
                # Complete before any stream (another prover's) reads them: a pageable upload may not be.
                self.xp.cuda.get_current_stream().synchronize()
                self._tables[plan] = tables
            return tables

    def generate_into(self, plan: Sha256WitnessPlan, message_bits: np.ndarray, out: Any, dst: np.ndarray) -> Any:
        """Write the aux of N messages ((N, message_bits) bool/0-1 integers, stream order) into `out`
        (a C-contiguous (rows, 8) uint32 device array) at rows dst[i] .. dst[i] + plan.num_aux - 1;
        returns the digests, (N, 8) uint32 on the device. Refuses what `generate` refuses, and
        destinations outside `out`."""
        words = plan.message_words(message_bits)
        n = words.shape[0]
        dst = np.ascontiguousarray(dst, dtype=np.int64)
        if dst.shape != (n,):
            raise ValueError(f"dst must hold one row index per message ({n}), got shape {dst.shape}")
        if out.dtype != self.xp.uint32 or out.ndim != 2 or out.shape[1] != 8 or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous (rows, 8) uint32 array, got {out.dtype} {out.shape}")
        if n and (int(dst.min()) < 0 or int(dst.max()) + plan.num_aux > out.shape[0]):
            raise ValueError(f"destinations reach outside out: rows {int(dst.min())}..{int(dst.max()) + plan.num_aux} "
                             f"of {out.shape[0]}")
        digest = self.xp.empty((n, 8), dtype=self.xp.uint32)
        if n:
            t = self._device_tables(plan)
            self.kernels.launch("sha256_witness", -(-n // _WARPS), 32 * _WARPS,
                                (self.kernels.to_device(words), n, plan.num_blocks, t.block_table, t.code_start,
                                 t.code_len, t.codes, t.aux_start, self.kernels.to_device(dst.view(np.uint64)), out,
                                 digest), shared_mem=_SMEM)
        return digest

    def generate(self, plan: Sha256WitnessPlan, message_bits: np.ndarray) -> tuple[Any, Any]:
        """The aux of N messages as an (N, plan.num_aux, 8) uint32 device array (instance after
        instance) and their digests (N, 8) uint32."""
        n = np.asarray(message_bits).shape[0]
        aux = self.xp.empty((n * plan.num_aux, 8), dtype=self.xp.uint32)
        digest = self.generate_into(plan, message_bits, aux, np.arange(n, dtype=np.int64) * plan.num_aux)
        return aux.reshape(n, plan.num_aux, 8), digest

    def complete(self, deferred: DeferredSha256, aux: np.ndarray, out: Any) -> None:
        """`out` (a (num_aux, 8) uint32 device array) := the aux vector `aux` ((num_aux, 4) uint64 on
        the host, its SHA-256 gadgets' rows unwritten) with `deferred`'s gadgets completed: the host's
        rows (a PoRep-32GiB partition: 2% of them, in ~740 ranges) are gathered and uploaded in one
        copy, then moved into place by device-to-device copies; the gadgets' bits are written by the
        kernel. Queued on the current stream."""
        num_aux = aux.shape[0]
        if aux.ndim != 2 or aux.shape[1] != 4 or aux.dtype != np.uint64:
            raise ValueError(f"aux must be (num_aux, 4) uint64 limbs, got {aux.dtype} {aux.shape}")
        if tuple(out.shape) != (num_aux, 8) or out.dtype != self.xp.uint32 or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous ({num_aux}, 8) uint32 array, got {out.dtype} "
                             f"{tuple(out.shape)}")
        starts, lengths = deferred.host_ranges(num_aux)
        if int(lengths.sum()):
            # One upload: hundreds of small pageable copies cost ~0.2 ms each.
            rows = self.kernels.to_device(np.concatenate(
                [aux[s:s + n] for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)]))
            stream = self.xp.cuda.get_current_stream()
            offset = 0
            for start, length in zip(starts.tolist(), lengths.tolist(), strict=True):
                (out.data + start * 32).copy_from_device_async(rows.data + offset * 32, length * 32, stream)
                offset += length
            del rows  # its memory returns to this stream's pool: a later use is ordered after the copies
        # One launch per plan (a PoRep partition's 30 tree_d levels share one), each on a side stream
        # of its own: a label launch holds only 18 instances, so launches in a row would idle the GPU.
        groups: dict[int, list[Sha256Job]] = {}
        for job in deferred.jobs:
            groups.setdefault(id(job.plan), []).append(job)
        main = self.xp.cuda.get_current_stream()
        ready = main.record()
        done = []
        for k, jobs in enumerate(groups.values()):
            side = self._side_streams()[k % _SIDE_STREAMS]
            side.wait_event(ready)
            with side:
                self.generate_into(jobs[0].plan, np.concatenate([j.message_bits for j in jobs]), out,
                                   np.concatenate([j.rows for j in jobs]))
            done.append(side.record())
        for event in done:
            main.wait_event(event)

    def _side_streams(self) -> list[Any]:
        with self._tables_lock:
            if not self._streams:
                self._streams = [self.xp.cuda.Stream(non_blocking=True) for _ in range(_SIDE_STREAMS)]
            return self._streams
