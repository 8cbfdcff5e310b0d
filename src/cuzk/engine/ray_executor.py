"""The Ray executor: the devices of every node of a Ray cluster behind one cuzk endpoint (docs/ray.md).

`[executor] kind = "ray"`. The front end (gRPC, journal, scheduler, memory admission) stays the one
daemon process; this executor joins a Ray cluster as its driver and keeps one actor (`DeviceActor`)
per device on every node that offers the `GPU` resource (a CUDA device each) or the `cuzk_device`
custom resource (a CPU device each, e.g. `ray start --resources='{"cuzk_device": 1}'`). Each actor is
pinned to its node (hard node affinity) and restarted there by Ray when its process dies
(`max_restarts`); it runs a `DeviceWorker` (the device processes' own), loads keys from its node's
`srs.param_cache` (the same path on every node), and synthesizes each partition it proves on its
own node, from the partition's picklable recipe, with the code a local synthesis process runs
(`synthesize_shared`): a witness never crosses the network. What travels is the recipe one way and
the proof (192 bytes a partition) with its timings the other.

Synthesis runs ahead of the device: a device has `gpu_workers_per_device + synthesis_ahead` lanes,
and its actor a synthesis process per lane on its node (`synthesis_worker_main`, as the local
engine's), so that some lanes synthesize while the others' partitions are on the device, and the
actor's interpreter lock stays with the threads that drive it. The CRITICAL lane synthesizes in
the actor itself, queued behind none of them. The recipe is unpickled only where it is synthesized
(`PickledRecipe`).

A recipe's large buffers (bytes, bytearray, numpy arrays of `LARGE_BUFFER_BYTES` or more, such as
a request payload the partitions of a job share) go into Ray's object store once per job: the
recipe is pickled with those buffers replaced by references (`_pickle_recipe`), each buffer put
the first time a partition of its job refers to it, and every later partition of the job sends
the same reference. A node fetches an object once, whatever the number of its partitions.

Faults: an actor that dies (its process, or its node with it) makes `prove` raise
`WorkerCrashedError`, as a local device process does, so the pipeline gives its partitions to
another device. `restart` then waits for Ray to bring the actor back (and reloads its keys through
`ExecutorHost.device_restarted`), or, when its node is gone, marks the device lost, named with its
node in the status, and blocks that lane until shutdown. `refresh_info` (every few seconds) notices
nodes that joined since, starts their actors, and announces each device once ready
(`ExecutorHost.device_added`). A synthesis process of an actor that dies fails the partition it
held (a synthesis error, not a device fault), and the actor spawns a new one for its lane's next
partition.

Only `gpu_workers_per_device` lanes of a device are in its prove at once (`PrioritySlots`, by
priority): the rest have synthesized and wait there, as a local device's lanes wait for one of its
pipes (`LocalExecutor`). Were all lanes at the device lock, the proof next on the device would often
be one that could not stage its inputs ahead (the memory plan keeps room for one beside the proof
on the device), and would stage them with the device held.

Clocks: a node's `time.monotonic()` is not this host's. Each actor's offset is measured once it is
ready (the midpoint of the shortest of a few round trips to its `clock`; its `ready` reply waits for
its start, so it cannot time one), and the stamps it returns are moved onto this host's clock with
it, so timelines and timings line up across nodes.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pickle
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any

import ray
import ray.exceptions
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from cuzk.config import Config
from cuzk.config.engine import ExecutorConfig
from cuzk.config.host import cpu_limit
from cuzk.engine.devices import DeviceSpec
from cuzk.engine.executor import (
    TOO_SMALL_ERROR,
    Device,
    DeviceError,
    Executor,
    PrioritySlots,
    ProveReport,
    host_bytes_of,
)
from cuzk.engine.messages import ItemResult, ProveItem
from cuzk.engine.procs import WorkerCrashedError
from cuzk.engine.synthesis import PickledRecipe, SharedAssignment, synthesize_shared
from cuzk.engine.synthesis_pool import SynthesisPool
from cuzk.errors import CuzkError

log = logging.getLogger("cuzk.engine.ray_executor")

#: The custom resource a node offers once per CPU device it lends (GPUs are Ray's own `GPU`).
DEVICE_RESOURCE = "cuzk_device"
#: Buffers of a recipe at least this large go through the object store, once per job.
LARGE_BUFFER_BYTES = 64 << 10
#: How often Ray may restart a device actor whose process died (-1: without limit, as the local
#: executor restarts its device processes).
MAX_RESTARTS = -1
#: A job's object-store references are dropped this long after its last partition was sent.
PAYLOAD_IDLE_S = 120.0
READY_TIMEOUT_S = 600.0
#: Round trips to a ready actor's clock, the shortest of which measures its offset.
CLOCK_PINGS = 5
#: The errors Ray raises for an actor that died or cannot be reached (its process or node gone).
ACTOR_GONE = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError,
              ray.exceptions.NodeDiedError, ray.exceptions.WorkerCrashedError,
              ray.exceptions.ActorUnschedulableError)


# -- the device actor (runs on its node) -------------------------------------------------------------

@dataclass
class RemoteItem:
    """A `ProveItem` as it travels to a node: the recipe pickled with its large buffers as references."""

    circuit_id: str
    public_inputs: list[int]
    label: str
    priority: int
    hold_s: float
    recipe: bytes
    #: Object-store references, by index, of the buffers `recipe` refers to.
    refs: list[Any] = field(default_factory=list)


class DeviceActor:
    """One device on its node: the backend, its keys, and synthesis of the partitions it proves.

    Threaded (`max_concurrency`): each lane's `prove` runs in a thread of its own, the device lock
    of its `DeviceWorker` ordering them by priority as in a local device process. Regular lane k
    synthesizes in synthesis process k, spawned by this actor on its node (its children: they exit
    when this process goes, at the EOF of their pipes)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        from cuzk.engine.procs import WorkerProcess, set_thread_env
        from cuzk.engine.synthesis import SYNTHESIS_NICE, synthesis_worker_main

        set_thread_env(settings["threads"])
        from cuzk.engine.device_worker import set_device_switch_interval

        set_device_switch_interval()
        self.label = settings["label"]
        count = settings["synthesis_procs"]
        self.slots = PrioritySlots(settings["provers"])
        threads = max(1, (os.cpu_count() or 1) // count)
        self.synth = [WorkerProcess(f"{self.label}/synth{k}", synthesis_worker_main, (threads, SYNTHESIS_NICE))
                      for k in range(count)]
        for proc in self.synth:  # their imports run beside the backend's warm-up
            proc.start()
        try:
            from cuzk.engine.device_worker import DeviceWorker

            self.worker = DeviceWorker.start(settings)
            for proc in self.synth:
                proc.wait_ready()
        except BaseException:
            for proc in self.synth:
                proc.stop(1.0)
            raise

    def ready(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "devices": self.worker.info(), "now": time.monotonic(),
                "node_id": ray.get_runtime_context().get_node_id()}

    def clock(self) -> float:
        return time.monotonic()

    def info(self) -> list[dict[str, Any]]:
        return self.worker.info()

    def load(self, circuit_id: str, path: str, hot: bool, compiled_path: str | None) -> dict[str, Any]:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"this node has no parameter file {path} (srs.param_cache must hold the same "
                                    "files on every node)")
        if compiled_path is not None and not os.path.isfile(compiled_path):
            compiled_path = None  # the compiled circuit is an optimisation; its jobs fall back without it
        return self.worker.load(circuit_id, path, hot, compiled_path)

    def unload(self, circuit_id: str, tier: str) -> None:
        self.worker.unload(circuit_id, tier)

    def prove(self, lane: int, items: list[RemoteItem], verify: bool) -> tuple[list[ItemResult], float, int]:
        """Synthesize each item on this node (into shared memory, in the lane's synthesis process; the
        CRITICAL lane's in this process), prove the batch on the device, and return the results with
        this node's clock at the end and this process's pid (a new pid: Ray restarted the actor, and
        its keys are gone). The segments are this process's to unlink, wherever they were made."""
        results: list[ItemResult | None] = [None] * len(items)
        local: list[tuple[int, SharedAssignment, tuple[float, float]]] = []
        try:
            for k, item in enumerate(items):
                try:
                    recipe = PickledRecipe(item.recipe, tuple(ray.get(item.refs)) if item.refs else ())
                    reply = self._synthesize(lane, recipe)
                    del recipe
                except Exception as err:
                    reply = ("error", f"{type(err).__name__}: {err}", "")
                if reply[0] != "ok":
                    results[k] = ItemResult(False, error=f"synthesis on {self.label} failed: {reply[1]}")
                    log.debug("synthesis of %s failed:\n%s", item.label, reply[2])
                    continue
                _, shared, start, end = reply
                local.append((k, shared, (start, end)))
            if local:
                # The CRITICAL lane waits for no slot: it is the lane kept free for such work.
                slot = (contextlib.nullcontext() if lane >= len(self.synth)
                        else self.slots.hold(max(items[k].priority for k, _, _ in local)))
                with slot:
                    proven = self.worker.prove([ProveItem(items[k].circuit_id, None, items[k].public_inputs,
                                                          items[k].label, items[k].priority, items[k].hold_s)
                                                for k, _, _ in local], [w for _, w, _ in local], verify)
                for (k, _, synth), result in zip(local, proven, strict=True):
                    result.synth = synth
                    results[k] = result
        finally:
            for _, shared, _ in local:
                shared.unlink()
        return ([r if r is not None else ItemResult(False, error="not proven") for r in results], time.monotonic(),
                os.getpid())

    def _synthesize(self, lane: int, recipe: PickledRecipe) -> tuple[Any, ...]:
        """A synthesis process's reply for `recipe`: ("ok", shared, start, end) or ("error", message,
        traceback). A process that died answers its partition as failed (`WorkerCrashedError`) and is
        replaced before the lane's next partition."""
        if lane >= len(self.synth):  # the CRITICAL lane
            try:
                return ("ok", *synthesize_shared(recipe))
            except Exception as err:
                return ("error", f"{type(err).__name__}: {err}", traceback.format_exc())
        proc = self.synth[lane]
        try:
            if not proc.alive:
                proc.restart("it died in an earlier partition")
            return proc.request(("synth", recipe))
        except Exception as err:  # WorkerCrashedError, a restart that failed, a recipe that cannot be sent
            return ("error", f"{type(err).__name__}: {err}", "")


# -- the executor side ------------------------------------------------------------------------------------

class RayDevice(Device):
    """A device on a node of the Ray cluster, owned by a `DeviceActor` there."""

    def __init__(self, spec: DeviceSpec, node_id: str, node_address: str, local_index: int) -> None:
        super().__init__(spec)
        self.node_id = node_id
        self.node_address = node_address
        self.local_index = local_index
        self.actor: Any = None
        self.state = "starting"  #: starting, ready, restarting, lost
        self.lost_reason = ""
        self.missing_params: dict[str, str] = {}
        self.clock_offset = 0.0  #: this host's monotonic clock minus the node's
        self._pid: int | None = None
        self._restarts = 0
        #: Counts the actor's ready replies taken (the first and each after a restart): a lane that
        #: failed on one generation and finds a later one knows another lane restarted it meanwhile.
        self.generation = 0
        self.restart_lock = threading.Lock()
        #: Set while the device takes work: lanes wait on it while `restart` brings the actor back.
        self.usable = threading.Event()
        self._ready_call: Any = None

    @property
    def node_label(self) -> str:
        return f"{self.node_address}-{self.node_id[:6]}"

    @property
    def worker_name(self) -> str:
        # No "/": the bench timeline takes a prover worker's device as its name up to the first "/".
        return f"{self.node_label}:cuzk-device-{self.spec.kind}{self.local_index}"

    @property
    def name(self) -> str:
        base = f"{self.spec.kind}: {self.info[0]['name']}" if self.info else f"{self.spec.kind} {self.local_index}"
        where = f" on node {self.node_address} ({self.node_id[:8]})"
        return base + where + (f" [lost: {self.lost_reason}]" if self.state == "lost" else "")

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def restarts(self) -> int:
        return self._restarts

    @property
    def alive(self) -> bool:
        return self.state in ("ready", "starting")

    @property
    def can_prove(self) -> bool:
        return self.state != "lost"

    @property
    def why_not_proving(self) -> str | None:
        return None if self.can_prove else f"lost: {self.lost_reason}"

    @property
    def placement(self) -> dict[str, Any]:
        return {"node": self.node_label, "node_id": self.node_id, "node_address": self.node_address,
                "worker": self.worker_name,
                "state": self.state, "lost_reason": self.lost_reason or None,
                "missing_params": dict(self.missing_params)}


class _JobPayloads:
    """One job's buffers in the object store: id(buffer) -> (buffer, reference); the buffer is held so
    its id is not reused while the reference stands for it."""

    def __init__(self) -> None:
        self.refs: dict[int, tuple[Any, Any]] = {}
        self.last_used = time.monotonic()


def _is_large_buffer(obj: Any) -> bool:
    if isinstance(obj, bytes | bytearray):
        return len(obj) >= LARGE_BUFFER_BYTES
    nbytes = getattr(obj, "nbytes", None)
    return type(obj).__module__ == "numpy" and type(obj).__name__ == "ndarray" and isinstance(nbytes, int) \
        and nbytes >= LARGE_BUFFER_BYTES


class RayExecutor(Executor):
    """One `DeviceActor` per device on every node of the cluster that offers a device resource."""

    #: The front end reserves no memory for these partitions: on the device's node, each lane (the
    #: `workers_per_device` and the CRITICAL one) holds one partition's witness at most (one batch's).
    host_memory = False

    def __init__(self, *, address: str, backend: str, workers_per_device: int, threads: int,
                 synthesis_ahead: int = ExecutorConfig.synthesis_ahead, memory_limit: int | None = None,
                 namespace: str = "cuzk") -> None:
        self.address = address
        self.backend = backend
        # Every lane synthesizes, then proves: `synthesis_ahead` lanes more than the device's workers
        # keep partitions synthesized while the others' are on the device.
        self.workers_per_device = workers_per_device + synthesis_ahead
        self.provers_per_device = workers_per_device
        self.critical_lane = self.workers_per_device
        self.threads = threads
        self.memory_limit = memory_limit
        # The partitions are synthesized on the devices' nodes: this host's pool runs the engine's worker
        # calls alone (shapes, generated test parameters), one at a time beside the reserved process.
        cores = cpu_limit().cpus
        self.synthesis = SynthesisPool(1, threads=cores, critical_threads=cores)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        #: Per lane thread: the device generation its last `prove` call went to (`restart`).
        self._lane_saw = threading.local()
        self._devices: list[RayDevice] = []
        self._nodes: dict[str, dict[str, Any]] = {}  #: node id -> what ray.nodes() said last
        self._payloads: dict[str, _JobPayloads] = {}
        self._payload_lock = threading.Lock()
        self.payload_puts = 0
        self.payload_bytes = 0
        self._started = False
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(address=address, namespace=namespace, logging_level=logging.WARNING,
                     configure_logging=False)
        self.local_node_id = ray.get_runtime_context().get_node_id()
        for node in self._alive_nodes():
            self._add_node(node)
        if not self._devices:
            log.warning("the Ray cluster at %s offers no device yet (no node with the GPU or %s resource); "
                        "nodes that join later are used", address, DEVICE_RESOURCE)

    @classmethod
    def from_config(cls, config: Config) -> RayExecutor:
        limit = config.gpus.memory_limit_for(0) if not isinstance(config.gpus.memory_limit, list) else None
        return cls(address=config.executor.address, backend=config.gpus.backend,
                   workers_per_device=config.gpus.gpu_workers_per_device, threads=config.gpus.gpu_threads,
                   synthesis_ahead=config.executor.synthesis_ahead, memory_limit=limit)

    # -- nodes and devices ------------------------------------------------------------------------------
    @staticmethod
    def _alive_nodes() -> list[dict[str, Any]]:
        return [n for n in ray.nodes() if n.get("Alive")]

    def _device_count(self, node: dict[str, Any]) -> tuple[str, int]:
        resources = node.get("Resources", {})
        gpus = int(resources.get("GPU", 0))
        if gpus and self.backend != "cpu":
            return "cuda", gpus
        return "cpu", int(resources.get(DEVICE_RESOURCE, 0))

    def _add_node(self, node: dict[str, Any]) -> list[RayDevice]:
        """Devices for a node not seen before (lock not needed before `start`; held after)."""
        node_id = node["NodeID"]
        self._nodes[node_id] = node
        kind, count = self._device_count(node)
        added = []
        for k in range(count):
            spec = DeviceSpec(len(self._devices), kind)
            device = RayDevice(spec, node_id, node.get("NodeManagerAddress", "?"), k)
            self._devices.append(device)
            added.append(device)
        if count:
            log.info("Ray node %s (%s): %d %s device(s)", node.get("NodeManagerAddress"), node_id[:8], count, kind)
        return added

    @property
    def devices(self) -> list[Device]:
        """Every device seen, lost ones too (the status names them and their node; they take no
        control requests)."""
        with self._lock:
            return list(self._devices)

    @property
    def all_devices(self) -> list[RayDevice]:
        with self._lock:
            return list(self._devices)

    @property
    def host_key_copies(self) -> int:
        """CPU devices on this host's own Ray node keep a decoded key in this host's memory."""
        with self._lock:
            return sum(1 for d in self._devices if d.spec.kind == "cpu" and d.node_id == self.local_node_id
                       and d.state != "lost")

    def hot_host_bytes(self, circuit_id: str, file_bytes: int) -> tuple[int, int]:
        """Only the devices of this host's own node take this host's memory for a hot key: a remote
        node maps the file and pins its copies in its own. With none here holding the key, nothing
        (four remote 16 GiB cards pinning a 47 GB key each would otherwise fail its load here)."""
        with self._lock:
            local = [d for d in self._devices if d.node_id == self.local_node_id and circuit_id in d.pinned]
        return host_bytes_of(local, circuit_id, file_bytes) if local else (0, 0)

    def cluster_status(self) -> dict[str, Any]:
        with self._lock:
            nodes = []
            for node_id, node in self._nodes.items():
                devices = [d for d in self._devices if d.node_id == node_id]
                nodes.append({"node_id": node_id, "address": node.get("NodeManagerAddress"),
                              "alive": bool(node.get("Alive")), "devices": [d.worker_name for d in devices],
                              "lost_devices": [d.worker_name for d in devices if d.state == "lost"]})
        return {"kind": "ray", "address": self.address, "nodes": nodes,
                "payload_objects": self.payload_puts, "payload_bytes": self.payload_bytes}

    # -- lifecycle -------------------------------------------------------------------------------------------
    def _spawn(self, device: RayDevice) -> None:
        options: dict[str, Any] = {
            "scheduling_strategy": NodeAffinitySchedulingStrategy(device.node_id, soft=False),
            "max_restarts": MAX_RESTARTS, "max_task_retries": 0,
            # One thread per lane (the CRITICAL one too), plus control requests (load, info) beside them.
            "max_concurrency": self.workers_per_device + 3,
            "num_cpus": 0,
        }
        if device.spec.kind == "cuda":
            options["num_gpus"] = 1
        else:
            options["resources"] = {DEVICE_RESOURCE: 1}
        settings = {"kind": device.spec.kind, "ordinal": 0, "threads": self.threads,
                    "memory_limit": self.memory_limit, "label": device.worker_name,
                    "synthesis_procs": self.workers_per_device, "provers": self.provers_per_device}
        # Ray gives a GPU actor its GPU as the only visible one, hence ordinal 0.
        device.actor = ray.remote(DeviceActor).options(**options).remote(settings)
        device._ready_call = (time.monotonic(), device.actor.ready.remote())

    def _await_ready(self, device: RayDevice, timeout: float = READY_TIMEOUT_S) -> None:
        sent, ref = device._ready_call
        try:
            reply = ray.get(ref, timeout=timeout)
        except ray.exceptions.RayTaskError as err:
            raise CuzkError(f"device {device.worker_name} did not start: {err.cause!r}") from None
        except ray.exceptions.GetTimeoutError:
            raise CuzkError(f"device {device.worker_name} did not start within {timeout:.0f} s") from None
        except ACTOR_GONE as err:
            raise CuzkError(f"device {device.worker_name} did not start: {type(err).__name__}: {err}") from None
        self._ready(device, reply, sent)

    def _ready(self, device: RayDevice, reply: dict[str, Any], sent: float) -> None:
        device.clock_offset = self._clock_offset(device, (sent, reply["now"], time.monotonic()))
        if device._pid is not None and reply["pid"] != device._pid:
            device._restarts += 1
        device._pid = reply["pid"]
        device.info = reply["devices"]
        device.generation += 1
        device.state = "ready"
        device.usable.set()

    @staticmethod
    def _clock_offset(device: RayDevice, first: tuple[float, float, float]) -> float:
        """This host's monotonic clock minus the node's, from the shortest round trip (sent, the
        node's stamp, received) of `first` and `CLOCK_PINGS` more to the actor's `clock`: a stamp lies
        between sending and receiving, so the midpoint is within half that trip."""
        trips = [first]
        for _ in range(CLOCK_PINGS):
            sent = time.monotonic()
            try:
                stamp = ray.get(device.actor.clock.remote(), timeout=10.0)
            except Exception:  # the lanes find out what became of the actor
                break
            trips.append((sent, stamp, time.monotonic()))
        sent, stamp, received = min(trips, key=lambda t: t[2] - t[0])
        return (sent + received) / 2 - stamp

    def _start_devices(self) -> None:
        self._started = True
        for d in self.all_devices:
            self._spawn(d)

    def _wait_devices(self) -> None:
        for d in self.all_devices:
            self._await_ready(d)

    def _stop_devices(self, timeout: float) -> None:
        self._stop.set()
        for d in self.all_devices:
            if d.actor is not None:
                with contextlib.suppress(Exception):
                    ray.kill(d.actor, no_restart=True)
        with self._payload_lock:
            self._payloads.clear()
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()

    # -- control ---------------------------------------------------------------------------------------------
    def _call(self, device: RayDevice, method: str, *args: Any, timeout: float | None = None) -> Any:
        try:
            return ray.get(getattr(device.actor, method).remote(*args), timeout=timeout)
        except ray.exceptions.RayTaskError as err:
            cause = err.cause if err.cause is not None else err
            if isinstance(cause, FileNotFoundError) and method == "load":
                device.missing_params[args[0]] = str(cause)
            raise DeviceError(f"{device.worker_name} (node {device.node_address}): {type(cause).__name__}: "
                              f"{cause}") from None
        except ACTOR_GONE as err:
            raise DeviceError(f"{device.worker_name} (node {device.node_address}) is gone: "
                              f"{type(err).__name__}") from None

    def load(self, device: Device, circuit_id: str, path: str, *, hot: bool) -> float:
        assert isinstance(device, RayDevice)
        compiled = self.host.compiled_for_key(circuit_id) if hot and self.host is not None else None
        try:
            reply = self._call(device, "load", circuit_id, path, hot, compiled)
        except DeviceError as err:
            return self._refused_or_raise(device, circuit_id, err)
        device.missing_params.pop(circuit_id, None)
        self._loaded(device, circuit_id, reply)
        return reply["load_s"]

    def load_all(self, circuit_id: str, path: str, *, hot: bool) -> float:
        ready = [d for d in self.all_devices if d.state == "ready"]
        if not ready:
            return 0.0
        refs = []
        compiled = self.host.compiled_for_key(circuit_id) if hot and self.host is not None else None
        for d in ready:
            assert isinstance(d, RayDevice)
            refs.append(d.actor.load.remote(circuit_id, path, hot, compiled))
        slowest, errors = 0.0, []
        for d, ref in zip(ready, refs, strict=True):
            assert isinstance(d, RayDevice)
            try:
                reply = ray.get(ref)
                slowest = max(slowest, reply["load_s"])
                d.missing_params.pop(circuit_id, None)
                self._loaded(d, circuit_id, reply)
            except ray.exceptions.RayTaskError as err:
                cause = err.cause if err.cause is not None else err
                if type(cause).__name__ == TOO_SMALL_ERROR:
                    self._refused(d, circuit_id, f"{d.worker_name} (node {d.node_address}): {cause}")
                    continue
                if isinstance(cause, FileNotFoundError):
                    d.missing_params[circuit_id] = str(cause)
                errors.append(f"{d.worker_name} (node {d.node_address}): {type(cause).__name__}: {cause}")
            except ACTOR_GONE as err:
                log.warning("loading %s: device %s is gone (%s)", circuit_id, d.worker_name, type(err).__name__)
        if errors:
            raise DeviceError("; ".join(errors))
        self._check_someone_holds(circuit_id, ready)
        return slowest

    def unload_all(self, circuit_id: str, tier: str) -> None:
        self._unloading(circuit_id, tier, list(self.all_devices))
        refs = [(d, d.actor.unload.remote(circuit_id, tier)) for d in self.all_devices
                if d.state == "ready" and d.actor is not None]
        for d, ref in refs:
            try:
                ray.get(ref)
            except ACTOR_GONE:
                continue
            except ray.exceptions.RayTaskError as err:
                raise DeviceError(f"{d.worker_name}: {err.cause!r}") from None

    def refresh_info(self) -> None:
        """Each ready device's info; nodes that left (their devices marked lost) and nodes that joined
        (their devices started, and announced through `host.device_added` once ready)."""
        if self._stop.is_set():
            return
        for d in self.all_devices:
            if d.state != "ready":
                continue
            try:
                d.info = ray.get(d.actor.info.remote(), timeout=5.0)
            except ray.exceptions.GetTimeoutError:
                continue
            except ACTOR_GONE:
                continue  # its lanes find out, and `restart` says why
            except ray.exceptions.RayTaskError as err:
                log.debug("device info from %s failed: %s", d.worker_name, err)
        try:
            nodes = {n["NodeID"]: n for n in ray.nodes()}
        except Exception as err:  # the cluster's control service is unreachable: try again later
            log.warning("cannot list the Ray cluster's nodes: %s", err)
            return
        added: list[RayDevice] = []
        with self._lock:
            for node_id, node in nodes.items():
                known = node_id in self._nodes
                if known:
                    self._nodes[node_id] = node
                if not node.get("Alive"):
                    for d in self._devices:
                        if d.node_id == node_id and d.state != "lost":
                            self._lose(d, f"node {d.node_address} ({node_id[:8]}) left the cluster")
                elif not known and self._started:
                    added += self._add_node(node)
        for d in added:
            threading.Thread(target=self._bring_up, args=(d,), name=f"{d.worker_name}-start", daemon=True).start()

    def _bring_up(self, device: RayDevice) -> None:
        try:
            self._spawn(device)
            self._await_ready(device)
        except (CuzkError, *ACTOR_GONE) as err:
            with self._lock:
                self._lose(device, f"did not start: {err}")
            return
        log.info("device %s joined (node %s)", device.worker_name, device.node_address)
        if self.host is not None and not self._stop.is_set():
            self.host.device_added(device)

    def _lose(self, device: RayDevice, reason: str) -> None:
        if device.state == "lost":
            return
        device.state = "lost"
        device.usable.set()  # lanes waiting for it find it lost
        device.lost_reason = reason
        device.failed(reason)
        log.error("device %s lost: %s", device.worker_name, reason)

    # -- proving -----------------------------------------------------------------------------------------------
    def _pickle_recipe(self, job_key: str, recipe: Any) -> tuple[bytes, list[Any]]:
        """The recipe pickled with its large buffers as indices into the returned references, each
        buffer put into the object store the first time its job sends it."""
        with self._payload_lock:
            now = time.monotonic()
            for key in [k for k, p in self._payloads.items() if now - p.last_used > PAYLOAD_IDLE_S]:
                del self._payloads[key]
            payloads = self._payloads.setdefault(job_key, _JobPayloads())
            payloads.last_used = now
        refs: list[Any] = []
        index: dict[int, int] = {}

        def persistent_id(obj: Any) -> int | None:
            if not _is_large_buffer(obj):
                return None
            key = id(obj)
            if key not in index:
                with self._payload_lock:
                    held = payloads.refs.get(key)
                    if held is None:
                        held = (obj, ray.put(obj))
                        payloads.refs[key] = held
                        self.payload_puts += 1
                        self.payload_bytes += len(obj) if isinstance(obj, bytes | bytearray) else obj.nbytes
                index[key] = len(refs)
                refs.append(held[1])
            return index[key]

        out = io.BytesIO()
        pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.persistent_id = persistent_id  # type: ignore[method-assign]
        pickler.dump(recipe)
        return out.getvalue(), refs

    def _remote_item(self, item: ProveItem) -> RemoteItem:
        job_key = item.label.rpartition("#")[0] or item.label
        blob, refs = self._pickle_recipe(job_key, item.recipe)
        return RemoteItem(item.circuit_id, list(item.public_inputs), item.label, item.priority, item.hold_s, blob,
                          refs)

    def prove(self, device: Device, lane: int, items: list[ProveItem], verify: bool,
              report: ProveReport | None = None) -> list[ItemResult]:
        """The items synthesized and proven on the device's node (`DeviceActor.prove`): `report` hears
        that they went there, and the synthesis' spans come back in the results."""
        assert isinstance(device, RayDevice)
        while not device.usable.wait(1.0):  # another lane is restarting the device
            if self._stop.is_set():
                raise WorkerCrashedError(device.worker_name, None)
        if device.state == "lost":
            raise WorkerCrashedError(device.worker_name, None)
        self._lane_saw.generation = device.generation  # what `restart` compares, on this lane's thread
        remote = [self._remote_item(item) for item in items]
        if report is not None:
            report.proving(list(range(len(items))))
        try:
            results, _, pid = ray.get(device.actor.prove.remote(lane, remote, verify))
        except ACTOR_GONE as err:
            log.warning("device %s died while proving %s: %s", device.worker_name, items[0].label,
                        type(err).__name__)
            raise WorkerCrashedError(device.worker_name, None) from None
        except ray.exceptions.RayTaskError as err:
            return [ItemResult(False, error=f"{device.worker_name}: {err.cause!r}") for _ in items]
        if pid != device.pid:
            # Ray restarted the actor before this lane noticed: it holds no keys yet, so these results
            # are refusals; as a crash, the items go to a device again once `restart` reloaded this one.
            log.warning("device %s was restarted by Ray (pid %s, was %s)", device.worker_name, pid, device.pid)
            raise WorkerCrashedError(device.worker_name, None)
        return [self._on_this_clock(device, r) for r in results]

    @staticmethod
    def _on_this_clock(device: RayDevice, result: ItemResult) -> ItemResult:
        shift = device.clock_offset

        def moved(t: float) -> float:
            return t + shift if t else t

        synth = None if result.synth is None else (result.synth[0] + shift, result.synth[1] + shift)
        return replace(result, lock_wait_start=moved(result.lock_wait_start), device_start=moved(result.device_start),
                       device_end=moved(result.device_end), synth=synth)

    def restart(self, device: Device, reason: str, *, force: bool = False) -> None:
        """Wait for Ray to bring the device's actor back (`force`: kill it first, for a device that is
        alive but unusable) and reload its keys (`host.device_restarted`); a device whose node is gone
        is marked lost, and this returns only at shutdown, so that its lanes take no more work."""
        assert isinstance(device, RayDevice)
        with device.restart_lock:
            if device.state == "ready":
                # Restarted by another lane since this lane's call: nothing more to do. Compared by
                # generation, not by asking the actor (a slow reply would count a second failure, and
                # an actor alive but unusable answers as the same process). Every lane that gets here
                # has called `prove`, which records the generation it went to.
                if device.generation != getattr(self._lane_saw, "generation", None):
                    return
                device.failed(reason)
                device.state = "restarting"
                device.usable.clear()
                if force:
                    with contextlib.suppress(Exception):
                        ray.kill(device.actor, no_restart=False)
                log.warning("device %s (node %s): %s; waiting for Ray to restart it", device.worker_name,
                            device.node_address, reason)
                while not self._stop.is_set() and device.state == "restarting":
                    sent = time.monotonic()
                    try:
                        reply = ray.get(device.actor.ready.remote(), timeout=10.0)
                    except (ray.exceptions.GetTimeoutError, ray.exceptions.ActorUnavailableError) as err:
                        if not self._node_alive(device):  # an actor pinned to a dead node never comes back
                            with self._lock:
                                self._lose(device, self._why_lost(device, err))
                            break
                        self._stop.wait(0.5)
                        continue
                    except (ray.exceptions.RayActorError, ray.exceptions.NodeDiedError,
                            ray.exceptions.ActorUnschedulableError, ray.exceptions.RayTaskError) as err:
                        with self._lock:
                            self._lose(device, self._why_lost(device, err))
                        break
                    self._ready(device, reply, sent)
                    log.warning("device %s restarted (pid %s)", device.worker_name, device.pid)
                    if self.host is not None:
                        self.host.device_restarted(device)
                    return
        if device.state == "lost":
            self._stop.wait()

    @staticmethod
    def _node_alive(device: RayDevice) -> bool:
        try:
            return any(n["NodeID"] == device.node_id and n.get("Alive") for n in ray.nodes())
        except Exception:  # the cluster's control service did not answer: no verdict
            return True

    def _why_lost(self, device: RayDevice, err: BaseException) -> str:
        if not self._node_alive(device):
            return f"node {device.node_address} ({device.node_id[:8]}) left the cluster"
        return f"its actor cannot be restarted ({type(err).__name__})"

