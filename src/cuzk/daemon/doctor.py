"""`cuzk doctor`: what a daemon would make of a box and its configuration, before it starts.

Two halves. The checks read this machine: its GPUs, memory and CPU limits (`cuzk.config.host`),
the kernel cache and state directories, every configured key and compiled circuit, the listen
addresses, and the token and TLS files. The plan works from a `Box` (this machine's, or one that
`parse_box` reads from "4x24GiB,256GiB,32cores") and the circuits' shapes alone: per device and key
the device plan a device process would make with the circuits' keys loaded in the order given (each
within what the keys before it leave, `cuzk.backends.cuda.plan.plan_beside`), the host memory it pins,
the synthesis processes and how many partitions the host budget holds at once; then a verdict per
circuit. Every finding names what is wrong and how to fix it; the worst finding sets the exit status
(0 all good, 1 warnings, 2 something that cannot work).

The host memory a plan pins is counted per device process (each pins its own copy of a key's
streamed bases): the streamed bases and the key's witness staging buffer. A compiled circuit's
matrices, pinned where a proof uploads them, come on top (6.1 GB for PoRep-32GiB); the plan does not
know their size without the compiled file, so it leaves them out and weighs the products' place
only as `plan_device` does without them.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from cuzk.config import Config, ConfigError, resolve_config_path
from cuzk.config.host import cpu_limit, memory_available
from cuzk.config.values import GIB, mem_available, parse_size
from cuzk.errors import CuzkError

OK, INFO, WARNING, ERROR = "ok", "info", "warning", "error"
_RANK = {OK: 0, INFO: 0, WARNING: 1, ERROR: 2}
#: What `--box` plans for when the configuration preloads nothing: PoRep, both PoSt kinds, SnapDeals.
DEFAULT_CIRCUITS = ("porep-32g", "wpost-32g", "winning-32g", "snap-32g")
#: Free space the state directory should keep: the journal holds each queued job's inputs (a PoRep
#: C1 output is 50-200 MB) until it finishes.
STATE_DIR_MIN_FREE = 10 * GIB
#: A worker process's resident memory before its first partition (the daemon measures it at start).
PROCESS_BYTES = 512 << 20


@dataclass(frozen=True)
class Finding:
    level: str  #: ok, info, warning or error
    topic: str
    message: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.level.upper():<8}{self.topic}: {self.message}" + (f" -> fix: {self.fix}" if self.fix else "")


@dataclass(frozen=True)
class Gpu:
    ordinal: int
    name: str
    memory: int  #: total bytes


@dataclass(frozen=True)
class Box:
    """A machine as the plan sees it."""

    gpus: tuple[Gpu, ...]
    memory: int  #: bytes the daemon may take before the safety margin (MemAvailable or a cgroup's room)
    memory_source: str
    cpus: int
    cpus_source: str
    described: bool = False  #: from --box, not probed

    def text(self) -> str:
        groups: dict[str, int] = {}
        for g in self.gpus:
            name = f"{g.memory / GIB:g} GiB" if self.described else f"{g.name} {g.memory / GIB:.1f} GiB"
            groups[name] = groups.get(name, 0) + 1
        cards = ", ".join(f"{n} x {name}" for name, n in groups.items()) or "no GPU"
        return (f"{len(self.gpus)} GPU(s) ({cards}); {self.memory / GIB:.1f} GiB of host memory "
                f"({self.memory_source}); {self.cpus} CPUs ({self.cpus_source})")


_TERM = re.compile(r"^(?:(\d+)\s*x\s*)?(\d+(?:\.\d+)?\s*[A-Za-z]*)$")


def parse_box(spec: str) -> Box:
    """A machine from "4x24GiB,256GiB,32cores": any number of "NxSIZE" GPU groups (one card: "1x80GiB"),
    one host memory size, and "Ncores". Raises ConfigError naming the part it cannot read."""
    gpus: list[Gpu] = []
    memory: int | None = None
    cpus: int | None = None
    for raw in spec.split(","):
        part = raw.strip()
        cores = re.fullmatch(r"(\d+)\s*(?:cores?|cpus?)", part, re.IGNORECASE)
        m = _TERM.match(part)
        if cores:
            cpus = int(cores.group(1))
        elif m and m.group(1) is not None:
            size = parse_size(m.group(2), what=f"--box {part!r}")
            gpus += [Gpu(len(gpus) + k, f"{size / GIB:g} GiB card", size) for k in range(int(m.group(1)))]
        elif m:
            memory = parse_size(m.group(2), what=f"--box {part!r}")
        else:
            raise ConfigError(f"--box: {part!r} is neither NxSIZE (GPUs), SIZE (host memory) nor Ncores")
    if memory is None or cpus is None or cpus < 1:
        raise ConfigError(f"--box {spec!r}: give the host memory and the cores, e.g. \"4x24GiB,256GiB,32cores\"")
    return Box(tuple(gpus), memory, "--box", cpus, "--box", described=True)


# -- this machine -------------------------------------------------------------------------------------

def probe_gpus(config: Config) -> tuple[list[Gpu], list[Finding]]:
    """The GPUs this machine has, as CuPy sees them, and what is wrong with that for `config`."""
    from cuzk.engine.devices import cuda_backend_installed, nvidia_gpus

    backend = config.gpus.backend
    found = nvidia_gpus()
    if not found:
        level = {"cpu": INFO, "auto": WARNING}.get(backend, ERROR)
        fix = {"cpu": "", "auto": "install an NVIDIA GPU and driver, or set gpus.backend = \"cpu\" to say the CPU "
               "is meant"}.get(backend, "set gpus.backend = \"cpu\" or \"auto\", or run on a host with a GPU")
        return [], [Finding(level, "gpu", f"no GPU found (nvidia-smi lists none); with gpus.backend = \"{backend}\" "
                            + ("the daemon would not start" if level == ERROR else "proofs run on the CPU, far "
                               "slower (PoRep-32GiB takes hours a proof)"), fix)]
    if backend == "cpu":
        return [], [Finding(INFO, "gpu", f"{len(found)} GPU(s) found but gpus.backend = \"cpu\": they are not used",
                            "set gpus.backend = \"auto\" to prove on them")]
    if not cuda_backend_installed():
        return [], [Finding(ERROR if backend == "cuda" else WARNING, "gpu",
                            f"{len(found)} GPU(s) found but CuPy or the CUDA backend is not installed",
                            "pip install 'cuzk[cuda]' (CuPy for the installed CUDA version)")]
    import cupy

    from cuzk.backends.cuda.device import properties

    gpus, findings = [], []
    driver, runtime = cupy.cuda.runtime.driverGetVersion(), cupy.cuda.runtime.runtimeGetVersion()
    for ordinal in found:
        p = properties(ordinal)
        gpus.append(Gpu(ordinal, p.name, p.total_memory))
        findings.append(Finding(OK, "gpu", f"GPU {ordinal}: {p.name}, {p.total_memory / GIB:.1f} GiB, compute "
                                f"capability {p.compute_capability}"))
    findings.append(Finding(OK, "gpu", f"driver CUDA {driver // 1000}.{driver % 1000 // 10}, runtime "
                            f"{runtime // 1000}.{runtime % 1000 // 10}, CuPy {cupy.__version__}"))
    return gpus, findings


def probe_box(config: Config) -> tuple[Box, list[Finding]]:
    gpus, findings = probe_gpus(config)
    meminfo = mem_available()
    limit = memory_available(meminfo)
    cpus = cpu_limit()
    if limit is None:
        findings.append(Finding(ERROR, "memory", "neither /proc/meminfo nor a cgroup says how much memory is free",
                                "set memory.total_budget to a size"))
        return Box(tuple(gpus), 0, "unknown", cpus.cpus, cpus.source), findings
    total = psutil.virtual_memory().total
    where = f"of {total / GIB:.1f} GiB, " if total else ""
    findings.append(Finding(OK, "memory", f"{limit.available / GIB:.1f} GiB available ({where}{limit.describe()})"))
    if limit.limit is not None:
        findings.append(Finding(INFO, "memory", f"a cgroup limit applies: {limit.source} "
                                f"({limit.limit / GIB:.1f} GiB), below MemAvailable ({(meminfo or 0) / GIB:.1f} GiB)"))
    findings.append(Finding(OK, "cpu", f"{cpus.cpus} CPUs ({cpus.source}; {os.cpu_count()} on the host)"))
    if cpus.source.startswith("cgroup"):
        findings.append(Finding(INFO, "cpu", f"a cgroup CPU quota applies: {cpus.source}; synthesis runs "
                                f"min(pipeline.max_parallel_synthesis, {cpus.cpus}) processes"))
    return Box(tuple(gpus), limit.available, limit.source, cpus.cpus, cpus.source), findings



def check_dirs(config: Config) -> list[Finding]:
    """The kernel cache (where compiled CUDA kernels are kept), the state directory's free space."""
    from cuzk.daemon.state import resolve_state_dir

    findings = []
    if config.gpus.backend != "cpu":
        from cuzk.backends.cuda.module import kernel_cache_dir

        cache = kernel_cache_dir()
        existing = next((p for p in (cache, *cache.parents) if p.exists()), None)
        if existing is None or not os.access(existing, os.W_OK | os.X_OK) or not existing.is_dir():
            findings.append(Finding(WARNING, "kernel cache", f"{cache} cannot be created or written: every device "
                                    "process compiles its kernels again (minutes)",
                                    "set CUZK_KERNEL_CACHE to a writable directory"))
        else:
            there = "present" if cache.is_dir() else "created on first use"
            findings.append(Finding(OK, "kernel cache", f"{cache} ({there})"))
    state = resolve_state_dir(config)
    existing = next((p for p in (state, *state.parents) if p.exists()), Path("/"))
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        findings.append(Finding(ERROR, "state dir", f"{state} cannot be created or written (pid file, journal, logs)",
                                "set daemon.state_dir to a writable directory"))
        return findings
    free = shutil.disk_usage(existing).free
    if free < STATE_DIR_MIN_FREE:
        findings.append(Finding(WARNING, "state dir", f"{state}: {free / GIB:.1f} GiB free; the job journal keeps each "
                                f"queued job's inputs", f"keep at least {STATE_DIR_MIN_FREE / GIB:.0f} GiB free there"))
    else:
        findings.append(Finding(OK, "state dir", f"{state}: {free / GIB:.1f} GiB free"))
    return findings


def _readable(path: Path) -> str | None:
    """Why `path` cannot be read as a file, or None."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            return "is not a regular file"
        with open(path, "rb") as f:
            f.read(1)
    except OSError as err:
        return err.strerror or str(err)
    return None


def check_keys(config: Config, circuits: list[str]) -> list[Finding]:
    """Each circuit's `.params` (present, readable, the size its shape says) and compiled circuit."""
    from cuzk.engine.compiled_store import CompiledState, CompiledStore
    from cuzk.providers import build_providers

    providers = build_providers(config.srs.param_cache, test_circuits=config.debug.test_circuits)
    store = CompiledStore(Path(config.srs.param_cache) / "compiled")
    findings = []
    for cid in circuits:
        preloaded = cid in config.srs.preload
        missing_level = ERROR if preloaded else WARNING
        consequence = "the daemon would not start (srs.preload)" if preloaded else "its jobs would fail"
        try:
            source = providers.srs_source(cid)
        except CuzkError as err:  # an unknown id: the registry's message names the known ones
            findings.append(Finding(ERROR, f"key {cid}", str(err), "fix srs.preload or --circuit"))
            continue
        path, expected = source.path, _params_size(cid)
        if source.generator is not None and not path.exists():
            findings.append(Finding(INFO, f"key {cid}", f"{path} is absent: test parameters are generated at "
                                    "first use"))
            continue
        if not path.exists():
            findings.append(Finding(missing_level, f"key {cid}", f"{path} is missing: {consequence}",
                                    "fetch the v28 .params and .vk files into srs.param_cache "
                                    "(e.g. `curio fetch-params 32GiB`)"))
            continue
        why = _readable(path)
        if why is not None:
            findings.append(Finding(missing_level, f"key {cid}", f"{path} {why}: {consequence}",
                                    "make it a readable regular file for the daemon's user"))
            continue
        size = path.stat().st_size
        if expected is not None and size != expected:
            findings.append(Finding(ERROR, f"key {cid}", f"{path} has {size:,} bytes; the circuit's shape needs "
                                    f"{expected:,} (truncated, or made for another circuit)",
                                    f"fetch it again; `cuzk params check {path} {cid}` names the lengths that differ"))
            continue
        findings.append(Finding(OK, f"key {cid}", f"{path} ({size / GIB:.2f} GiB)"))
        if config.synthesis.compiled != "off":
            status = store.status(cid)
            if status.state is CompiledState.READY:
                size = (status.file_bytes or 0) / GIB
                findings.append(Finding(OK, f"compiled {cid}", f"{status.path} ({size:.2f} GiB)"))
            elif status.state is CompiledState.STALE:
                findings.append(Finding(WARNING, f"compiled {cid}", f"{status.path} cannot be used: {status.error}",
                                        f"cuzk circuit compile {cid} --param-cache {config.srs.param_cache}"))
            elif config.synthesis.compiled == "use" and _large(cid):
                findings.append(Finding(WARNING, f"compiled {cid}", f"{status.path} is absent: partitions synthesize "
                                        "through the constraint system (215 GB a PoRep-32GiB partition)",
                                        f"cuzk circuit compile {cid} --param-cache {config.srs.param_cache}, or "
                                        "synthesis.compiled = \"build\""))
    return findings


def _shape(cid: str) -> Any:
    from cuzk.circuits.filecoin.shapes import KNOWN_SHAPES

    return KNOWN_SHAPES.get(cid)


def _params_size(cid: str) -> int | None:
    from cuzk.groth16.formats.params_shape import ExpectedParamsLayout

    shape = _shape(cid)
    return None if shape is None else ExpectedParamsLayout.of_shape(shape).params_file_size


def _large(cid: str) -> bool:
    shape = _shape(cid)
    return shape is not None and shape.num_constraints > 1 << 24


def check_addresses(config: Config) -> list[Finding]:
    """Each listen address free (binding it), a unix socket's directory writable; token and TLS files."""
    from cuzk.server.address import tcp_bind_error, unix_path, unix_socket_state
    from cuzk.server.auth import read_token_file

    findings = []
    d = config.daemon
    for what, addr in [*(("daemon.listen", a) for a in d.listen),
                       *((("daemon.status_listen", d.status_listen),) if d.status_listen else ())]:
        path = unix_path(addr)
        if path is not None:
            parent = next((p for p in path.parents if p.exists()), Path("/"))
            try:
                state = unix_socket_state(path)
            except OSError:  # a file where a directory of the path should be
                state = "absent"
            if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
                findings.append(Finding(ERROR, what, f"{addr}: cannot create the socket in {parent}",
                                        f"make {path.parent} a directory the daemon's user can write"))
            elif state == "live":
                findings.append(Finding(ERROR, what, f"{addr}: another process listens there",
                                        "stop it (`cuzk daemon stop`), or choose another path"))
            elif state == "not-socket":
                findings.append(Finding(ERROR, what, f"{addr}: {path} exists and is not a socket",
                                        "remove it or choose another path"))
            else:
                findings.append(Finding(OK, what, f"{addr} free" + (" (a stale socket file is removed at start)"
                                                                   if state == "stale" else "")))
            continue
        err = tcp_bind_error(addr)
        if err is not None:
            findings.append(Finding(ERROR, what, f"{addr}: cannot listen: {err.strerror or err}",
                                    "stop what holds it (`ss -ltnp`), or choose another port"))
        else:
            findings.append(Finding(OK, what, f"{addr} free"))
    for what in ("auth_token_file", "admin_token_file"):
        value = getattr(d, what)
        if value:
            try:
                read_token_file(resolve_config_path(config, value), f"daemon.{what}")
                findings.append(Finding(OK, f"daemon.{what}", f"{resolve_config_path(config, value)} readable"))
            except ConfigError as err:
                findings.append(Finding(ERROR, f"daemon.{what}", str(err).removeprefix(f"daemon.{what}: "),
                                        "a regular file of one token, mode 0600, owned by the daemon's user"))
    for what in ("tls_cert_file", "tls_key_file", "tls_client_ca_file"):
        value = getattr(d, what)
        if value:
            path = resolve_config_path(config, value)
            why = _readable(path)
            findings.append(Finding(OK, f"daemon.{what}", f"{path} readable") if why is None else
                            Finding(ERROR, f"daemon.{what}", f"{path} {why}", "point it at a readable PEM file"))
    return findings


# -- the plan ------------------------------------------------------------------------------------------

@dataclass
class KeyPlan:
    """One key on one device."""

    circuit_id: str
    device: str
    budget: int  #: device bytes the plan may use
    mode: str  #: resident, streaming, refused or cpu
    resident: list[str] = field(default_factory=list)
    batch: int | None = None
    device_bytes: int = 0  #: resident bases + the largest proof reserve
    streamed_bytes: int = 0  #: bases over the link each proof
    pinned_bytes: int = 0  #: host memory this device process pins for the key
    why: str = ""
    beside: list[str] = field(default_factory=list)  #: keys planned before it on the device, which it plans around
    resident_bytes: int = 0  #: its resident bases
    reserve: int = 0  #: the most one proof holds at once besides them


@dataclass
class CircuitVerdict:
    circuit_id: str
    level: str
    message: str
    fix: str = ""
    synthesis_processes: int = 0
    partition_bytes: int = 0
    partitions_at_once: int = 0
    pinned_bytes: int = 0


def _devices(config: Config, box: Box) -> list[tuple[str, int | None]]:
    """(label, device budget) of each device the daemon would run; None budget: a CPU device."""
    from cuzk.backends.cuda.device import available_bytes, default_margin, shared_limit
    from cuzk.backends.cuda.plan import CONTEXT_BYTES

    if config.gpus.backend == "cpu" or not box.gpus:
        return [(f"cpu{k}", None) for k in (config.gpus.devices or [0])] if config.gpus.backend == "cpu" \
            else [("cpu0", None)]
    by_ordinal = {g.ordinal: g for g in box.gpus}
    ordinals = config.gpus.devices or [g.ordinal for g in box.gpus]
    out = []
    for index, ordinal in enumerate(ordinals):
        gpu = by_ordinal.get(ordinal)
        if gpu is None:
            raise ConfigError(f"gpus.devices names GPU {ordinal}, which this box does not have "
                              f"(it has {', '.join(str(o) for o in by_ordinal)})")
        # As the device process plans it on a card the CUDA context already took from, nothing held yet.
        limit = shared_limit(config.gpus.memory_limit_for(index), gpu.memory, ordinals.count(ordinal))
        budget = available_bytes(gpu.memory - CONTEXT_BYTES, default_margin(gpu.memory), limit)
        slot = ordinals[:index].count(ordinal)
        out.append((f"cuda{ordinal}" + (f".{slot}" if slot else ""), budget))
    return out


def plan_key(cid: str, label: str, budget: int | None, beside: list[KeyPlan] | None = None) -> KeyPlan:
    """The key's plan on device `label` of `budget` bytes, beside the keys `beside` already there."""
    from cuzk.backends.cuda.plan import DeviceTooSmallError, KeyShape, plan_beside
    from cuzk.groth16.formats.params_shape import domain_size_for

    s = _shape(cid)
    domain = domain_size_for(s.num_constraints)
    shape = KeyShape(domain=domain, inputs=s.num_inputs, aux=s.num_aux, h=domain - 1, l=s.num_aux,
                     a=s.a_query_len, b_g1=s.b_query_len, b_g2=s.b_query_len)
    if budget is None:
        return KeyPlan(cid, label, 0, "cpu", pinned_bytes=0, why="proven on the CPU: the key decoded in host memory")
    others = [k for k in beside or () if k.mode in ("resident", "streaming")]
    names = [k.circuit_id for k in others]
    try:
        plan = plan_beside(shape, budget, [(k.resident_bytes, k.reserve) for k in others])
    except DeviceTooSmallError as err:
        return KeyPlan(cid, label, budget, "refused", why=str(err) + (f" beside {', '.join(names)}" if names else ""),
                       beside=names)
    pinned = 0 if plan.mode == "resident" else plan.streamed_bytes(shape) + shape.witness_bytes
    resident = plan.resident_bytes(shape)
    return KeyPlan(cid, label, budget, plan.mode, list(plan.resident), plan.batch, resident + plan.reserve,
                   plan.streamed_bytes(shape), pinned, beside=names, resident_bytes=resident, reserve=plan.reserve)


def plan_box(config: Config, box: Box, circuits: list[str], *,
             compiled_ready: dict[str, bool] | None = None) -> tuple[list[KeyPlan], list[CircuitVerdict]]:
    """Per device and key the plan, and per circuit the verdict, for `box` under `config`.
    `compiled_ready`: per circuit whether its compiled circuit is there (default: assumed so)."""
    from cuzk.backends.cuda.plan import format_gib
    from cuzk.circuits.registry import lookup
    from cuzk.engine.memory import PartitionEstimate

    devices = _devices(config, box)
    gpu = all(b is not None for _, b in devices)
    synth = max(1, min(config.pipeline.max_parallel_synthesis or 18, box.cpus))
    if config.memory.total_budget is not None:
        host_budget = config.memory.total_budget
    else:
        host_budget = max(0, box.memory - config.memory.safety_margin)
    baseline = (synth + 2 + len(devices)) * PROCESS_BYTES  # synthesis (+1 for CRITICAL work), devices, daemon
    plans: list[KeyPlan] = []
    verdicts: list[CircuitVerdict] = []
    on_device: dict[str, list[KeyPlan]] = {label: [] for label, _ in devices}
    for cid in circuits:
        shape = _shape(cid)
        if shape is None:
            try:
                lookup(cid)
            except CuzkError as err:
                verdicts.append(CircuitVerdict(cid, ERROR, str(err), "name a circuit `cuzk circuit list` shows"))
                continue
            verdicts.append(CircuitVerdict(cid, INFO, "a test circuit: not planned (its keys are tiny)"))
            continue
        keys = [plan_key(cid, label, budget, on_device[label]) for label, budget in devices]
        for k in keys:
            on_device[k.device].append(k)
        plans += keys
        ready = (compiled_ready or {}).get(cid, True) and config.synthesis.compiled != "off"
        sparse_on_prover = config.synthesis.sparse_products == "prover" or (
            config.synthesis.sparse_products == "auto" and gpu)
        estimate = (PartitionEstimate.compiled(shape, products_on_prover=sparse_on_prover, device_prover=gpu,
                                               batched_witness=True) if ready
                    else PartitionEstimate.from_shape(shape))
        working = [k for k in keys if k.mode != "refused"]
        key_host = sum(k.pinned_bytes for k in working)
        if not gpu:
            key_host = _params_size(cid) or 0
        room = host_budget - baseline - key_host
        at_once = max(0, room // estimate.total) if estimate.total else 0
        v = CircuitVerdict(cid, OK, "", synthesis_processes=synth, partition_bytes=estimate.total,
                           partitions_at_once=int(at_once), pinned_bytes=key_host)
        if not working:
            v.level, v.message = ERROR, f"no device can hold the key: {keys[0].why}"
            v.fix = "a card with more memory, or a larger gpus.memory_limit"
        elif room < estimate.total:
            held = (f"the pinned host copies of the key ({format_gib(key_host)}, one per device process)" if gpu
                    else f"the key ({format_gib(key_host)})")
            v.level = ERROR
            v.message = (f"{held}, the processes ({format_gib(baseline)}) and one partition "
                         f"({format_gib(estimate.total)}{'' if ready else ', without a compiled circuit'}) do not "
                         f"fit the host budget ({format_gib(host_budget)})")
            v.fix = ("more host memory (or a looser cgroup limit)" + (", fewer devices for this key" if gpu else "")
                     + ("" if ready else f", or compile the circuit (`cuzk circuit compile {cid}`)"))
        else:
            refused = [k.device for k in keys if k.mode == "refused"]
            parts = []
            if refused:
                why = next(k.why for k in keys if k.mode == "refused")
                parts.append(f"{', '.join(refused)} cannot hold the key ({why}); the other devices prove it")
            # A device stays busy when one partition is proven while the next one synthesizes.
            if at_once < 2 * len(working):
                parts.append(f"{at_once} partition(s) of {format_gib(estimate.total)} fit the host budget at once "
                             f"beside the keys' host copies, fewer than two per device: the devices wait for "
                             "synthesis")
            if synth < len(working):
                parts.append(f"{synth} synthesis process(es) for {len(working)} device(s)")
            if parts:
                v.level, v.message = WARNING, "; ".join(parts)
                v.fix = "more host memory or cores (or fewer devices for this key)"
            else:
                modes = sorted({k.mode for k in working})
                v.message = (f"{len(working)} device(s) {'/'.join(modes)}, {min(at_once, 999)} partition(s) of "
                             f"{format_gib(estimate.total)} fit at once, {synth} synthesis process(es)")
        verdicts.append(v)
    return plans, verdicts


# -- all of it --------------------------------------------------------------------------------------------

@dataclass
class Report:
    box: Box
    findings: list[Finding]
    plans: list[KeyPlan]
    verdicts: list[CircuitVerdict]

    @property
    def exit_status(self) -> int:
        levels = [f.level for f in self.findings] + [v.level for v in self.verdicts]
        return max((_RANK[level] for level in levels), default=0)

    def to_json(self) -> dict[str, Any]:
        return {"box": asdict(self.box), "findings": [asdict(f) for f in self.findings],
                "plans": [asdict(p) for p in self.plans], "verdicts": [asdict(v) for v in self.verdicts],
                "exit_status": self.exit_status}


def circuits_for(config: Config, named: list[str]) -> list[str]:
    """What to check and plan: the circuits named, else those preloaded, else `DEFAULT_CIRCUITS`."""
    return list(dict.fromkeys(named or config.srs.preload or DEFAULT_CIRCUITS))


def diagnose(config: Config, *, box: Box | None = None, circuits: list[str] | None = None) -> Report:
    """This machine checked against `config` and planned (`box` None), or `box` planned alone."""
    from cuzk.engine.compiled_store import CompiledState, CompiledStore

    ids = circuits_for(config, circuits or [])
    findings: list[Finding] = []
    if box is None:
        box, findings = probe_box(config)
        findings += check_dirs(config) + check_keys(config, ids) + check_addresses(config)
        store = CompiledStore(Path(config.srs.param_cache) / "compiled")
        ready = {cid: store.status(cid).state is CompiledState.READY for cid in ids}
    else:
        ready = None
    if config.memory.total_budget is not None and config.memory.total_budget > box.memory:
        findings.append(Finding(WARNING, "memory", f"memory.total_budget ({config.memory.total_budget / GIB:.1f} GiB) "
                                f"is more than the box has free ({box.memory / GIB:.1f} GiB, {box.memory_source}): "
                                "the OOM killer, not the budget, would stop it",
                                "memory.total_budget = \"auto\", or a size within the limit"))
    plans, verdicts = plan_box(config, box, ids, compiled_ready=ready)
    return Report(box, findings, plans, verdicts)
