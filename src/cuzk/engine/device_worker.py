"""The device worker (`DeviceWorker`), and the device process that runs one (the local executor
spawns it; a Ray executor's actor runs one too, `cuzk.engine.ray_executor`).

A device worker owns a `ProverBackend` (CPU or CUDA: the daemon process itself never imports a GPU
library) and the parameter sets made resident for it. In a device process, one thread per prover
worker (`gpus.gpu_workers_per_device`, plus one lane that only CRITICAL partitions use, so that
CRITICAL work never waits for a worker busy with a lower priority) serves its own pipe; the workers share one
device lock (`cuzk.backends.device_lock.PriorityLock`: served by the partition's priority, FIFO
within a level) that is held only around `backend.prove` (shared-memory mapping, proof encoding
and verification happen outside it, so a second worker prepares while the first computes). The
CUDA backend locks the device itself, around its device phase only, with the same kind of lock and
the priority each item carries (`priority_scope`), so there a worker's staging of its inputs
overlaps the other's kernels too. With no GPU, one CPU "device" runs the CPU backend with the same
structure.

Parameter sets (`load`/`unload` on the control pipe) follow the SRS tiers: `read_params` maps the
file (warm), `backend.load_key` makes it resident (hot), dropping the key returns to cold.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from cuzk.backends.device_lock import DEFAULT_PRIORITY, PriorityLock, priority_scope
from cuzk.engine.compiled_store import load_verified
from cuzk.engine.messages import ItemResult, ProveItem
from cuzk.engine.procs import set_thread_env
from cuzk.engine.synthesis import CompiledWitness, SharedAssignment

if TYPE_CHECKING:
    from cuzk.backends.base import ProverBackend

log = logging.getLogger("cuzk.engine.device_worker")
#: The interpreter switch interval of a device process. Its threads (the lanes, their staging and
#: upload threads, B's G2 MSM beside the G1 ones) hand the GIL to each other around every kernel
#: sync; at the default 5 ms a CRITICAL lane's short device phase waits out another lane's host
#: work at each of them. A shorter interval left the longest device phase measured as it was (0.1 ms:
#: benchmarks/results/cuda-witness-upload-h200-2026-12-01.jsonl); the daemon process uses the same.
DEVICE_SWITCH_INTERVAL_S = 0.0005


def set_device_switch_interval() -> None:
    sys.setswitchinterval(DEVICE_SWITCH_INTERVAL_S)


def make_backend(kind: str, ordinal: int, memory_limit: int | None = None, memory_share: int = 1) -> ProverBackend:
    """The backend object for a device (device-process side); `memory_limit`: `[gpus] memory_limit`
    for this device in bytes (None: "auto"); `memory_share`: logical devices on this GPU, each of
    which plans with that share of its memory when the limit is "auto"."""
    if kind == "cpu":
        from cuzk.backends import CpuBackend

        return CpuBackend()
    from cuzk.backends.cuda import CudaBackend

    return CudaBackend(ordinal, memory_limit=memory_limit, memory_share=memory_share)


def _limit_prover_threads(threads: int) -> None:
    """Size the CPU MSM pool (py-arkworks chunks) to gpus.gpu_threads; numba reads NUMBA_NUM_THREADS."""
    if threads <= 0:
        return
    from cuzk.curve import msm

    msm._POOL = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="cuzk-msm")


# -- the device worker ----------------------------------------------------------------------------

class DeviceWorker:
    """One device's prover: its backend, the parameter sets read and made resident for it, and the
    device lock its lanes share. The process that owns a device holds one: a local device process
    (`device_worker_main`) or a Ray executor's actor (`cuzk.engine.ray_executor.DeviceActor`). Each
    lane calls `prove` from a thread of its own; `load`, `unload` and `info` come from the control side."""

    @classmethod
    def start(cls, settings: dict[str, Any]) -> DeviceWorker:
        """The worker for the device `settings` name ("kind", "ordinal", "threads", optional
        "memory_limit" and "memory_share"), its backend made and warmed up (`_warm_up`): the first
        proof pays for no kernel load. Call after `set_thread_env`, in the process that owns the device."""
        _limit_prover_threads(settings["threads"])
        backend = make_backend(settings["kind"], settings["ordinal"], settings.get("memory_limit"),
                               settings.get("memory_share", 1))
        _warm_up(backend)
        return cls(backend)

    def __init__(self, backend: ProverBackend) -> None:
        self.backend = backend
        self.keys: dict[str, Any] = {}
        self.hot: set[str] = set()
        self.verifying_keys: dict[str, Any] = {}
        self.keys_lock = threading.Lock()
        self.device_lock = PriorityLock()

    def load(self, circuit_id: str, path: str, hot: bool, compiled_path: str | None = None) -> dict[str, Any]:
        """Read a key (and with `hot`, make it resident on the device). `compiled_path`: the circuit's
        compiled file when the prover computes the products, verified before the key is planned (a
        device backend's plan places its a, b, c) and made resident with it (`_make_compiled_resident`),
        so the first proof does not pay for it."""
        from cuzk.groth16.formats.params_file import read_params
        from cuzk.groth16.verifier import prepare_verifying_key

        start = time.monotonic()
        with self.keys_lock:
            pk = self.keys.get(circuit_id)
        if pk is None:
            pk = read_params(path)
            pvk = prepare_verifying_key(pk.vk)
            with self.keys_lock:
                self.keys[circuit_id] = pk
                self.verifying_keys[circuit_id] = pvk
        compiled, loaded = (self._load_compiled_verified(circuit_id, compiled_path)
                            if hot and compiled_path is not None else (None, None))
        if hot and circuit_id not in self.hot:
            try:
                self.backend.load_key(pk, compiled=compiled)  # a device backend's plan places the products
            except Exception as err:
                if type(err).__name__ == "DeviceTooSmallError":  # the CUDA backend's, named for the operator
                    with self.keys_lock:  # this device proves none of its partitions: no host copy either
                        self.keys.pop(circuit_id, None)
                        self.verifying_keys.pop(circuit_id, None)
                    raise type(err)(f"{circuit_id} {err}") from None
                raise
            with self.keys_lock:
                self.hot.add(circuit_id)
        reply: dict[str, Any] = {}
        if loaded is not None:
            reply["compiled"] = loaded if compiled is None else self._make_compiled_resident(compiled, pk, loaded)
        if hot:
            reply.update(self._host_bytes(circuit_id, pk))
        else:
            reply["pinned_bytes"] = reply["pinned_key_bytes"] = 0
        reply["load_s"] = time.monotonic() - start
        return reply

    def _host_bytes(self, circuit_id: str, pk: Any) -> dict[str, int]:
        """Host memory a hot key takes beside the device, which the daemon's budget must hold: the
        bytes the backend pinned for it (a streaming plan's copies of its streamed bases, of its
        compiled circuit's matrices that proofs upload, and its proofs' input staging) with the
        compiled file's matrix pages that host products read on every proof, the part of them that
        copies the key's bases, and the bytes of the key's file that proofs still read (streamed
        bases left unpinned). A backend without a device memory plan says nothing of the file: the
        daemon then counts all of it."""
        plan = self.backend.memory_plan({pk: circuit_id})
        if plan is None:
            return {"pinned_bytes": 0, "pinned_key_bytes": 0, "products_on_host": False}
        keys = [k for k in plan["keys"] if k["circuit_id"] == circuit_id]
        total = sum(k["host_pinned_bytes"] + k.get("host_mapped_compiled_bytes", 0) for k in keys)
        other = sum(k.get("host_pinned_compiled_bytes", 0) + k.get("host_pinned_staging_bytes", 0)
                    + k.get("host_mapped_compiled_bytes", 0) for k in keys)
        bases = total - other
        streamed = sum(k.get("streamed_bytes", 0) for k in keys)
        shared = sum(k.get("host_pinned_shared_bytes", 0) for k in keys)
        return {"pinned_bytes": total, "pinned_key_bytes": bases, "pinned_shared_bytes": shared,
                "file_read_bytes": max(0, streamed - bases),
                "products_on_host": any(k.get("products") == "host" for k in keys)}

    @staticmethod
    def _load_compiled_verified(circuit_id: str, compiled_path: str) -> tuple[Any, dict[str, Any]]:
        """Map and verify the compiled circuit (a 130M-row circuit: 6.1 GB of digests, ~15 s): the
        circuit, or None with what happened, for the daemon's log. A file found unusable fails nothing
        here: its jobs then find it so too, as they would without this."""
        start = time.monotonic()
        compiled = load_verified(compiled_path, circuit_id)  # cached in this process once verified
        if compiled is None:
            return None, {"usable": False, "error": "see the warning above", "seconds": time.monotonic() - start}
        return compiled, {"usable": True, "seconds": time.monotonic() - start}

    def _make_compiled_resident(self, compiled: Any, pk: Any, loaded: dict[str, Any]) -> dict[str, Any]:
        """With a device backend, make the mapped circuit's matrices resident beside the loaded key."""
        start = time.monotonic()
        try:
            resident = self.backend.load_compiled(compiled, pk)
        except Exception as err:  # the key is hot all the same; a proof retries the upload (and reports)
            return {"usable": False, "error": f"{type(err).__name__}: {err}",
                    "seconds": loaded["seconds"] + time.monotonic() - start}
        return {"usable": True, "resident": None if resident is None else list(resident),
                "seconds": loaded["seconds"] + time.monotonic() - start}

    def unload(self, circuit_id: str, tier: str) -> None:
        with self.keys_lock:
            pk = self.keys.get(circuit_id)
            was_hot = circuit_id in self.hot
            self.hot.discard(circuit_id)
            if tier == "cold":
                self.keys.pop(circuit_id, None)
                self.verifying_keys.pop(circuit_id, None)
        if pk is not None and was_hot:
            self.backend.unload_key(pk)

    def info(self) -> list[dict[str, Any]]:
        """What the device is (name, kind, memory; with a pool of its own the pool's used and held
        bytes and the driver's used), the keys it holds and its backend's memory plan."""
        info = [{"name": d.name, "kind": d.kind, "memory_total": d.memory_total or 0, "memory_free": d.memory_free or 0,
                 "pool_used": d.pool_used, "pool_held": d.pool_held, "driver_used": d.driver_used}
                for d in self.backend.devices()]
        if info:
            with self.keys_lock:
                names = {pk: cid for cid, pk in self.keys.items()}
                # The key copies this device holds: hot (resident) or warm (mapped only).
                info[0]["keys"] = [{"circuit_id": cid, "tier": "hot" if cid in self.hot else "warm"}
                                   for cid in sorted(self.keys)]
            plan = self.backend.memory_plan(names)
            if plan is not None:
                info[0]["memory_plan"] = plan
        return info

    def prove(self, items: list[ProveItem], witnesses: list[SharedAssignment], verify: bool) -> list[ItemResult]:
        """Prove items, each with its synthesized witness, back to back under one hold of the device
        lock (a batch shares the lock), at the items' priority; between items a waiter of higher
        priority goes first (the lock's `yield_to_waiters`), so a batch delays a CRITICAL partition
        by one partition at most."""
        from cuzk.groth16.verifier import verify_proof

        attached, results = [], []
        try:
            for item, witness in zip(items, witnesses, strict=True):
                with self.keys_lock:
                    pk = self.keys.get(item.circuit_id)
                    hot = item.circuit_id in self.hot
                if pk is None or not hot:
                    # The engine hands a device only partitions of keys it made hot there, so the
                    # device lost one (a restart whose reload failed, say): fatal, so that the
                    # partition goes to the next free device and this one is restarted with its keys.
                    results.append(ItemResult(False, error=f"parameters for {item.circuit_id} are not resident on "
                                                          "this device", fatal=True))
                    attached.append(None)
                    continue
                att = witness.attach()
                compiled = None
                if isinstance(att.assignment, CompiledWitness):
                    # Loaded (and on first use verified) before the device lock: the prover evaluates a, b, c.
                    compiled = load_verified(att.assignment.compiled_path, item.circuit_id)
                    if compiled is None:
                        att.close()
                        results.append(ItemResult(False, error=f"the compiled circuit {att.assignment.compiled_path} "
                                                               "cannot be used (see the log)"))
                        attached.append(None)
                        continue
                attached.append((pk, att, compiled))
                results.append(ItemResult(True))
            wait_start = time.monotonic()
            proofs: list[Any] = [None] * len(items)
            # A backend that locks the device itself (CUDA) holds it only around its device phase, so
            # this worker's staging overlaps another worker's kernels; the others run under our lock.
            own_lock = self.backend.locks_device_itself
            priority = max((item.priority for item in items), default=DEFAULT_PRIORITY)
            first = True
            with priority_scope(priority), \
                    contextlib.nullcontext() if own_lock else self.device_lock.hold(priority) as grant:
                for k, entry in enumerate(attached):
                    if entry is None:
                        continue
                    pk, att, compiled = entry
                    results[k].lock_wait_start, results[k].device_start = wait_start, time.monotonic()
                    if grant is not None:
                        # The lock's own stamps: exact about who was served while whom waited. A later
                        # item of the batch that yielded nothing starts at once, without a wait.
                        taken = grant if first else self.device_lock.yield_to_waiters()
                        if taken is not None:
                            results[k].lock_wait_start, results[k].device_start = taken.requested, taken.granted
                        else:
                            results[k].lock_wait_start = results[k].device_start
                    first = False
                    if items[k].hold_s:
                        time.sleep(items[k].hold_s)
                    phases = results[k].phases
                    try:
                        asg = att.assignment
                        if compiled is not None:
                            proofs[k] = self.backend.prove_compiled(pk, compiled, asg.inputs, asg.aux, timings=phases,
                                                                    deferred=asg.deferred)
                        else:
                            proofs[k] = self.backend.prove(pk, asg, timings=phases)
                        # The device phase began when the backend took the device, after staging.
                        results[k].device_start = phases.pop("device_begin", results[k].device_start)
                    except Exception as err:
                        results[k] = ItemResult(False, error=f"proving failed: {type(err).__name__}: {err}",
                                                fatal=self.backend.is_fatal(err),
                                                transient=self.backend.is_transient(err))
                        log.debug("prove failed: %s", traceback.format_exc())
                        continue
                    results[k].device_end = time.monotonic()
        finally:
            for entry in attached:
                if entry is not None:
                    entry[1].close()
        for k, item in enumerate(items):
            if not results[k].ok:
                continue
            results[k].proof = proofs[k].to_bytes()
            if verify:
                start = time.monotonic()
                with self.keys_lock:
                    pvk = self.verifying_keys[item.circuit_id]
                good = verify_proof(pvk, proofs[k], item.public_inputs)
                results[k].verify_s = time.monotonic() - start
                if not good:
                    results[k] = ItemResult(False, error="the proof did not verify against the partition's public "
                                                         "inputs")
        return results


def _warm_up(backend: ProverBackend) -> None:
    """Load every kernel a proof may use and prove and verify a tiny circuit once, so that `ready`
    means the first proof pays for neither."""
    import random

    from cuzk.circuits.registry import lookup
    from cuzk.groth16.assignment import Assignment
    from cuzk.groth16.setup import generate_insecure_parameters
    from cuzk.groth16.synthesis import synthesize_for_proving
    from cuzk.groth16.verifier import verify_proof

    spec = lookup("mimc-3")
    pk = generate_insecure_parameters(spec.blank(), rng=random.Random(0))
    asg = Assignment.from_proving_assignment(synthesize_for_proving(spec.example(random.Random(0))))
    loaded = backend.prepare_kernels()
    if loaded:
        log.info("%s kernels ready: %s", backend.name,
                 ", ".join(f"{unit} {seconds:.1f} s" for unit, seconds in loaded.items()))
    backend.load_key(pk)
    proof = backend.prove(pk, asg)
    backend.unload_key(pk)
    if not verify_proof(pk.vk, proof, asg.public_inputs()):
        raise RuntimeError(f"the {backend.name} backend made an invalid proof in its self-test")


# -- the device process ---------------------------------------------------------------------------

def _serve_prover(worker: DeviceWorker, conn: Connection) -> None:
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if msg[0] == "prove":
                reply: Any = ("ok", worker.prove(msg[1], msg[2], msg[3]))
            else:
                reply = ("error", f"unknown request {msg[0]!r}")
        except Exception as err:
            reply = ("error", f"{type(err).__name__}: {err}")
        try:
            conn.send(reply)
        except (OSError, EOFError):
            return


def device_worker_main(name: str, control: Connection, *rest: Any) -> None:
    """Entry point of a device process: args are the worker pipes, then a settings dict."""
    *channels, settings = rest
    set_thread_env(settings["threads"])
    set_device_switch_interval()
    try:
        worker = DeviceWorker.start(settings)
        info = worker.info()
    except BaseException as err:
        control.send(("error", f"{type(err).__name__}: {err}"))
        return
    for conn in channels:
        threading.Thread(target=_serve_prover, args=(worker, conn), daemon=True).start()
    control.send(("ready", {"pid": os.getpid(), "devices": info}))
    while True:
        try:
            msg = control.recv()
        except (EOFError, OSError):
            return
        try:
            if msg[0] == "load":
                reply: Any = ("ok", worker.load(*msg[1:]))
            elif msg[0] == "unload":
                worker.unload(msg[1], msg[2])
                reply = ("ok", None)
            elif msg[0] == "info":
                reply = ("ok", worker.info())
            else:
                reply = ("error", f"unknown request {msg[0]!r}")
        except Exception as err:
            reply = ("error", f"{type(err).__name__}: {err}")
        try:
            control.send(reply)
        except (OSError, EOFError):
            return
