"""The daemon's TOML configuration: the Rust cuzk daemon's sections and keys, strictly checked.

Every key the Rust daemon reads is accepted with the same meaning and default, and each one has an
effect (what differs from the Rust daemon: docs/compatibility.md §2). Keys it never had are marked
"cuzk-py" below. Nothing is silently wrong: an unknown section or key, a
value of the wrong type, a size or duration that does not parse, or a missing config file that was
named explicitly is a `ConfigError` naming the file and `section.key`.

Sizes: integer bytes, or a number with B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB
(powers of 1024), e.g. "5GiB", "1.5 TB". Durations: integer seconds, or number+unit groups with
ms, s, m, h, d, e.g. "5m", "300s", "1h30m".

`Config.fingerprint()` hashes the settings as written (with "auto" kept symbolic), so two daemons
started from equivalent files share a fingerprint whatever the machine's free memory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuzk.errors import CuzkError

DEFAULT_CONFIG_PATH = Path("/data/zk/cuzk.toml")
DEFAULT_LISTEN = "unix:///run/curio/cuzk.sock"
GIB = 1 << 30
MIB = 1 << 20

_SIZE_UNITS = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")
LOG_LEVELS = ("trace", "debug", "info", "warn", "warning", "error")
LOG_FORMATS = ("text", "json")
DISCONNECT_POLICIES = ("finish", "cancel")
RESTART_POLICIES = ("requeue", "fail")
BACKENDS = ("auto", "cpu", "cuda")
COMPILED_MODES = ("off", "use", "build")
SPARSE_PRODUCTS = ("auto", "synthesis", "prover")
DEVICE_WITNESS = ("off", "on")
EXECUTOR_KINDS = ("local", "ray")
DEVICE_MODES = ("latency", "throughput")


class ConfigError(CuzkError):
    """A configuration value, key or file that cannot be used; the message names it."""


def parse_size(text: str | int, *, what: str) -> int:
    """Bytes from "5GiB", "500 MB", "1048576" or an int; `what` names the setting in errors."""
    if isinstance(text, bool):
        raise ConfigError(f"{what}: expected a size such as \"5GiB\", got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ConfigError(f"{what}: a size cannot be negative, got {text}")
        return text
    if not isinstance(text, str):
        raise ConfigError(f"{what}: expected a size such as \"5GiB\", got {text!r}")
    m = _SIZE_RE.match(text)
    unit = m.group(2).lower() if m else ""
    if not m or (unit and unit not in _SIZE_UNITS):
        raise ConfigError(f"{what}: {text!r} is not a size (use bytes or a number with B, KB, MB, GB, TB, "
                          "KiB, MiB, GiB or TiB, e.g. \"5GiB\")")
    return int(float(m.group(1)) * _SIZE_UNITS[unit or "b"])


def parse_duration(text: str | int | float, *, what: str) -> float:
    """Seconds from "5m", "300s", "1h30m", "250ms" or a bare number of seconds."""
    if isinstance(text, bool):
        raise ConfigError(f"{what}: expected a duration such as \"5m\", got {text!r}")
    if isinstance(text, int | float):
        if text < 0 or not math.isfinite(text):
            raise ConfigError(f"{what}: a duration must be a non-negative number of seconds, got {text}")
        return float(text)
    if not isinstance(text, str):
        raise ConfigError(f"{what}: expected a duration such as \"5m\", got {text!r}")
    s = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", s):
        return float(s)
    compact = s.replace(" ", "")
    parts = _DURATION_PART_RE.findall(compact)
    if not parts or "".join(n + u for n, u in parts) != compact:
        raise ConfigError(f"{what}: {text!r} is not a duration (use seconds or number+unit groups with ms, s, m, "
                          "h, d, e.g. \"5m\" or \"1h30m\")")
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


def format_size(n: int) -> str:
    """The shortest exact binary-unit spelling (for `config show`)."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def format_duration(seconds: float) -> str:
    if seconds and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


def mem_available() -> int | None:
    """MemAvailable from /proc/meminfo (what can be allocated without swapping), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# -- sections -------------------------------------------------------------------------------------

@dataclass
class DaemonConfig:
    #: gRPC addresses: "host:port" or "unix:///path"; a list listens on several (cuzk-py: list form).
    listen: list[str] = field(default_factory=lambda: [DEFAULT_LISTEN])
    #: HTTP address for GET /status (JSON) and /metrics (Prometheus); "" disables it.
    status_listen: str = ""
    #: cuzk-py: largest gRPC message either way (a request's payload may be 50-200 MB: docs/protocol.md §3).
    max_message_size: int = 256 * MIB
    #: cuzk-py: gRPC handler threads. Each waiting Prove/AwaitProof holds one, so this bounds how
    #: many clients can wait at once while status calls still get through.
    rpc_threads: int = 256
    #: cuzk-py: what happens to a job when every Prove call waiting for it disconnects.
    on_prove_disconnect: str = "finish"
    #: cuzk-py: how long finished jobs stay answerable (AwaitProof, request_id dedupe).
    result_retention: float = 3600.0
    #: cuzk-py: at most this many finished jobs are kept (oldest dropped first).
    max_retained_results: int = 10000
    #: cuzk-py: pid file, job journal and per-instance logs; "" = $XDG_STATE_HOME/cuzk (or
    #: ~/.local/state/cuzk). A relative path is relative to the config file's directory.
    state_dir: str = ""
    #: cuzk-py: on SIGTERM/SIGINT, how long queued and running jobs may still finish before the rest
    #: is cancelled (a second signal aborts at once).
    shutdown_grace: float = 60.0
    #: cuzk-py: jobs the journal shows in flight when a daemon died without finishing them: "requeue"
    #: runs them again (their inputs are kept in the journal until they finish), "fail" answers them
    #: FAILED with the reason (inputs are not kept).
    on_restart: str = "requeue"
    #: cuzk-py: keep the SQLite job journal in state_dir (accepted jobs and finished results survive a
    #: crash or restart); false keeps jobs in memory only.
    journal: bool = True
    #: cuzk-py: jobs waiting to start (queued or collecting into a batch) beyond which SubmitProof/Prove
    #: answer RESOURCE_EXHAUSTED, Curio's backpressure signal; 0 = no limit.
    max_queued_jobs: int = 256
    #: cuzk-py security (docs/security.md). Relative paths are relative to the config file's directory.
    #: A file holding the bearer token TCP clients must send ("authorization: Bearer <token>"); "" = none.
    auth_token_file: str = ""
    #: A file holding the token management calls (PreloadSRS, EvictSRS, cancelling another client's job)
    #: need; "" = management is open to every authenticated client unless admin_client_names is set.
    admin_token_file: str = ""
    #: Client certificate common names (mutual TLS) allowed management calls.
    admin_client_names: list[str] = field(default_factory=list)
    #: Server certificate chain and key (PEM) for TLS on every TCP address; "" = plaintext TCP.
    tls_cert_file: str = ""
    tls_key_file: str = ""
    #: CA bundle (PEM) client certificates must chain to: mutual TLS, a client without one is refused.
    tls_client_ca_file: str = ""
    #: Permissions of unix socket files (octal); the default lets only the daemon's user connect.
    unix_socket_mode: str = "0600"
    #: Also require the token on unix sockets (by default their file permissions are the access control).
    auth_unix: bool = False
    #: Accept a TCP address reachable from other hosts without a token or mutual TLS (refused otherwise).
    allow_insecure_remote: bool = False


@dataclass
class SrsConfig:
    #: Directory of the `.params`/`.vk` files (test-circuit parameters are generated here).
    param_cache: str = "/data/zk/params"
    #: Circuit ids to make hot at startup (docs/compatibility.md §2).
    preload: list[str] = field(default_factory=list)


@dataclass
class MemoryConfig:
    #: Bytes, or None for "auto" = MemAvailable - safety_margin.
    total_budget: int | None = None
    safety_margin: int = 5 * GIB
    #: Seconds an SRS entry must be unused before budget pressure may evict it.
    eviction_min_idle: float = 300.0
    #: Deprecated (replaced by total_budget; docs/compatibility.md §2): accepted with a warning, no effect.
    pinned_budget: int | None = None
    working_memory_budget: int | None = None

    def resolve_budget(self) -> int:
        """The budget in bytes: explicit, or MemAvailable minus the margin (never below zero)."""
        if self.total_budget is not None:
            return self.total_budget
        available = mem_available()
        if available is None:
            raise ConfigError("memory.total_budget = \"auto\" needs /proc/meminfo (MemAvailable); "
                              "set an explicit size instead")
        return max(0, available - self.safety_margin)


@dataclass
class GpusConfig:
    #: Device ordinals; empty = every GPU found (none found: one CPU prover device).
    devices: list[int] = field(default_factory=list)
    #: Threads of each prover process (numba kernels and MSM pool); 0 = all cores.
    gpu_threads: int = 0
    #: Prover workers per device; they share one lock held only around device work.
    gpu_workers_per_device: int = 2
    #: cuzk-py: "auto" (CUDA when GPUs and the CUDA backend are present, else CPU), "cpu" or "cuda".
    backend: str = "auto"
    #: cuzk-py: device memory cuzk plans with and may use, per GPU: "auto" (the card's free memory less
    #: a margin) or a size such as "16GiB" (a cap, enforced: for cards shared with other work, or to
    #: emulate a smaller card); a list gives one value per entry of `devices`. docs/memory.md.
    memory_limit: str | int | list[str | int] = "auto"

    def memory_limit_for(self, index: int) -> int | None:
        """The limit in bytes of the index-th device (None: "auto")."""
        value = self.memory_limit[index] if isinstance(self.memory_limit, list) else self.memory_limit
        return None if value == "auto" else int(value)


@dataclass
class SchedulerConfig:
    #: Jobs of one circuit collected into a batch before planning (1 = no batching).
    max_batch_size: int = 1
    #: How long the first job of a batch waits for others.
    max_batch_wait_ms: int = 10000
    #: Serve NORMAL jobs grouped by circuit (fewer SRS switches), bounded so no job starves.
    #: Default false, so that NORMAL stays strictly FIFO unless asked (docs/compatibility.md §2).
    sort_by_type: bool = False
    #: cuzk-py: how partitions go to several devices: "latency" (every free device takes the next
    #: partition, so one proof's partitions run side by side) or "throughput" (a NORMAL or LOW job
    #: stays on the device that took its first partition; CRITICAL and HIGH jobs always spread).
    device_mode: str = "latency"


@dataclass
class SynthesisConfig:
    #: Threads each synthesis process may use for vector kernels; 0 = cores / synthesis processes.
    threads: int = 0
    #: Deprecated (the budget decides; docs/compatibility.md §2): accepted with a warning, no effect.
    partition_workers: int | None = None
    #: cuzk-py: compiled circuits under <srs.param_cache>/compiled/ (docs/compiled-circuits.md): "use" them
    #: when present, also "build" one in the background on a circuit's first job, or "off".
    compiled: str = "use"
    #: cuzk-py: where a compiled circuit's a = A·w, b = B·w, c = C·w are computed: in the "synthesis"
    #: processes (numba), by the "prover" (its backend: on the GPU with CUDA, so a, b, c never exist in
    #: host memory), or "auto" (the prover when every device is a GPU).
    sparse_products: str = "auto"
    #: cuzk-py: "on": with the products on the prover and every device a GPU, the bulk of a witness
    #: whose circuit defers it (SHA-256 gadgets, Merkle paths: 92-99%) is written on the GPU, the
    #: synthesis process writing the rest (a tenth of the CPU time, ~3% more GPU time a partition: for
    #: hosts whose CPUs cannot keep the GPUs fed; docs/compiled-circuits.md); "off": the synthesis
    #: process writes the whole witness.
    device_witness: str = "off"


@dataclass
class PipelineConfig:
    #: true: partitions flow through synthesis and proving independently, jobs overlap;
    #: false: one job at a time (all its partitions synthesized, then proven), no overlap.
    enabled: bool = True
    #: Jobs that may be in the pipeline beyond one per prover worker (CRITICAL jobs are exempt).
    synthesis_lookahead: int = 1
    #: Jobs planned (payload parsed, parameters loaded) at once.
    synthesis_concurrency: int = 1
    #: Synthesis processes: min(this, cores); 0 means the default.
    max_parallel_synthesis: int = 18
    #: Partitions of one job in synthesis at once; 0 = no limit.
    slot_size: int = 0
    #: Synthesized partitions waiting for a prover (plus those being synthesized) before synthesis
    #: pauses; 0 = no limit.
    max_gpu_queue_depth: int = 0
    #: cuzk-py: verify every partition proof before the job completes.
    verify_proofs: bool = True


@dataclass
class LoggingConfig:
    level: str = "info"
    #: "text" or "json" (one JSON object per line).
    format: str = "text"


@dataclass
class DebugConfig:
    #: cuzk-py: accept test-circuit requests (PROOF_KIND_UNSPECIFIED with a JSON description) and
    #: generate INSECURE parameters for them. Never enable on a production daemon.
    test_circuits: bool = False


@dataclass
class ExecutorConfig:
    #: cuzk-py: where the devices are (docs/ray.md): "local" (a process per device on this host) or
    #: "ray" (an actor per device on every node of a Ray cluster that offers the `GPU` resource, or
    #: the `cuzk_device` custom resource for CPU devices; needs `pip install cuzk[ray]`).
    kind: str = "local"
    #: cuzk-py: with kind = "ray", the cluster to join: "auto" (the cluster this host runs, as `ray
    #: start` left it), "host:port" of its GCS, or a "ray://host:port" client address.
    address: str = "auto"


_SECTIONS: dict[str, type] = {
    "daemon": DaemonConfig, "srs": SrsConfig, "memory": MemoryConfig, "gpus": GpusConfig,
    "scheduler": SchedulerConfig, "synthesis": SynthesisConfig, "pipeline": PipelineConfig,
    "logging": LoggingConfig, "debug": DebugConfig, "executor": ExecutorConfig,
}
_DEPRECATED = {
    ("memory", "pinned_budget"): "memory.pinned_budget is deprecated and has no effect: use memory.total_budget",
    ("memory", "working_memory_budget"):
        "memory.working_memory_budget is deprecated and has no effect: use memory.total_budget",
    ("synthesis", "partition_workers"):
        "synthesis.partition_workers is deprecated and has no effect: the memory budget decides concurrency",
}


@dataclass
class Config:
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    srs: SrsConfig = field(default_factory=SrsConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    gpus: GpusConfig = field(default_factory=GpusConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    synthesis: SynthesisConfig = field(default_factory=SynthesisConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    #: Where it was read from (None: defaults), and the warnings to log once logging is up.
    source: str | None = field(default=None, compare=False)
    warnings: list[str] = field(default_factory=list, compare=False)

    def settings(self) -> dict[str, dict[str, Any]]:
        """The settings as plain TOML-able values, sizes and durations spelled out."""
        out: dict[str, dict[str, Any]] = {}
        for name in _SECTIONS:
            section = getattr(self, name)
            values: dict[str, Any] = {}
            for f in dataclasses.fields(section):
                values[f.name] = _to_plain(name, f.name, getattr(section, f.name))
            out[name] = values
        return out

    def fingerprint(self) -> str:
        """16 hex digits identifying the settings (not the file's formatting or the machine)."""
        canonical = json.dumps(self.settings(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def to_toml(self) -> str:
        lines = []
        for section, values in self.settings().items():
            lines.append(f"[{section}]")
            lines.extend(f"{key} = {_toml_value(value)}" for key, value in values.items() if value is not None)
            lines.append("")
        return "\n".join(lines)


_SIZE_KEYS = {("memory", "total_budget"), ("memory", "safety_margin"), ("memory", "pinned_budget"),
              ("memory", "working_memory_budget"), ("daemon", "max_message_size")}
_DURATION_KEYS = {("memory", "eviction_min_idle"), ("daemon", "result_retention"), ("daemon", "shutdown_grace")}
_PATH_KEYS = {"daemon.auth_token_file", "daemon.admin_token_file", "daemon.tls_cert_file", "daemon.tls_key_file",
              "daemon.tls_client_ca_file"}


def _to_plain(section: str, key: str, value: Any) -> Any:
    if (section, key) == ("memory", "total_budget") and value is None:
        return "auto"
    if (section, key) == ("gpus", "memory_limit"):
        values = value if isinstance(value, list) else [value]
        plain = [v if v == "auto" else format_size(v) for v in values]
        return plain if isinstance(value, list) else plain[0]
    if (section, key) in _SIZE_KEYS and value is not None:
        return format_size(value)
    if (section, key) in _DURATION_KEYS:
        return format_duration(value)
    return value


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


# -- reading --------------------------------------------------------------------------------------

def _expect(kind: type | tuple[type, ...], value: Any, what: str, description: str) -> Any:
    if isinstance(value, bool) and kind is not bool and not (isinstance(kind, tuple) and bool in kind):
        raise ConfigError(f"{what}: expected {description}, got {value!r}")
    if not isinstance(value, kind):
        raise ConfigError(f"{what}: expected {description}, got {value!r}")
    return value


def _non_negative_int(value: Any, what: str, *, minimum: int = 0) -> int:
    _expect(int, value, what, "an integer")
    if value < minimum:
        raise ConfigError(f"{what}: must be >= {minimum}, got {value}")
    return value


def _choice(value: Any, what: str, choices: tuple[str, ...]) -> str:
    _expect(str, value, what, "a string")
    if value.lower() not in choices:
        raise ConfigError(f"{what}: {value!r} is not one of {', '.join(choices)}")
    return value.lower()


def _memory_limit(value: Any, what: str) -> int | str | list[int | str]:
    """"auto", a size, or a list of them (one per device): sizes as bytes, at least 1 GiB."""
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"{what}: an empty list; use \"auto\" or one value per device")
        return [_memory_limit(v, f"{what}[{k}]") for k, v in enumerate(value)]  # type: ignore[misc]
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    size = parse_size(value, what=what)
    if size < 1 << 30:
        raise ConfigError(f"{what}: {value!r} is below 1GiB, too little for any proving key beside a CUDA context")
    return size


def _string_list(value: Any, what: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    _expect(list, value, what, "a string or a list of strings")
    for item in value:
        _expect(str, item, what, "a list of strings")
    return list(value)


def _file_mode(value: Any, what: str) -> str:
    """An octal permission string such as "0600"; sockets others could write to are refused."""
    _expect(str, value, what, "an octal mode string such as \"0600\"")
    if not re.fullmatch(r"0?[0-7]{3}", value.strip()):
        raise ConfigError(f"{what}: {value!r} is not an octal mode such as \"0600\" or \"0660\"")
    if int(value, 8) & 0o002:
        raise ConfigError(f"{what}: {value} would let every local user connect to the socket; at most \"0660\"")
    return value.strip().rjust(4, "0")


def _ray_address(value: Any, what: str) -> str:
    """"auto", "host:port" (a GCS address) or "ray://host:port" (Ray Client)."""
    _expect(str, value, what, "a string")
    text = value.strip()
    if text.lower() == "auto":
        return "auto"
    body = text.removeprefix("ray://")
    host, sep, port = body.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in body:
        raise ConfigError(f"{what}: {value!r} is not a Ray address (use \"auto\", \"host:port\" or "
                          "\"ray://host:port\")")
    return text


def loopback_if_no_host(addr: str) -> str:
    """":9820" means the loopback interface, never every interface: other hosts get in only when named
    ("0.0.0.0:9820"). Unix socket addresses and empty strings are returned as they are."""
    stripped = addr.strip()
    if stripped.startswith(":") and stripped[1:].isdigit():
        return f"127.0.0.1{stripped}"
    return addr


def resolve_config_path(config: Config, value: str) -> Path:
    """A path setting: absolute, ~-expanded, or relative to the config file's directory."""
    path = Path(value).expanduser()
    if not path.is_absolute() and config.source and not config.source.startswith("<"):
        path = Path(config.source).resolve().parent / path
    return path


def _apply(config: Config, section: str, key: str, value: Any) -> None:
    what = f"{section}.{key}"
    target = getattr(config, section)
    if (section, key) in _DEPRECATED:
        config.warnings.append(_DEPRECATED[(section, key)])
    if (section, key) == ("memory", "total_budget"):
        value = None if value == "auto" else parse_size(value, what=what)
    elif (section, key) in _SIZE_KEYS:
        value = parse_size(value, what=what)
    elif (section, key) in _DURATION_KEYS:
        value = parse_duration(value, what=what)
    elif what == "daemon.listen":
        value = _string_list(value, what)
        if not value or any(not v.strip() for v in value):
            raise ConfigError(f"{what}: needs at least one non-empty address")
        value = [loopback_if_no_host(v) for v in value]
    elif what == "daemon.status_listen":
        value = loopback_if_no_host(_expect(str, value, what, "a string"))
    elif what in ("srs.param_cache", "daemon.state_dir") or what in _PATH_KEYS:
        value = _expect(str, value, what, "a string")
    elif what == "daemon.admin_client_names":
        value = _string_list(value, what)
    elif what == "daemon.unix_socket_mode":
        value = _file_mode(value, what)
    elif what == "srs.preload":
        value = _string_list(value, what)
    elif what == "daemon.on_prove_disconnect":
        value = _choice(value, what, DISCONNECT_POLICIES)
    elif what == "daemon.on_restart":
        value = _choice(value, what, RESTART_POLICIES)
    elif what == "gpus.backend":
        value = _choice(value, what, BACKENDS)
    elif what == "scheduler.device_mode":
        value = _choice(value, what, DEVICE_MODES)
    elif what == "gpus.memory_limit":
        value = _memory_limit(value, what)
    elif what == "synthesis.compiled":
        value = _choice(value, what, COMPILED_MODES)
    elif what == "synthesis.sparse_products":
        value = _choice(value, what, SPARSE_PRODUCTS)
    elif what == "synthesis.device_witness":
        value = _choice(value, what, DEVICE_WITNESS)
    elif what == "gpus.devices":
        _expect(list, value, what, "a list of device ordinals")
        value = [_non_negative_int(v, what) for v in value]
    elif what == "executor.kind":
        value = _choice(value, what, EXECUTOR_KINDS)
    elif what == "executor.address":
        value = _ray_address(value, what)
    elif what == "logging.level":
        value = _choice(value, what, LOG_LEVELS)
    elif what == "logging.format":
        value = _choice(value, what, LOG_FORMATS)
    elif isinstance(getattr(target, key), bool):
        value = _expect(bool, value, what, "true or false")
    else:  # integer settings
        minimum = 1 if what in ("daemon.rpc_threads", "gpus.gpu_workers_per_device", "scheduler.max_batch_size",
                                "pipeline.synthesis_concurrency", "daemon.max_retained_results") else 0
        value = _non_negative_int(value, what, minimum=minimum)
    setattr(target, key, value)


def config_from_dict(data: dict[str, Any], *, source: str = "<config>") -> Config:
    """A Config from parsed TOML; unknown sections and keys are errors naming them."""
    config = Config(source=source)
    for section, body in data.items():
        if section not in _SECTIONS:
            raise ConfigError(f"{source}: unknown section [{section}] (known: {', '.join(_SECTIONS)})")
        if not isinstance(body, dict):
            raise ConfigError(f"{source}: [{section}] must be a table")
        known = [f.name for f in dataclasses.fields(_SECTIONS[section])]
        for key, value in body.items():
            if key not in known:
                raise ConfigError(f"{source}: unknown key {section}.{key} (known in [{section}]: {', '.join(known)})")
            try:
                _apply(config, section, key, value)
            except ConfigError as err:
                raise ConfigError(f"{source}: {err}") from None
    if config.daemon.result_retention <= 0:
        raise ConfigError(f"{source}: daemon.result_retention must be positive")
    limits = config.gpus.memory_limit
    if isinstance(limits, list) and len(limits) != len(config.gpus.devices):
        raise ConfigError(f"{source}: gpus.memory_limit lists {len(limits)} value(s) but gpus.devices has "
                          f"{len(config.gpus.devices)}: give one per device, or one value for all")
    return config


def load_config(path: str | os.PathLike | None, *, explicit: bool = True) -> Config:
    """Read `path`; a missing file is an error when `explicit`, else the defaults (with a warning)."""
    if path is None:
        return Config()
    p = Path(path)
    if not p.is_file():
        if explicit:
            raise ConfigError(f"config file {p} does not exist")
        config = Config()
        config.warnings.append(f"config file {p} not found: using the defaults")
        return config
    try:
        data = tomllib.loads(p.read_text())
    except (ValueError, RecursionError) as err:  # TOMLDecodeError, bad UTF-8, over-long numbers, deep nesting
        raise ConfigError(f"{p}: not valid TOML: {err}") from None
    except OSError as err:
        raise ConfigError(f"{p}: cannot read: {err.strerror}") from None
    return config_from_dict(data, source=str(p))
