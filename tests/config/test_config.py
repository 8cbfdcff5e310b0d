"""The daemon configuration: Rust defaults, strict errors that name the setting, fingerprints, `config show`."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from cuzk.cli.main import main
from cuzk.config import Config, ConfigError, config_from_dict, host, load_config, parse_duration, parse_size
from cuzk.config import engine as cfg


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_defaults_are_the_rust_daemons() -> None:
    c = Config()
    assert c.daemon.listen == ["unix:///run/curio/cuzk.sock"] and c.daemon.status_listen == ""
    assert c.srs.param_cache == "/data/zk/params"
    assert c.memory.total_budget is None and c.memory.safety_margin == 5 << 30 and c.memory.eviction_min_idle == 300
    assert c.gpus.devices == [] and c.gpus.gpu_threads == 0 and c.gpus.gpu_workers_per_device == 2
    assert c.scheduler.max_batch_size == 1 and c.scheduler.max_batch_wait_ms == 10000
    assert c.synthesis.threads == 0
    p = c.pipeline
    assert (p.enabled, p.synthesis_lookahead, p.synthesis_concurrency, p.max_parallel_synthesis, p.slot_size,
            p.max_gpu_queue_depth) == (True, 1, 1, 18, 0, 0)
    assert c.logging.level == "info" and not c.debug.test_circuits


@pytest.mark.parametrize(("text", "expected"), [
    ("5GiB", 5 << 30), ("626MiB", 626 << 20), ("500 MB", 500 * 10**6), ("1TiB", 1 << 40), ("1.5GB", 1_500_000_000),
    ("1048576", 1 << 20), (4096, 4096), ("2kib", 2048),
])
def test_sizes(text: str | int, expected: int) -> None:
    assert parse_size(text, what="x") == expected


@pytest.mark.parametrize("text", ["512G", "lots", "-5GiB", "", "5 GiBs", True, -1, 1.5])
def test_bad_sizes_name_the_setting(text: object) -> None:
    with pytest.raises(ConfigError, match=r"memory\.total_budget"):
        parse_size(text, what="memory.total_budget")  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "expected"), [
    ("5m", 300), ("300s", 300), ("60", 60), ("1h30m", 5400), ("250ms", 0.25), ("0s", 0), (2, 2.0),
])
def test_durations(text: str | int, expected: float) -> None:
    assert parse_duration(text, what="x") == expected


@pytest.mark.parametrize("text", ["5 minutes", "m5", "1x", "-3s", "", "5m5"])
def test_bad_durations_name_the_setting(text: str) -> None:
    with pytest.raises(ConfigError, match=r"memory\.eviction_min_idle"):
        parse_duration(text, what="memory.eviction_min_idle")


@pytest.mark.parametrize(("data", "message"), [
    ({"memory": {"totl_budget": "5GiB"}}, r"unknown key memory\.totl_budget"),
    ({"gpu": {}}, r"unknown section \[gpu\]"),
    ({"memory": {"total_budget": "512G"}}, r"memory\.total_budget: '512G' is not a size"),
    ({"memory": {"eviction_min_idle": "soon"}}, r"memory\.eviction_min_idle: 'soon' is not a duration"),
    ({"gpus": {"devices": [0, -1]}}, r"gpus\.devices: must be >= 0"),
    ({"gpus": {"gpu_workers_per_device": 0}}, r"gpus\.gpu_workers_per_device: must be >= 1"),
    ({"pipeline": {"enabled": "yes"}}, r"pipeline\.enabled: expected true or false"),
    ({"scheduler": {"max_batch_size": True}}, r"scheduler\.max_batch_size: expected an integer"),
    ({"logging": {"format": "xml"}}, r"logging\.format: 'xml' is not one of text, json"),
    ({"daemon": {"listen": []}}, r"daemon\.listen: needs at least one"),
    ({"daemon": {"on_prove_disconnect": "ignore"}}, r"daemon\.on_prove_disconnect"),
    ({"memory": 5}, r"\[memory\] must be a table"),
])
def test_config_errors_name_file_and_key(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        config_from_dict(data, source="/etc/cuzk.toml")
    assert str(info.value).startswith("/etc/cuzk.toml: ")


def test_a_missing_file_is_an_error_only_when_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml", explicit=True)
    c = load_config(tmp_path / "nope.toml", explicit=False)
    assert c == Config() and "not found" in c.warnings[0]


def test_invalid_toml_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[memory\ntotal_budget = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path)


def test_deprecated_keys_are_accepted_with_warnings() -> None:
    c = config_from_dict({"memory": {"pinned_budget": "50GiB", "working_memory_budget": "80GiB"},
                          "synthesis": {"partition_workers": 12}, "srs": {"preload": ["porep-32g"]}})
    assert len(c.warnings) == 3 and all("deprecated" in w for w in c.warnings)
    assert c.srs.preload == ["porep-32g"]  # honoured: preloaded at startup


def test_auto_budget_uses_mem_available(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(host, "ROOT", tmp_path)  # no cgroup limit, whatever the machine running the test has
    monkeypatch.setattr(cfg, "mem_available", lambda: 20 << 30)
    assert config_from_dict({"memory": {"safety_margin": "4GiB"}}).memory.resolve_budget() == 16 << 30
    assert config_from_dict({"memory": {"total_budget": "3GiB"}}).memory.resolve_budget() == 3 << 30
    monkeypatch.setattr(cfg, "mem_available", lambda: None)
    with pytest.raises(ConfigError, match="MemAvailable"):
        Config().memory.resolve_budget()


def test_fingerprint_tracks_settings_not_spelling() -> None:
    a = config_from_dict({"memory": {"total_budget": "4GiB", "eviction_min_idle": "5m"}})
    b = config_from_dict({"memory": {"total_budget": 4 << 30, "eviction_min_idle": 300}})
    c = config_from_dict({"memory": {"total_budget": "5GiB"}})
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    assert len(a.fingerprint()) == 16


def test_toml_round_trip() -> None:
    c = config_from_dict({"daemon": {"listen": "0.0.0.0:9820"}, "memory": {"total_budget": "256GiB"},
                          "gpus": {"devices": [0, 1]}, "debug": {"test_circuits": True}})
    again = config_from_dict(tomllib.loads(c.to_toml()))
    assert again.settings() == c.settings() and again.fingerprint() == c.fingerprint()


def test_config_show(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "cuzk.toml"
    path.write_text('[memory]\ntotal_budget = "3GiB"\n[daemon]\nlisten = "127.0.0.1:9820"\n')
    code, out, _ = run_cli(capsys, "config", "show", "--config", str(path))
    expected = load_config(path).fingerprint()
    assert code == 0 and f"# fingerprint: {expected}" in out
    body = tomllib.loads(out)
    assert body["memory"]["total_budget"] == "3GiB" and body["daemon"]["listen"] == ["127.0.0.1:9820"]
    code, out, _ = run_cli(capsys, "config", "show", "--config", str(path), "--json")
    data = json.loads(out)
    assert code == 0 and data["fingerprint"] == expected and data["resolved"]["memory_budget_bytes"] == 3 << 30
    path.write_text("[memory]\nbudget = 1\n")
    code, _, err = run_cli(capsys, "config", "show", "--config", str(path))
    assert code == 2 and "unknown key memory.budget" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "config", "show", "--config", str(tmp_path / "missing.toml"))
    assert code == 2 and "does not exist" in err


def test_executor_section_defaults_to_local() -> None:
    c = Config()
    assert (c.executor.kind, c.executor.address, c.executor.synthesis_ahead) == ("local", "auto", 2)
    assert "[executor]" in c.to_toml() and 'kind = "local"' in c.to_toml() and "synthesis_ahead = 2" in c.to_toml()
    ahead = config_from_dict({"executor": {"synthesis_ahead": 0}})
    assert ahead.executor.synthesis_ahead == 0 and ahead.fingerprint() != c.fingerprint()
    assert config_from_dict(tomllib.loads(ahead.to_toml())) == ahead


@pytest.mark.parametrize("address", ["auto", "AUTO", "10.0.0.5:6379", "ray://head.internal:10001", "[::1]:6379"])
def test_executor_ray_addresses(address: str) -> None:
    c = config_from_dict({"executor": {"kind": "Ray", "address": address}})
    assert c.executor.kind == "ray"
    assert c.executor.address == ("auto" if address.lower() == "auto" else address)


@pytest.mark.parametrize(("data", "message"), [
    ({"executor": {"kind": "k8s"}}, r"executor\.kind: 'k8s' is not one of local, ray"),
    ({"executor": {"kind": 1}}, r"executor\.kind: expected a string"),
    ({"executor": {"address": "head"}}, r"executor\.address: 'head' is not a Ray address"),
    ({"executor": {"address": "ray://head:99999"}}, r"executor\.address: .* is not a Ray address"),
    ({"executor": {"address": "http://head:8265/x"}}, r"executor\.address: .* is not a Ray address"),
    ({"executor": {"adress": "auto"}}, r"unknown key executor\.adress"),
    ({"executor": {"synthesis_ahead": -1}}, r"executor\.synthesis_ahead: must be >= 0, got -1"),
    ({"executor": {"synthesis_ahead": "2"}}, r"executor\.synthesis_ahead: expected an integer"),
    ({"executor": {"synthesis_ahead": 1.5}}, r"executor\.synthesis_ahead: expected an integer"),
    ({"executor": {"synthesis_ahead": True}}, r"executor\.synthesis_ahead: expected an integer"),
])
def test_executor_errors_name_the_key(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data, source="/etc/cuzk.toml")


def test_executor_settings_change_the_fingerprint() -> None:
    local, ray = Config(), config_from_dict({"executor": {"kind": "ray"}})
    assert local.fingerprint() != ray.fingerprint()
