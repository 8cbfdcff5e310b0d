"""The configuration file: every section together (`Config`), read from TOML strictly (unknown
sections and keys, wrong types and values are errors naming the file and `section.key`) and written
back (`Config.to_toml`, `config show`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuzk.config.daemon import (
    DISCONNECT_POLICIES,
    LOG_FORMATS,
    LOG_LEVELS,
    RESTART_POLICIES,
    DaemonConfig,
    LoggingConfig,
    file_mode,
    loopback_if_no_host,
)
from cuzk.config.engine import (
    BACKENDS,
    COMPILED_MODES,
    DEVICE_MODES,
    DEVICE_WITNESS,
    EXECUTOR_KINDS,
    SPARSE_PRODUCTS,
    DebugConfig,
    ExecutorConfig,
    GpusConfig,
    MemoryConfig,
    PipelineConfig,
    SchedulerConfig,
    SrsConfig,
    SynthesisConfig,
    memory_limit_value,
    ray_address,
)
from cuzk.config.values import (
    ConfigError,
    choice,
    expect,
    format_duration,
    format_size,
    non_negative_int,
    parse_duration,
    parse_size,
    string_list,
)

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
    if (section, key) == ("gpus", "emulate"):
        return [format_size(v) for v in value]
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

#: Settings that take one of a few words, and the words.
_CHOICES = {
    "daemon.on_prove_disconnect": DISCONNECT_POLICIES,
    "daemon.on_restart": RESTART_POLICIES,
    "gpus.backend": BACKENDS,
    "scheduler.device_mode": DEVICE_MODES,
    "synthesis.compiled": COMPILED_MODES,
    "synthesis.sparse_products": SPARSE_PRODUCTS,
    "synthesis.device_witness": DEVICE_WITNESS,
    "executor.kind": EXECUTOR_KINDS,
    "logging.level": LOG_LEVELS,
    "logging.format": LOG_FORMATS,
}


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
        value = string_list(value, what)
        if not value or any(not v.strip() for v in value):
            raise ConfigError(f"{what}: needs at least one non-empty address")
        value = [loopback_if_no_host(v) for v in value]
    elif what == "daemon.status_listen":
        value = loopback_if_no_host(expect(str, value, what, "a string"))
    elif what in ("srs.param_cache", "daemon.state_dir") or what in _PATH_KEYS:
        value = expect(str, value, what, "a string")
    elif what == "daemon.admin_client_names":
        value = string_list(value, what)
    elif what == "daemon.unix_socket_mode":
        value = file_mode(value, what)
    elif what == "srs.preload":
        value = string_list(value, what)
    elif what in _CHOICES:
        value = choice(value, what, _CHOICES[what])
    elif what == "gpus.memory_limit":
        value = memory_limit_value(value, what)
    elif what == "gpus.emulate":
        expect(list, value, what, "a list of card sizes such as [\"4GiB\"]")
        value = [parse_size(v, what=f"{what}[{k}]") for k, v in enumerate(value)]
        if any(v < 64 << 20 for v in value):
            raise ConfigError(f"{what}: an emulated card needs at least 64MiB")
    elif what == "gpus.devices":
        expect(list, value, what, "a list of device ordinals")
        value = [non_negative_int(v, what) for v in value]
    elif what == "executor.address":
        value = ray_address(value, what)
    elif isinstance(getattr(target, key), bool):
        value = expect(bool, value, what, "true or false")
    else:  # integer settings
        minimum = 1 if what in ("daemon.rpc_threads", "gpus.gpu_workers_per_device", "scheduler.max_batch_size",
                                "pipeline.synthesis_concurrency", "daemon.max_retained_results") else 0
        value = non_negative_int(value, what, minimum=minimum)
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
    if config.gpus.emulate and config.gpus.backend != "cuda":
        raise ConfigError(f"{source}: gpus.emulate needs gpus.backend = \"cuda\" (emulated cards are a development "
                          f"and test device, never chosen by \"{config.gpus.backend}\")")
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
