"""SHA-256 witnesses on the device (driving kernels/sha256_witness.cu).

The aux values `cuzk.gadgets.sha256` allocates, for N messages of one configuration, the same as
`cuzk.witness_gen.sha256.Sha256WitnessPlan.generate`'s bits, written as field elements (eight u32
words, 0 or 1: the prover's device aux layout) straight into a device vector: instance i's aux go
to rows dst[i], dst[i] + 1, ..., so a circuit's generator can place each hash where the circuit
allocated it. The plan's tables go up once per plan.

    gen = DeviceSha256Witness(get_module(0, "witness"))
    digest = gen.generate_into(plan, message_bits, aux_vector, dst)    # device arrays
    aux, digest = gen.generate(plan, message_bits)                     # (N, num_aux, 8) u32
    for launch in gen.launches(deferred.sha256_jobs, aux_vector): launch()   # deferred gadgets

`cuzk.backends.cuda.deferred` uses `launches` to finish an aux vector whose generator left its
SHA-256 gadgets to the device (`cuzk.witness_gen.deferred`).
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from cuzk.witness_gen.deferred import Sha256Job
from cuzk.witness_gen.sha256 import Sha256DeviceTables, Sha256WitnessPlan

__all__ = ["DeviceSha256Witness"]

#: Instances per block (one warp each) and the kernel's shared memory: 896 registers + 8 state words.
_WARPS = 4
_SMEM = _WARPS * (896 + 8) * 8


class DeviceSha256Witness:
    """SHA-256 witness generation on one device (a `KernelModule` of the "witness" unit)."""

    def __init__(self, kernels: Any) -> None:
        self.kernels = kernels
        self.xp = kernels.xp
        self._tables: weakref.WeakKeyDictionary[Sha256WitnessPlan, Sha256DeviceTables] = weakref.WeakKeyDictionary()
        self._tables_lock = threading.Lock()  # two provers' staging threads may complete witnesses at once

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

    def launches(self, jobs: list[Sha256Job], out: Any) -> list[Callable[[], Any]]:
        """The launches writing the aux of `jobs` (a `DeferredWitness`'s SHA-256 gadgets) into `out`:
        one per plan (a PoRep partition's 30 tree_d levels share one), for the caller to spread over
        streams (`cuzk.backends.cuda.deferred`): a label launch holds only 18 instances, so launches in
        a row would idle the GPU."""
        groups: dict[int, list[Sha256Job]] = {}
        for job in jobs:
            groups.setdefault(id(job.plan), []).append(job)
        return [functools.partial(self.generate_into, group[0].plan, np.concatenate([j.message_bits for j in group]),
                                  out, np.concatenate([j.rows for j in group])) for group in groups.values()]
