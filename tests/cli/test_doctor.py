"""`cuzk doctor`: this machine (no GPU here) against a configuration, described boxes planned alone, and
each fault planted (missing key, wrong size, port taken, unreadable token file, a memory limit too
small) giving its finding, its fix and the exit status (0 all good, 1 warnings, 2 cannot work)."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from cuzk.cli.main import main
from cuzk.config import config_from_dict, host
from cuzk.config.values import GIB
from cuzk.daemon.doctor import ERROR, INFO, OK, WARNING, diagnose, parse_box
from cuzk.filecoin.sizes import CircuitKind, parameter_file_name, sector_params
from cuzk.groth16.formats.params_shape import ExpectedParamsLayout

CIRCUIT = "winning-2k"


def _params(cache: Path, circuit: str = CIRCUIT, *, size_delta: int = 0) -> Path:
    """A sparse file of the size the circuit's shape gives its `.params` (doctor reads sizes, not points)."""
    from cuzk.circuits.filecoin.shapes import KNOWN_SHAPES

    kind, sector = circuit.split("-")
    cache.mkdir(exist_ok=True)
    path = cache / parameter_file_name({"winning": CircuitKind.WINNING, "wpost": CircuitKind.WINDOW,
                                        "porep": CircuitKind.POREP}[kind], sector_params(sector))
    with open(path, "wb") as f:
        f.truncate(ExpectedParamsLayout.of_shape(KNOWN_SHAPES[circuit]).params_file_size + size_delta)
    return path


def _config(tmp_path: Path, **sections: dict[str, Any]) -> dict[str, dict[str, Any]]:
    cache = tmp_path / "params"
    cache.mkdir(exist_ok=True)
    data: dict[str, dict[str, Any]] = {
        "srs": {"param_cache": str(cache), "preload": [CIRCUIT]},
        "gpus": {"backend": "cpu"},
        "memory": {"safety_margin": "256MiB"},
        "daemon": {"listen": [f"unix://{tmp_path}/cuzk.sock"], "state_dir": str(tmp_path / "state")},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return data


def _toml(tmp_path: Path, data: dict[str, dict[str, Any]]) -> Path:
    path = tmp_path / "cuzk.toml"
    path.write_text(config_from_dict(data).to_toml())
    return path


def _doctor(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str]:
    code = main(["doctor", *(str(a) for a in args)])
    return code, capsys.readouterr().out


def _find(report: Any, topic: str) -> list[Any]:
    return [f for f in report.findings if f.topic == topic]


@pytest.fixture(autouse=True)
def no_cgroup_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever limits the machine running the tests has, the tests see none unless they plant one."""
    monkeypatch.setattr(host, "ROOT", tmp_path / "no-cgroups")


def test_this_machine_all_good_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _config(tmp_path)
    _params(tmp_path / "params")
    code, out = _doctor(capsys, "--config", _toml(tmp_path, data))
    assert code == 0, out
    assert "cuzk doctor: this machine" in out and f"OK      key {CIRCUIT}:" in out
    assert f"OK      {CIRCUIT}: 1 device(s) cpu" in out and "0 error(s), 0 warning(s): exit 0" in out
    assert "OK      daemon.listen: unix://" in out and "OK      state dir:" in out


def test_this_machine_without_a_gpu_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has an NVIDIA driver")
    _params(tmp_path / "params")
    report = diagnose(config_from_dict(_config(tmp_path, gpus={"backend": "auto"})))
    gpu = _find(report, "gpu")
    assert [f.level for f in gpu] == [WARNING] and "no GPU found" in gpu[0].message
    assert report.exit_status == 1 and report.box.gpus == ()
    assert _find(diagnose(config_from_dict(_config(tmp_path))), "gpu")[0].level == INFO  # backend = "cpu"
    cuda = diagnose(config_from_dict(_config(tmp_path, gpus={"backend": "cuda"})))
    assert _find(cuda, "gpu")[0].level == ERROR and cuda.exit_status == 2
    code, out = _doctor(capsys, "--config", _toml(tmp_path, _config(tmp_path, gpus={"backend": "auto"})), "--json")
    body = json.loads(out)
    assert code == 1 and body["exit_status"] == 1 and body["box"]["gpus"] == []


def test_missing_key_is_an_error_when_preloaded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _doctor(capsys, "--config", _toml(tmp_path, _config(tmp_path)))
    assert code == 2
    line = next(x for x in out.splitlines() if x.startswith(f"ERROR   key {CIRCUIT}"))
    assert "is missing: the daemon would not start (srs.preload)" in line and "fix: fetch the v28 .params" in line
    not_preloaded = diagnose(config_from_dict(_config(tmp_path, srs={"preload": []})), circuits=[CIRCUIT])
    assert _find(not_preloaded, f"key {CIRCUIT}")[0].level == WARNING  # its jobs would fail, the daemon starts


def test_wrong_size_key(tmp_path: Path) -> None:
    path = _params(tmp_path / "params", size_delta=-96)
    report = diagnose(config_from_dict(_config(tmp_path)))
    (finding,) = _find(report, f"key {CIRCUIT}")
    assert finding.level == ERROR and f"{path} has" in finding.message
    assert "the circuit's shape needs" in finding.message
    assert "cuzk params check" in finding.fix and report.exit_status == 2


def test_key_that_cannot_be_read(tmp_path: Path) -> None:
    """A directory where the file should be (the tests run as root: permissions would not stop them)."""
    path = _params(tmp_path / "params")
    path.unlink()
    path.mkdir()
    (finding,) = _find(diagnose(config_from_dict(_config(tmp_path))), f"key {CIRCUIT}")
    assert finding.level == ERROR and "is not a regular file" in finding.message


def test_port_taken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _params(tmp_path / "params")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        data = _config(tmp_path, daemon={"listen": [f"127.0.0.1:{port}"], "status_listen": "127.0.0.1:0"})
        code, out = _doctor(capsys, "--config", _toml(tmp_path, data))
    assert code == 2
    line = next(x for x in out.splitlines() if x.startswith("ERROR   daemon.listen"))
    assert f"127.0.0.1:{port}: cannot listen" in line and "fix: stop what holds it" in line
    assert "OK      daemon.status_listen: 127.0.0.1:0 free" in out


def test_unix_socket_directory_not_writable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    data = _config(tmp_path, daemon={"listen": [f"unix://{tmp_path}/file/cuzk.sock"]})
    (finding,) = _find(diagnose(config_from_dict(data)), "daemon.listen")
    assert finding.level == ERROR and "cannot create the socket" in finding.message


def test_unreadable_token_file(tmp_path: Path) -> None:
    """A directory in place of the token file, and a token file every user may read."""
    _params(tmp_path / "params")
    (tmp_path / "token").mkdir()
    report = diagnose(config_from_dict(_config(tmp_path, daemon={"auth_token_file": str(tmp_path / "token")})))
    (finding,) = _find(report, "daemon.auth_token_file")
    assert finding.level == ERROR and "Is a directory" in finding.message and "0600" in finding.fix
    loose = tmp_path / "loose"
    loose.write_text("0123456789abcdef0123\n")
    loose.chmod(0o644)
    report = diagnose(config_from_dict(_config(tmp_path, daemon={"admin_token_file": str(loose)})))
    (finding,) = _find(report, "daemon.admin_token_file")
    assert finding.level == ERROR and "readable by every user" in finding.message
    tls = diagnose(config_from_dict(_config(tmp_path, daemon={"tls_cert_file": str(tmp_path / "absent.pem")})))
    assert _find(tls, "daemon.tls_cert_file")[0].level == ERROR


def test_memory_limit_too_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """A cgroup v2 limit of 1 GiB: the doctor says it applies and that no partition fits within it."""
    root = tmp_path / "cg"
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text("0::/cuzk\n")
    (root / "proc/self/mountinfo").write_text("31 22 0:28 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    (root / "sys/fs/cgroup/cuzk").mkdir(parents=True)
    (root / "sys/fs/cgroup/cuzk/memory.max").write_text(f"{GIB}\n")
    (root / "sys/fs/cgroup/cuzk/memory.current").write_text("0\n")
    (root / "sys/fs/cgroup/cuzk/cpu.max").write_text("100000 100000\n")
    monkeypatch.setattr(host, "ROOT", root)
    _params(tmp_path / "params")
    code, out = _doctor(capsys, "--config", _toml(tmp_path, _config(tmp_path)))
    assert code == 2
    assert "INFO    memory: a cgroup limit applies: cgroup v2 /sys/fs/cgroup/cuzk/memory.max (1.0 GiB)" in out
    assert "INFO    cpu: a cgroup CPU quota applies: cgroup v2 /sys/fs/cgroup/cuzk/cpu.max = 100000/100000" in out
    line = next(x for x in out.splitlines() if x.startswith(f"  ERROR   {CIRCUIT}"))
    assert "do not fit the host budget (0.8 GiB)" in line and "looser cgroup limit" in line


def test_explicit_budget_above_the_box(tmp_path: Path) -> None:
    report = diagnose(config_from_dict(_config(tmp_path, memory={"total_budget": "600GiB"})),
                      box=parse_box("1x24GiB,256GiB,32cores"), circuits=["winning-32g"])
    (finding,) = _find(report, "memory")
    assert finding.level == WARNING and "the OOM killer" in finding.message


@pytest.mark.parametrize(("spec", "porep", "winning"), [
    ("1x8GiB,128GiB,16cores", ERROR, OK),  # PoRep-32GiB needs 12.9 GiB of device memory
    ("1x24GiB,128GiB,16cores", OK, OK),
    ("4x24GiB,256GiB,32cores", WARNING, OK),  # four pinned copies leave room for 3 partitions
    ("2x16GiB,128GiB,16cores", WARNING, OK),  # two 48.5 GiB pinned copies leave room for one partition
    ("4x16GiB,128GiB,16cores", ERROR, OK),  # four do not fit at all
    ("1x80GiB,256GiB,32cores", OK, OK),
])
def test_described_boxes(spec: str, porep: str, winning: str) -> None:
    config = config_from_dict({"srs": {"param_cache": "/nonexistent"}})
    report = diagnose(config, box=parse_box(spec), circuits=["porep-32g", "winning-32g"])
    assert report.findings == []  # nothing probed: the box is not this machine
    verdicts = {v.circuit_id: v for v in report.verdicts}
    assert (verdicts["porep-32g"].level, verdicts["winning-32g"].level) == (porep, winning), verdicts
    cards = len(parse_box(spec).gpus)
    assert [p.device for p in report.plans if p.circuit_id == "porep-32g"] == [f"cuda{k}" for k in range(cards)]
    winning_plan = next(p for p in report.plans if p.circuit_id == "winning-32g")
    assert winning_plan.mode == "resident" and winning_plan.pinned_bytes == 0


def test_keys_on_one_device_are_planned_beside_the_ones_before_them(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    """As a device process with all of them hot plans them (`plan_beside`): in the order given, each
    within what the keys before it leave, and the plan line says beside which."""
    config = config_from_dict({"srs": {"param_cache": "/nonexistent"}})
    box = parse_box("1x80GiB,256GiB,32cores")
    porep, wpost, winning = diagnose(config, box=box, circuits=["porep-32g", "wpost-32g", "winning-32g"]).plans
    (alone,) = diagnose(config, box=box, circuits=["wpost-32g"]).plans
    assert (porep.beside, wpost.beside, winning.beside) == ([], ["porep-32g"], ["porep-32g", "wpost-32g"])
    assert set(wpost.resident) < set(alone.resident) and wpost.pinned_bytes > alone.pinned_bytes
    keys = (porep, wpost, winning)
    assert sum(k.resident_bytes for k in keys) + max(k.reserve for k in keys) <= porep.budget
    code, out = _doctor(capsys, "--config", _toml(tmp_path, {"srs": {"param_cache": str(tmp_path)}}),
                        "--box", "1x80GiB,256GiB,32cores", "--circuit", "porep-32g", "--circuit", "wpost-32g")
    assert code == 0 and "wpost-32g    cuda0    streaming of 76.9 GiB beside porep-32g: resident nothing," in out


def test_described_box_plan_details(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out = _doctor(capsys, "--config", _toml(tmp_path, {"srs": {"param_cache": str(tmp_path)}}),
                        "--box", "1x16GiB,128GiB,16cores", "--circuit", "porep-32g", "--json")
    body = json.loads(out)
    (plan,) = body["plans"]
    assert code == 0 and body["exit_status"] == 0
    assert plan["mode"] == "streaming" and plan["resident"] == [] and plan["device_bytes"] <= plan["budget"]
    # Everything streamed: every base in pinned host memory, plus the witness's staging buffer.
    assert plan["pinned_bytes"] > plan["streamed_bytes"] > 44 * GIB
    assert body["verdicts"][0]["synthesis_processes"] == 16


def test_devices_and_limits_from_the_config() -> None:
    config = config_from_dict({"gpus": {"devices": [0, 0], "memory_limit": "20GiB"}})
    report = diagnose(config, box=parse_box("1x80GiB,256GiB,32cores"), circuits=["porep-32g"])
    assert [p.device for p in report.plans] == ["cuda0", "cuda0.1"]
    assert all(p.budget == 20 * GIB - (768 << 20) and p.mode == "streaming" for p in report.plans)


@pytest.mark.parametrize(("spec", "message"), [
    ("4x24GiB,32cores", "give the host memory and the cores"),
    ("4x24GiB,256GiB", "give the host memory and the cores"),
    ("4x24GiB,256GiB,32cores,fast", "'fast' is neither"),
    ("4x24Gb-ish,256GiB,32cores", "is neither"),
])
def test_bad_box_specs_exit_2(spec: str, message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["doctor", "--config", str(_toml(tmp_path, {})), "--box", spec])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err


def test_this_machine_at_the_box_level_matches_the_probe(tmp_path: Path) -> None:
    """Without --box the plan uses what was probed: this machine's free memory and CPUs."""
    _params(tmp_path / "params")
    report = diagnose(config_from_dict(_config(tmp_path)))
    assert report.box.described is False and report.box.cpus == host.cpu_limit().cpus
    assert report.box.memory_source == "MemAvailable"
    assert [f.level for f in _find(report, "memory")] == [OK]


def test_unknown_and_test_circuits() -> None:
    config = config_from_dict({"srs": {"param_cache": "/nonexistent"}})
    report = diagnose(config, box=parse_box("1x24GiB,64GiB,8cores"), circuits=["porep-33g", "mimc-3"])
    verdicts = {v.circuit_id: v for v in report.verdicts}
    assert verdicts["porep-33g"].level == ERROR and verdicts["mimc-3"].level == INFO and report.exit_status == 2


def test_gpus_as_cupy_reports_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU probe's reading of CuPy (no GPU here: nvidia-smi, CuPy and the device's properties
    stand in), and the plan it makes for the cards found."""
    import sys
    from types import SimpleNamespace

    from cuzk.backends.cuda import device
    from cuzk.engine import devices

    runtime = SimpleNamespace(driverGetVersion=lambda: 12040, runtimeGetVersion=lambda: 12020)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(runtime=runtime),
                                                             __version__="13.3.0"))
    monkeypatch.setattr(devices, "nvidia_gpus", lambda: [0, 1])
    monkeypatch.setattr(devices, "cuda_backend_installed", lambda: True)
    monkeypatch.setattr(device, "properties", lambda k: device.GpuProperties(k, "NVIDIA GeForce RTX 4090",
                                                                              24 * GIB, 128, "8.9", 2520))
    _params(tmp_path / "params", "winning-32g")
    report = diagnose(config_from_dict(_config(tmp_path, gpus={"backend": "auto"}, srs={"preload": ["winning-32g"]})))
    gpu = _find(report, "gpu")
    assert [f.level for f in gpu] == [OK, OK, OK]
    assert "GPU 1: NVIDIA GeForce RTX 4090, 24.0 GiB, compute capability 8.9" in gpu[1].message
    assert gpu[2].message == "driver CUDA 12.4, runtime 12.2, CuPy 13.3.0"
    assert [(p.device, p.mode) for p in report.plans] == [("cuda0", "resident"), ("cuda1", "resident")]
    assert report.box.text().startswith("2 GPU(s) (2 x NVIDIA GeForce RTX 4090 24.0 GiB)")
    monkeypatch.setattr(devices, "cuda_backend_installed", lambda: False)
    cuda = diagnose(config_from_dict(_config(tmp_path, gpus={"backend": "cuda"}, srs={"preload": ["winning-32g"]})))
    (finding,) = _find(cuda, "gpu")
    assert finding.level == ERROR and "CuPy or the CUDA backend is not installed" in finding.message
