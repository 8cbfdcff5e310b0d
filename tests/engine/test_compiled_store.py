"""The compiled-circuit store: states seen by every process, background builds (with memory
reservations), stale and failed files, loading in synthesis processes, and the command line."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuzk.circuits.registry import lookup
from cuzk.engine.compiled_store import (
    SUFFIX,
    CompiledState,
    CompiledStore,
    build_memory_estimate,
    load_verified,
    read_checked_header,
)
from cuzk.engine.providers import BuildSize
from cuzk.errors import CuzkError
from cuzk.groth16.synthesis import compile_circuit
from cuzk.r1cs.compiled import CompiledMismatchError
from cuzk.r1cs.compiled_file import read_header, write_compiled


def test_an_empty_store_is_absent_and_creates_nothing(tmp_path: Path) -> None:
    store = CompiledStore(tmp_path / "compiled")
    status = store.status("winning-2k")
    assert status.state is CompiledState.ABSENT and status.path == str(tmp_path / "compiled" / f"winning-2k{SUFFIX}")
    assert store.ready_path("winning-2k") is None
    assert store.ensure("winning-2k").state is CompiledState.ABSENT  # auto_build is off by default
    assert not (tmp_path / "compiled").exists()
    assert store.to_dict() == {"root": str(tmp_path / "compiled"), "enabled": True, "auto_build": False,
                               "circuits": {"winning-2k": {"circuit_id": "winning-2k", "state": "absent",
                                                           "path": status.path}}}


def test_circuit_ids_cannot_name_other_paths(tmp_path: Path) -> None:
    store = CompiledStore(tmp_path)
    for bad in ("../x", "", ".hidden", "a/b"):
        with pytest.raises(CuzkError, match="is not a circuit id"):
            store.status(bad)


def test_build_in_process_makes_a_ready_file(tmp_path: Path) -> None:
    store = CompiledStore(tmp_path / "compiled")
    path = store.build("mimc-6")
    status = store.status("mimc-6")
    assert status.state is CompiledState.READY and status.path == str(path) == store.ready_path("mimc-6")
    assert status.file_bytes == path.stat().st_size
    assert status.info["counts"]["num_constraints"] == 64 and status.info["circuit_id"] == "mimc-6"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no lock, no temporary
    assert [s.circuit_id for s in CompiledStore(tmp_path / "compiled").statuses()] == ["mimc-6"]


def test_background_build_reserves_memory_and_becomes_ready(tmp_path: Path) -> None:
    reservations = []

    class Reservation:
        def __init__(self, nbytes: int, label: str) -> None:
            self.nbytes, self.label, self.released = nbytes, label, False

        def release(self) -> None:
            self.released = True

    class Budget:
        def try_reserve(self, nbytes: int, label: str, *, evict: bool = True) -> Reservation:
            assert not evict  # a background build never pushes parameters out
            reservations.append(Reservation(nbytes, label))
            return reservations[-1]

    store = CompiledStore(tmp_path, auto_build=True, budget=Budget())
    started = store.ensure("mimc-5", BuildSize(32, 34))
    assert started.state is CompiledState.BUILDING and started.builder_pid not in (None, os.getpid())
    assert store.ensure("mimc-5").state is CompiledState.BUILDING  # no second builder
    final = store.wait("mimc-5", timeout=300)
    assert final.state is CompiledState.READY, final
    assert [(r.nbytes, r.label, r.released) for r in reservations] == \
        [(build_memory_estimate(32, 34), "compile:mimc-5", True)]
    assert not (tmp_path / "mimc-5.building").exists()


def test_a_build_that_cannot_fit_now_waits_and_one_that_never_fits_fails(tmp_path: Path) -> None:
    from cuzk.engine.memory import MemoryBudget

    budget = MemoryBudget(1 << 30)
    held = budget.try_reserve((1 << 30) - (1 << 20), "prove:x")
    store = CompiledStore(tmp_path, auto_build=True, budget=budget)
    waiting = store.ensure("mimc-5", BuildSize(32, 34))
    assert waiting.state is CompiledState.ABSENT and "waiting for" in waiting.error
    assert not (tmp_path / "mimc-5.building").exists()
    held.release()
    huge = store.ensure("porep-32g", BuildSize(130_278_869, 130_170_221))
    assert huge.state is CompiledState.FAILED and "building needs about" in huge.error
    assert store.ensure("porep-32g").state is CompiledState.FAILED  # not retried automatically
    store.reset("porep-32g")
    assert store.status("porep-32g").state is CompiledState.ABSENT


def test_a_failed_build_is_recorded_with_its_error(tmp_path: Path) -> None:
    store = CompiledStore(tmp_path, auto_build=True)
    store.ensure("mimc-99")
    status = store.wait("mimc-99", timeout=300)
    assert status.state is CompiledState.FAILED and "mimc-K needs 3 <= K <= 27" in status.error
    assert CompiledStore(tmp_path).status("mimc-99").state is CompiledState.FAILED  # seen by others too
    with pytest.raises(CuzkError, match="mimc-K needs"):
        store.build("mimc-99")


def test_stale_and_foreign_files_are_not_used_and_get_rebuilt(tmp_path: Path) -> None:
    stale = compile_circuit(lookup("mimc-5").blank(), "mimc-5")
    write_compiled(dataclasses.replace(stale, code_digest="0" * 64), tmp_path / f"mimc-5{SUFFIX}")
    store = CompiledStore(tmp_path)
    status = store.status("mimc-5")
    assert status.state is CompiledState.STALE and "other synthesis code" in status.error
    assert store.ready_path("mimc-5") is None
    (tmp_path / f"mimc-6{SUFFIX}").write_bytes((tmp_path / f"mimc-5{SUFFIX}").read_bytes())
    assert "holds circuit 'mimc-5'" in store.status("mimc-6").error
    (tmp_path / f"mimc-7{SUFFIX}").write_bytes(b"garbage")
    assert "truncated" in store.status("mimc-7").error
    store.build("mimc-5")
    assert store.status("mimc-5").state is CompiledState.READY


def test_a_live_lock_means_building_and_a_dead_one_is_taken_over(tmp_path: Path) -> None:
    import psutil

    lock = tmp_path / "mimc-5.building"
    lock.write_text(json.dumps({"pid": os.getpid(), "process_start": psutil.Process().create_time(),
                                "started_at": 1.0}))
    store = CompiledStore(tmp_path, auto_build=True)
    status = store.status("mimc-5")
    assert status.state is CompiledState.BUILDING and status.builder_pid == os.getpid()
    with pytest.raises(CuzkError, match=f"being built by process {os.getpid()}"):
        store.build("mimc-5")
    # a pid that exists but started at another time is a reused pid, not our builder
    lock.write_text(json.dumps({"pid": os.getpid(), "process_start": 12.0, "started_at": 1.0}))
    assert store.status("mimc-5").state is CompiledState.ABSENT
    store.build("mimc-5")
    assert store.status("mimc-5").state is CompiledState.READY and not lock.exists()


def test_synthesis_processes_load_once_and_skip_unusable_files(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                                               ) -> None:
    store = CompiledStore(tmp_path)
    path = str(store.build("mimc-5"))
    first = load_verified(path, "mimc-5")
    assert first is not None and load_verified(path, "mimc-5") is first
    with caplog.at_level(logging.WARNING, logger="cuzk.engine.compiled"):
        assert load_verified(path, "mimc-6") is None
        Path(path).write_bytes(Path(path).read_bytes()[:-8])
        assert load_verified(path, "mimc-5") is None
        assert load_verified(str(tmp_path / "gone"), "mimc-5") is None
    messages = [r.getMessage() for r in caplog.records]
    assert any("holds circuit 'mimc-5', not 'mimc-6'" in m for m in messages)
    assert any("truncated" in m for m in messages)


def test_header_only_reads_skip_the_matrices(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A synthesis process whose prover evaluates a, b, c needs the counts alone: no mapping and no
    digest pass (13 s for PoRep-32GiB's 6.1 GB, once per process); the prover's load still verifies."""
    path = str(CompiledStore(tmp_path).build("mimc-5"))
    header = read_checked_header(path, "mimc-5")
    compiled = load_verified(path, "mimc-5")
    assert header is not None and compiled is not None
    assert header.num_constraints == compiled.num_constraints
    header.check_witness(compiled.num_inputs, compiled.num_aux)
    with pytest.raises(CompiledMismatchError, match="has 2 inputs, 30 aux variables"):
        header.check_witness(compiled.num_inputs, compiled.num_aux + 1)
    corrupt = tmp_path / "corrupt.cuzk-r1cs"
    data = bytearray(Path(path).read_bytes())
    data[read_header(path).meta["arrays"]["b_cols"]["offset"]] ^= 0x01  # a column index: still in range
    corrupt.write_bytes(bytes(data))
    assert read_checked_header(str(corrupt), "mimc-5") is not None
    with caplog.at_level(logging.WARNING, logger="cuzk.engine.compiled"):
        assert load_verified(str(corrupt), "mimc-5") is None
        assert read_checked_header(path, "mimc-6") is None
        assert read_checked_header(str(tmp_path / "gone"), "mimc-5") is None
    messages = [r.getMessage() for r in caplog.records]
    assert any("corrupted" in m for m in messages) and any("not 'mimc-6'" in m for m in messages)


def test_command_line_builds_and_reports(tmp_path: Path) -> None:
    cuzk = [str(Path(sys.executable).with_name("cuzk")), "circuit"]
    cache = ["--param-cache", str(tmp_path)]
    built = subprocess.run([*cuzk, "compile", "mimc-5", *cache], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert built.stdout.strip() == f"mimc-5: {tmp_path / 'compiled' / f'mimc-5{SUFFIX}'}"
    status = subprocess.run([*cuzk, "compiled", *cache], capture_output=True, text=True, timeout=120)
    assert json.loads(status.stdout)["circuits"]["mimc-5"]["state"] == "ready"
    bad = subprocess.run([*cuzk, "compile", "nope-1", *cache], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unknown circuit 'nope-1'" in bad.stderr


@pytest.mark.parametrize(("mode", "enabled", "auto_build"), [("off", False, False), ("use", True, False),
                                                             ("build", True, True)])
def test_synthesis_compiled_setting(tmp_path: Path, mode: str, enabled: bool, auto_build: bool) -> None:
    """[synthesis] compiled picks the engine's store mode; "off" also hides ready files from planning."""
    from cuzk.config import config_from_dict

    config = config_from_dict({"synthesis": {"compiled": mode}})
    assert config.synthesis.compiled == mode
    store = CompiledStore(tmp_path / "compiled", enabled=mode != "off", auto_build=mode == "build")
    assert (store.enabled, store.auto_build) == (enabled, auto_build)
    CompiledStore(tmp_path / "compiled").build("mimc-5")
    assert store.path_for_job("mimc-5") == (str(store.path("mimc-5")) if enabled else None)


def test_synthesis_compiled_setting_refuses_other_values() -> None:
    from cuzk.config import ConfigError, config_from_dict

    with pytest.raises(ConfigError, match=r"synthesis.compiled: 'always' is not one of off, use, build"):
        config_from_dict({"synthesis": {"compiled": "always"}})

