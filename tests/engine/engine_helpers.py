"""Helpers for tests that run a real Engine (with its worker processes) inside the test process."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cuzk.config import config_from_dict
from cuzk.engine.engine import Engine
from cuzk.engine.executors import make_executor
from cuzk.engine.jobs import JobResult, Priority, ProofKind, ProofRequest, ResultStatus
from cuzk.groth16.formats.params_file import read_vk
from cuzk.groth16.proof import proofs_from_bytes
from cuzk.groth16.verifier import verify_proof
from cuzk.providers import default_providers
from cuzk.providers.debug import debug_params_path, debug_public_inputs
from cuzk.providers.fields import submit_request


def start_engine(tmp: Path, params: Path, **sections: dict[str, Any]) -> Engine:
    """An engine with test circuits on, a private copy of the shared test parameters, 3 GiB budget."""
    cache = tmp / "params"
    cache.mkdir()
    for f in params.iterdir():
        shutil.copy(f, cache / f.name)
    data: dict[str, dict[str, Any]] = {
        "srs": {"param_cache": str(cache)}, "memory": {"total_budget": "3GiB"}, "debug": {"test_circuits": True},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    config = config_from_dict(data)
    engine = Engine(config, executor=make_executor(config), providers=default_providers(config))
    engine.start()
    return engine


def make_request(rid: str, circuit: str = "mimc-3", *, priority: Priority = Priority.NORMAL,
                 **payload: Any) -> ProofRequest:
    body = json.dumps({"test_circuit": circuit, **payload}).encode()
    return submit_request(rid, ProofKind.TEST, priority, vanilla_proof=body)


def assert_verifies(result: JobResult, params: Path, circuit: str = "mimc-3", *, seed: int = 0,
                    partitions: int = 1) -> None:
    """Every partition proof in `result` verifies against its own public inputs, in partition order."""
    assert result.status is ResultStatus.COMPLETED, result.error
    vk = read_vk(debug_params_path(params, circuit))
    proofs = proofs_from_bytes(result.proof, expected=partitions)
    for k, proof in enumerate(proofs):
        assert verify_proof(vk, proof, debug_public_inputs(circuit, seed + k)), f"partition {k}"


def wait_until(condition: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
