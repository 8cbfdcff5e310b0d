"""The executor seam: the devices the engine proves on, behind one interface.

The engine never starts a device itself. It is given an `Executor` (built from the config where the
daemon is wired together, `cuzk.server.serve`, by `cuzk.engine.executors.make_executor`) and asks
it for its devices, to make keys hot or cold on them, to prove partitions on a device's lane, and
to restart a device that died. Each device has `workers_per_device` lanes that take any work and
one more (`critical_lane`) that takes CRITICAL work only; the engine runs one thread per lane, and
a lane hands the executor a partition's work (`ProveItem`: its recipe, public inputs, priority) and
gets back its proof and timings. The executor synthesizes and proves: a lane's partition is
synthesized while other lanes' partitions are on the device, which is why a device has more lanes
than it proves at once (`provers_per_device`).

`LocalExecutor` is the implementation for one host: its synthesis processes (`synthesis`), a
spawned process per device (`cuzk.engine.device_worker`), the witness handed from one to the other
as a shared-memory segment's name. An executor for devices on other hosts implements the same
operations (`cuzk.engine.ray_executor`), and a device it loses mid-partition is reported by raising
`WorkerCrashedError` from `prove`, as a local device process that dies is. docs/architecture.md has
the picture.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from cuzk.config import Config
from cuzk.config.host import cpu_limit
from cuzk.engine.device_worker import device_worker_main
from cuzk.engine.devices import DeviceSpec, detect_devices
from cuzk.engine.messages import ItemResult, ProveItem
from cuzk.engine.procs import WorkerCrashedError, WorkerProcess
from cuzk.engine.providers import WorkerCall
from cuzk.engine.synthesis import SharedAssignment, unlink_orphans
from cuzk.engine.synthesis_pool import SynthesisPool
from cuzk.errors import CuzkError

log = logging.getLogger("cuzk.engine.executor")


class DeviceError(CuzkError):
    """A device answered a control request with an error (a load the device refused, such as a key
    too large for its memory plan, names the device and the reason)."""


class KeyRefusedError(DeviceError):
    """No device can hold a circuit's key (each one's memory plan refused it, naming what it needs).
    A device that refuses a key the others hold is left out of that circuit's partitions instead
    (`Device.refused`)."""


#: The device processes' name for a key their memory plan cannot hold (`cuzk.backends.cuda.plan`).
TOO_SMALL_ERROR = "DeviceTooSmallError"
#: The longest wait between the housekeeper's tries at restarting a device whose restart failed.
RESTART_BACKOFF_MAX_S = 60.0


class Device:
    """One prover device as the engine sees it: what it is, what it last reported (`info`: name,
    memory, memory plan), and the worker that owns it."""

    def __init__(self, spec: DeviceSpec) -> None:
        self.spec = spec
        self.info: list[dict[str, Any]] = []
        self.failures = 0
        #: (time.time(), reason) of the last time it died or became unusable.
        self.last_failure: tuple[float, str] | None = None
        #: Why its last restart failed; None when it did not (or it has not been restarted).
        self.restart_error: str | None = None
        #: Partitions it proved, and the seconds it held the device for them (one partition holds a
        #: device at a time, so this is the device's busy time).
        self.partitions_proven = 0
        self.busy_s = 0.0
        #: circuit id -> why this device cannot hold its key (a card too small for it beside larger
        #: ones): the pipeline hands it none of that circuit's partitions. Cleared when the key goes
        #: cold, so that a later load asks again.
        self.refused: dict[str, str] = {}
        #: circuit id -> host bytes the device pinned for its key (streamed bases of a small card's
        #: plan, the compiled matrices its proofs upload, its proofs' input staging) and the compiled
        #: file's pages its host products read, held against the daemon's memory budget by the SRS
        #: entry; `pinned_key` is the part that copies the key's own bases.
        self.pinned: dict[str, int] = {}
        self.pinned_key: dict[str, int] = {}
        #: ... and of `pinned_key` the part held in host copies this host's devices share
        #: (`backends/cuda/shared_pinned.py`): counted once however many devices hold it.
        self.pinned_shared: dict[str, int] = {}
        #: circuit id -> bytes of the key's file the device still reads while the key is hot (its
        #: plan's streamed vectors left unpinned); None: it did not say (a CPU backend), the whole file.
        self.file_read: dict[str, int | None] = {}
        #: Circuits whose compiled products this device computes on the host (its plan cannot hold
        #: the witness, a, b, c and a matrix at once), as its last load said.
        self.products_on_host: set[str] = set()

    def proven(self, device_s: float) -> None:
        self.partitions_proven += 1
        self.busy_s += max(0.0, device_s)

    def failed(self, reason: str) -> None:
        self.failures += 1
        self.last_failure = (time.time(), reason)

    @property
    def name(self) -> str:
        if self.info:
            return f"{self.spec.kind}: {self.info[0]['name']}"
        return f"{self.spec.kind} {self.spec.ordinal}"

    @property
    def worker_name(self) -> str:
        """The name of the process (or actor) that owns the device, in logs and the status."""
        return f"cuzk-device-{self.spec.label}"

    @property
    def pid(self) -> int | None:
        return None

    @property
    def restarts(self) -> int:
        return 0

    @property
    def alive(self) -> bool:
        return True

    @property
    def can_prove(self) -> bool:
        """Whether its lanes may take partitions: False while it is dead and its last restart failed
        (a GPU gone from the bus), so that partitions go to the other devices instead of waiting on it."""
        return True

    @property
    def why_not_proving(self) -> str | None:
        """Why `can_prove` is False, in words; None while it is True."""
        return None if self.can_prove else f"cannot restart: {self.restart_error}"

    @property
    def placement(self) -> dict[str, Any]:
        """Where the device is, for the status, when that is not this host (a Ray node's id and
        address, the device's state there); empty for a local device."""
        return {}


def host_bytes_of(devices: list[Device], circuit_id: str, file_bytes: int) -> tuple[int, int]:
    """`Executor.hot_host_bytes` over `devices`: those whose memory is this host's."""
    holders = [d for d in devices if circuit_id in d.pinned]
    if not holders:
        return file_bytes, 0
    reads = [d.file_read.get(circuit_id) for d in holders]
    read = file_bytes if None in reads else min(file_bytes, max(r for r in reads if r is not None))
    shared = [d.pinned_shared.get(circuit_id, 0) for d in holders]
    pinned = sum(d.pinned[circuit_id] for d in holders) - sum(shared) + max(shared)
    if read >= file_bytes:
        pinned -= max(d.pinned_key.get(circuit_id, 0) for d in holders)
    return read, pinned


class ExecutorHost(Protocol):
    """What an executor asks of the engine that runs it (given to `Executor.start`)."""

    def compiled_for_key(self, circuit_id: str) -> str | None:
        """The ready compiled file of a circuit whose products the prover computes, which a device
        verifies and prepares as it makes the key hot; None: the device loads the key alone."""
        ...

    def device_restarted(self, device: Device) -> None:
        """`device` was restarted and is ready again, without keys: give it back the hot ones."""
        ...

    def device_added(self, device: Device) -> None:
        """`device` joined after `start` (a node new to a Ray cluster) and is ready: give it the hot
        keys and lanes of its own."""
        ...

    def warm_up_calls(self) -> list[WorkerCall]:
        """What each synthesis process runs before it reports ready (the providers' warm-up)."""
        ...


class ProveReport(Protocol):
    """What an executor tells the lane about its partitions while it proves them (from the lane's
    thread, as it happens): `k` is the item's index. An executor that synthesizes elsewhere reports
    nothing and returns the synthesis' span in `ItemResult.synth`."""

    def synthesizing(self, k: int, worker: str) -> None:
        """Item `k`'s synthesis began in `worker`."""
        ...

    def synthesized(self, k: int, start: float, end: float, worker: str, nbytes: int) -> bool:
        """Item `k` was synthesized into `nbytes` of this host's shared memory; False: its job ended
        meanwhile, so it is not proven."""
        ...

    def proving(self, ks: list[int]) -> None:
        """Items `ks` are handed to the device (one synthesizing elsewhere: to the device's node)."""
        ...


class PrioritySlots:
    """`n` numbered slots; waiters get one by priority, first come first served within a level."""

    def __init__(self, n: int) -> None:
        self._free = list(range(n))
        self._waiting: list[tuple[int, int]] = []  # a heap of (-priority, ticket)
        self._tickets = itertools.count()
        self._cv = threading.Condition()

    @contextlib.contextmanager
    def hold(self, priority: int) -> Iterator[int]:
        me = (-priority, next(self._tickets))
        with self._cv:
            heapq.heappush(self._waiting, me)
            while not (self._free and self._waiting[0] == me):
                self._cv.wait()
            heapq.heappop(self._waiting)
            slot = self._free.pop(0)
            self._cv.notify_all()  # the next waiter may take a slot still free
        try:
            yield slot
        finally:
            with self._cv:
                self._free.append(slot)
                self._cv.notify_all()


class Executor(ABC):
    """What the engine needs of its devices (module docstring)."""

    #: Lanes per device that take any work; lane `critical_lane` takes CRITICAL work only.
    workers_per_device: int
    critical_lane: int
    #: Of a device's regular lanes, how many prove at once (`gpus.gpu_workers_per_device`); the
    #: others synthesize meanwhile.
    provers_per_device: int
    #: The engine, from `start` on.
    host: ExecutorHost | None = None
    #: This host's synthesis processes: every partition's for a local executor, the engine's worker
    #: calls only for one whose devices synthesize on their own nodes (`cuzk.engine.synthesis_pool`).
    #: Started, replaced and stopped with the devices.
    synthesis: SynthesisPool
    #: Partitions are synthesized in this host's memory: the engine reserves a partition's estimate
    #: in its budget before handing it to a lane (False: on the devices' nodes, which budget their own).
    host_memory: bool = True

    def cluster_status(self) -> dict[str, Any] | None:
        """The nodes behind the devices, for the status (None: the devices are this host's)."""
        return None

    @property
    @abstractmethod
    def devices(self) -> list[Device]: ...

    @property
    def specs(self) -> list[DeviceSpec]:
        return [d.spec for d in self.devices]

    @property
    @abstractmethod
    def host_key_copies(self) -> int:
        """How many devices keep a hot key decoded in this host's memory (CPU backends)."""

    def start(self, host: ExecutorHost) -> None:
        """Begin starting every device and synthesis process (returns at once; `wait_ready` waits);
        from now on devices that restart or join are reported to `host`."""
        self.host = host
        self._start_devices()
        self.synthesis.start(host.warm_up_calls())

    def wait_ready(self) -> None:
        """Wait until every device is ready, with its info, and every synthesis process; raises when
        one cannot start."""
        self._wait_devices()
        self.synthesis.wait_ready()

    def shutdown(self, timeout: float = 2.0) -> None:
        """Stop the synthesis processes, then the devices."""
        self.synthesis.stop(timeout)
        self._stop_devices(timeout)

    @abstractmethod
    def _start_devices(self) -> None: ...

    @abstractmethod
    def _wait_devices(self) -> None: ...

    @abstractmethod
    def _stop_devices(self, timeout: float) -> None: ...

    @abstractmethod
    def load(self, device: Device, circuit_id: str, path: str, *, hot: bool) -> float:
        """Read a key on `device` (and with `hot`, make it resident); returns the seconds it took. A
        device whose memory plan cannot hold the key records why in `device.refused` (`_refused`)
        and returns 0.0: it proves none of that circuit's partitions."""

    def load_all(self, circuit_id: str, path: str, *, hot: bool) -> float:
        """Load on every device at once; returns the slowest load's seconds. Raises KeyRefusedError
        when every device refused the key."""
        devices = self.devices
        if len(devices) == 1:
            seconds = [self.load(devices[0], circuit_id, path, hot=hot)]
        else:
            with ThreadPoolExecutor(max_workers=len(devices)) as pool:
                seconds = list(pool.map(lambda d: self.load(d, circuit_id, path, hot=hot), devices))
        self._check_someone_holds(circuit_id, devices)
        return max(seconds, default=0.0)

    @staticmethod
    def _refused(device: Device, circuit_id: str, reason: str) -> float:
        device.refused[circuit_id] = reason
        log.warning("%s cannot hold %s's key (%s): the other devices prove its partitions", device.worker_name,
                    circuit_id, reason)
        return 0.0

    @classmethod
    def _refused_or_raise(cls, device: Device, circuit_id: str, err: DeviceError) -> float:
        """A load's DeviceError: recorded as the device's refusal when its memory plan could not hold
        the key (`load`'s contract), raised otherwise."""
        if f": {TOO_SMALL_ERROR}: " not in str(err):
            raise err
        return cls._refused(device, circuit_id, str(err).replace(f"{TOO_SMALL_ERROR}: ", "", 1))

    @staticmethod
    def _loaded(device: Device, circuit_id: str, reply: dict[str, Any]) -> None:
        """A load the device answered: no refusal to remember, and what it pinned for the key."""
        device.refused.pop(circuit_id, None)
        device.pinned[circuit_id] = reply.get("pinned_bytes", 0)
        device.pinned_key[circuit_id] = min(reply.get("pinned_key_bytes", 0), device.pinned[circuit_id])
        device.pinned_shared[circuit_id] = min(reply.get("pinned_shared_bytes", 0), device.pinned_key[circuit_id])
        device.file_read[circuit_id] = reply.get("file_read_bytes")
        if reply.get("products_on_host"):
            device.products_on_host.add(circuit_id)
        else:
            device.products_on_host.discard(circuit_id)

    @staticmethod
    def _check_someone_holds(circuit_id: str, devices: list[Device]) -> None:
        refusals = [d.refused[circuit_id] for d in devices if circuit_id in d.refused]
        if devices and len(refusals) == len(devices):
            raise KeyRefusedError("; ".join(refusals))

    @staticmethod
    def _unloading(circuit_id: str, tier: str, devices: list[Device]) -> None:
        """Before the devices drop a key to `tier`: it holds no pinned copies any more, and once cold
        a later load asks again whether each device can hold it."""
        for d in devices:
            d.pinned.pop(circuit_id, None)
            d.pinned_key.pop(circuit_id, None)
            d.pinned_shared.pop(circuit_id, None)
            d.file_read.pop(circuit_id, None)
            d.products_on_host.discard(circuit_id)
            if tier == "cold":
                d.refused.pop(circuit_id, None)

    def products_on_host(self, circuit_id: str) -> bool:
        """Whether a device computes this circuit's compiled products on the host, as its last load
        said (its partitions' memory estimate then holds what that prover keeps on the host)."""
        return any(circuit_id in d.products_on_host for d in self.devices)

    def hot_host_bytes(self, circuit_id: str, file_bytes: int) -> tuple[int, int]:
        """What the host budget holds for a hot key beside its decoded copies, as the devices' last
        loads reported: (bytes of the key's file that devices still read, the pinned copies).

        A GPU device reads the file only to load the key: its plan keeps every base vector in device
        memory or in a pinned host copy, except streamed vectors whose copy was skipped for want of
        host memory, which it reads from the file per proof. The rest of the file's pages are page
        cache the kernel reclaims, so counting them would only starve synthesis (two logical devices
        on one GPU ran one or two syntheses at a time for it: docs/memory.md §2). A device that
        does not say (a CPU backend) keeps the whole file. While the whole file counts, one device's
        pinned copy of the bases is the same bytes as its pages, and is counted once."""
        return host_bytes_of(self.devices, circuit_id, file_bytes)

    @abstractmethod
    def unload_all(self, circuit_id: str, tier: str) -> None:
        """Drop a key to `tier` ("warm": mapped, "cold": gone) on every device."""

    @abstractmethod
    def refresh_info(self) -> None:
        """Update each device's info, skipping devices that are busy with a control request."""

    @abstractmethod
    def prove(self, device: Device, lane: int, items: list[ProveItem], verify: bool,
              report: ProveReport | None = None) -> list[ItemResult]:
        """Synthesize and prove items on the device's lane, telling `report` how it goes; raises
        WorkerCrashedError when the device died meanwhile."""

    @abstractmethod
    def restart(self, device: Device, reason: str, *, force: bool = False) -> None:
        """Restart a device that died (logged with `reason`), or with `force` one that is alive but
        unusable, recording the failure on the device once however many of its lanes report it;
        `host.device_restarted` follows once it is ready."""

    def processes(self) -> list[WorkerProcess]:
        """This host's processes: the synthesis processes and those behind the devices (their memory
        counts against this host's budget)."""
        return self.synthesis.processes

    def revive(self) -> int:
        """Restart devices found dead while no lane was proving on them (the housekeeper's call); how
        many. A device that dies under a lane is restarted by that lane; one that dies between
        proofs is otherwise found only by the next key load, which fails its job and restarts
        nothing, so every later job failed the same way."""
        return 0


class LocalDevice(Device):
    """A device owned by a spawned process on this host."""

    def __init__(self, spec: DeviceSpec, proc: WorkerProcess, provers: int) -> None:
        super().__init__(spec)
        self.proc = proc
        #: The process's regular channels, by priority; its channel `provers` is the CRITICAL lane's.
        self.channels = PrioritySlots(provers)
        self.restart_lock = threading.Lock()
        #: Clear while the process is being replaced and given its keys back: a lane that reached
        #: the new process before that would find no key there.
        self.ready = threading.Event()
        self.ready.set()
        #: How many restarts in a row failed, and when the last one did: the housekeeper tries again
        #: less and less often.
        self.restart_failures = 0
        self.restart_failed_at = 0.0

    @property
    def worker_name(self) -> str:
        return self.proc.name

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    @property
    def restarts(self) -> int:
        return self.proc.restarts

    @property
    def alive(self) -> bool:
        return self.proc.alive

    @property
    def can_prove(self) -> bool:
        return self.restart_error is None or self.proc.alive

    def retry_due(self) -> bool:
        """Whether the housekeeper may try a failed restart again: after 2, 4, ... up to RESTART_BACKOFF_MAX_S
        seconds, rather than spawn a process every few seconds for a device that cannot start."""
        wait = min(RESTART_BACKOFF_MAX_S, 2.0 ** self.restart_failures)
        return time.monotonic() - self.restart_failed_at >= wait


class LocalExecutor(Executor):
    """This host's synthesis processes and one spawned process per device, `workers_per_device` + 1
    pipes each.

    A lane synthesizes its partition in the next free synthesis process (`SynthesisPool.process`),
    then waits for one of its device's pipes by priority and proves there; the CRITICAL lane has a
    pipe of its own. A device has a lane per pipe and as many more as it takes to keep every
    synthesis process busy (`synthesis_ahead`)."""

    def __init__(self, specs: list[DeviceSpec], *, workers_per_device: int, threads: int,
                 memory_limits: list[int | None] | None = None, synthesis: SynthesisPool | None = None,
                 synthesis_ahead: int | None = None) -> None:
        """`synthesis`: the pool that synthesizes the devices' partitions (default: one process per
        core of this host, `SynthesisPool.for_cores`). `synthesis_ahead`: lanes per device beyond its
        pipes (default: the regular synthesis processes shared out between the devices)."""
        self.synthesis = synthesis or SynthesisPool.for_cores(cpu_limit().cpus)
        self._devices: list[LocalDevice] = []
        for k, spec in enumerate(specs):
            limit = memory_limits[k] if memory_limits else None
            settings = {"ordinal": spec.ordinal, "kind": spec.kind, "threads": threads, "memory_limit": limit,
                        "memory_share": spec.share}
            proc = WorkerProcess(f"cuzk-device-{spec.label}", device_worker_main, (settings,),
                                 channels=workers_per_device + 1)
            device = LocalDevice(spec, proc, workers_per_device)
            proc.on_restart = self._restarted(device)
            self._devices.append(device)
        if synthesis_ahead is None:
            synthesis_ahead = -(-len(self.synthesis.regular) // max(1, len(specs)))
        self.provers_per_device = workers_per_device
        self.workers_per_device = workers_per_device + synthesis_ahead
        self.critical_lane = self.workers_per_device
        #: The witnesses made for the devices and not yet unlinked, by segment name: what a synthesis
        #: process that died mid-partition left is the rest (`_drop_orphans`).
        self._segments: set[str] = set()
        self._segments_lock = threading.Lock()
        #: Devices `revive` found dead last time, by name, with the incarnation (restart count) seen.
        self._dead_before: dict[str, int] = {}
        #: The incarnation of its device a lane (or the housekeeper) last dealt with, on that thread:
        #: a failure reported about an older one was handled by the restart that made the newer.
        self._lane_saw = threading.local()

    @classmethod
    def from_config(cls, config: Config, specs: list[DeviceSpec] | None = None, *,
                    synthesis_ahead: int | None = None) -> LocalExecutor:
        specs = detect_devices(config) if specs is None else specs
        # The CPUs synthesis may use: the cores, bounded by a cgroup CPU quota (`cuzk.config.host`).
        pool = SynthesisPool.for_cores(cpu_limit().cpus, max_processes=config.pipeline.max_parallel_synthesis,
                                       threads=config.synthesis.threads)
        return cls(specs, workers_per_device=config.gpus.gpu_workers_per_device, threads=config.gpus.gpu_threads,
                   memory_limits=[config.gpus.memory_limit_for(k) for k in range(len(specs))], synthesis=pool,
                   synthesis_ahead=synthesis_ahead)

    @property
    def devices(self) -> list[Device]:
        return list(self._devices)

    @property
    def host_key_copies(self) -> int:
        """Device processes whose backend keeps a hot key decoded in host memory (the CPU's); a CUDA
        backend uploads the file's bytes and keeps its copy in device memory."""
        return sum(1 for d in self._devices if d.spec.kind == "cpu")

    def processes(self) -> list[WorkerProcess]:
        return [d.proc for d in self._devices] + self.synthesis.processes

    def _restarted(self, device: LocalDevice) -> Callable[[WorkerProcess], None]:
        def hook(proc: WorkerProcess) -> None:
            device.info = proc.info["devices"]
            if self.host is not None:
                self.host.device_restarted(device)
        return hook

    def _start_devices(self) -> None:
        for d in self._devices:
            d.proc.start()

    def _wait_devices(self) -> None:
        for d in self._devices:
            d.info = d.proc.wait_ready()["devices"]

    def _stop_devices(self, timeout: float) -> None:
        for d in self._devices:
            d.proc.stop(timeout)

    def _control(self, device: Device, msg: tuple[Any, ...]) -> Any:
        assert isinstance(device, LocalDevice)
        reply = device.proc.request(msg)
        if reply[0] != "ok":
            raise DeviceError(f"{device.proc.name}: {reply[1]}")
        return reply[1]

    def load(self, device: Device, circuit_id: str, path: str, *, hot: bool) -> float:
        if not device.alive:
            # Dead (being restarted, or its restart failed): its restart gives it every key then
            # warm or hot (`host.device_restarted`). Sent the load, it would fail the job that asked.
            log.info("%s is not running: it gets %s's key when it is restarted", device.worker_name, circuit_id)
            return 0.0
        compiled = self.host.compiled_for_key(circuit_id) if hot and self.host is not None else None
        try:
            reply = self._control(device, ("load", circuit_id, path, hot, compiled))
        except DeviceError as err:
            return self._refused_or_raise(device, circuit_id, err)
        self._loaded(device, circuit_id, reply)
        prepared = reply.get("compiled")
        if prepared is not None and prepared["usable"]:
            where = "" if prepared["resident"] is None else \
                f"; A, B, C resident on the device: {', '.join(map(str, prepared['resident']))}"
            log.info("%s: compiled circuit %s verified with its key in %.1f s%s", device.name, circuit_id,
                     prepared["seconds"], where)
        elif prepared is not None:
            log.warning("%s: compiled circuit %s (%s) could not be prepared with its key (%s); its jobs will "
                        "try again", device.name, circuit_id, compiled, prepared["error"])
        return reply["load_s"]

    def unload_all(self, circuit_id: str, tier: str) -> None:
        self._unloading(circuit_id, tier, list(self._devices))
        for d in self._devices:
            if d.proc.alive:
                self._control(d, ("unload", circuit_id, tier))

    def revive(self) -> int:
        # Dead at two calls in a row (a second apart): a lane that saw it die restarts it first, and
        # records why ("died while proving ...").
        # The same incarnation both times, and not being restarted at either: a process a lane is
        # replacing right now is left to that lane (its count goes up before the new process is
        # spawned, so the old one's death is seen under the new count).
        dead = {d.worker_name: d.proc.restarts for d in self._devices
                if d.proc.process is not None and not d.proc.alive and not d.proc.stopping
                and not d.restart_lock.locked()}
        due = [d for d in self._devices
               if d.worker_name in dead and self._dead_before.get(d.worker_name) == dead[d.worker_name]
               and (d.restart_error is None or d.retry_due())]
        self._dead_before = dead
        for d in due:
            self._lane_saw.incarnation = dead[d.worker_name]
            self.restart(d, "found dead while idle")
        return len(due)

    def refresh_info(self) -> None:
        for d in self._devices:
            try:
                reply = d.proc.request_if_idle(("info",))
            except Exception as err:  # a dying device keeps its last known info
                log.debug("device info from %s failed: %s", d.proc.name, err)
                continue
            if reply is not None and reply[0] == "ok":
                d.info = reply[1]

    def prove(self, device: Device, lane: int, items: list[ProveItem], verify: bool,
              report: ProveReport | None = None) -> list[ItemResult]:
        assert isinstance(device, LocalDevice)
        report = report or _Unreported()
        results: list[ItemResult | None] = [None] * len(items)
        witnesses: list[SharedAssignment | None] = [None] * len(items)
        try:
            if len(items) == 1:
                self._synthesize(0, items[0], results, witnesses, report)
            else:  # a batch's partitions in as many processes as are free
                threads = [threading.Thread(target=self._synthesize, args=(k, item, results, witnesses, report),
                                            name=f"{threading.current_thread().name}-synth{k}", daemon=True)
                           for k, item in enumerate(items)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            ready = [k for k, w in enumerate(witnesses) if w is not None]
            if ready:
                priority = max(items[k].priority for k in ready)
                channel = (contextlib.nullcontext(self.provers_per_device) if lane == self.critical_lane
                           else device.channels.hold(priority))
                with channel as pipe:
                    # What `restart` compares, on this thread: the incarnation seen alive and ready, not
                    # one read later, which a restart begun meanwhile may already have counted up (the
                    # send then fails on its closed pipe and would be counted as a second failure).
                    self._lane_saw.incarnation = self._until_alive(device)
                    report.proving(ready)
                    reply = device.proc.request(("prove", [items[k] for k in ready], [witnesses[k] for k in ready],
                                                 verify), channel=pipe)
                proven = reply[1] if reply[0] == "ok" else [ItemResult(False, error=str(reply[1])) for _ in ready]
                for k, result in zip(ready, proven, strict=True):
                    result.synth, result.synth_worker = results[k].synth, results[k].synth_worker  # type: ignore[union-attr]
                    results[k] = result
        finally:
            for w in witnesses:
                if w is not None:
                    self._unlink(w)
        return [r if r is not None else ItemResult(False, error="not proven") for r in results]

    @staticmethod
    def _until_alive(device: LocalDevice) -> int:
        """Wait while the device is being restarted, or is dead and about to be (by the lane that saw
        it die, else by the housekeeper): partitions that had not reached it keep their witnesses
        and go to the new process, rather than fail on the dead one and be synthesized again. Returns
        the incarnation (restart count) found."""
        while True:
            device.ready.wait()
            with device.restart_lock:  # not half way through a restart (alive, its keys not loaded yet)
                # Alive, or stopping, or its restart failed (the send then fails and the partition goes elsewhere).
                if device.ready.is_set() and (device.proc.alive or device.proc.stopping or not device.can_prove):
                    return device.proc.restarts
            time.sleep(0.05)

    def _synthesize(self, k: int, item: ProveItem, results: list[ItemResult | None],
                    witnesses: list[SharedAssignment | None], report: ProveReport) -> None:
        """Item `k`'s synthesis in the pool's next free process: its witness in `witnesses[k]` and its
        span in `results[k]`, or its error there."""
        crashed = False
        try:
            with self.synthesis.process(item.priority) as proc:
                report.synthesizing(k, proc.name)
                pid = proc.pid
                try:
                    reply = proc.request(("synth", item.recipe))
                except WorkerCrashedError as crash:
                    reply, crashed = ("error", str(crash), ""), True
                    self.synthesis.died(proc, f"died while synthesizing {item.label}")
                except Exception as err:  # e.g. the recipe cannot be pickled
                    reply = ("error", f"cannot send the partition to a synthesis process: {type(err).__name__}: "
                             f"{err}", "")
        except CuzkError as err:  # the pool stopped
            reply = ("error", str(err), "")
        if crashed:
            self._drop_orphans(pid)
        if reply[0] != "ok":
            if len(reply) > 2 and reply[2]:
                log.debug("synthesis of %s failed:\n%s", item.label, reply[2])
            results[k] = ItemResult(False, error=f"synthesis failed: {reply[1]}")
            return
        _, shared, start, end = reply
        with self._segments_lock:
            self._segments.add(shared.shm_name)
        results[k] = ItemResult(False, synth=(start, end), synth_worker=proc.name)
        if report.synthesized(k, start, end, proc.name, shared.size):
            witnesses[k] = shared
        else:
            self._unlink(shared)
            results[k] = ItemResult(False, error="its job ended before it was proven", synth=(start, end),
                                    synth_worker=proc.name)

    def _unlink(self, shared: SharedAssignment) -> None:
        shared.unlink()
        with self._segments_lock:
            self._segments.discard(shared.shm_name)

    def _drop_orphans(self, dead_pid: int | None) -> None:
        """Remove what a synthesis process killed mid-partition left in shared memory."""
        if dead_pid is None:
            return
        with self._segments_lock:
            keep = set(self._segments)
        removed = unlink_orphans(dead_pid, keep)
        if removed:
            log.warning("removed %d shared-memory segment(s) the dead synthesis process %d left: %s", len(removed),
                        dead_pid, ", ".join(removed))

    def restart(self, device: Device, reason: str, *, force: bool = False) -> None:
        assert isinstance(device, LocalDevice)
        seen = getattr(self._lane_saw, "incarnation", device.proc.restarts)
        # One restart at a time, and whole (the process replaced and its keys loaded again), before
        # another report is looked at; `ready` is cleared and set by the restarting thread alone. A lane
        # that set it while the keys were still loading let the others reach a process without them,
        # which they reported unusable and killed, mid-reload, again and again.
        with device.restart_lock:
            if seen != device.proc.restarts:
                return  # replaced since this thread saw it fail: that restart recorded the failure
            device.failed(reason)
            device.ready.clear()
            try:
                if force and device.proc.process is not None and device.proc.alive:
                    device.proc.process.kill()  # its CUDA context is unusable: a new process gets a new one
                    device.proc.process.join(10.0)
                device.proc.restart(reason)  # returns once `host.device_restarted` has made its keys hot again
            except CuzkError as err:
                device.restart_error, device.restart_failed_at = str(err), time.monotonic()
                device.restart_failures += 1
                log.error("cannot restart %s (%d failed in a row; its partitions go to the other devices): %s",
                          device.proc.name, device.restart_failures, err)
            else:
                if device.restart_error is not None and device.proc.alive:
                    log.warning("%s restarted after %d failed restarts", device.proc.name, device.restart_failures)
                    device.restart_error, device.restart_failures = None, 0
            finally:
                device.ready.set()


class _Unreported:
    """A `ProveReport` nobody reads: every partition is still wanted."""

    def synthesizing(self, k: int, worker: str) -> None:
        pass

    def synthesized(self, k: int, start: float, end: float, worker: str, nbytes: int) -> bool:
        return True

    def proving(self, ks: list[int]) -> None:
        pass
