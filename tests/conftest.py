"""Shared fixtures. Insecure parameters are generated once per test run and shared by all tests."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from fixture_params import official_params

from cuzk.circuits.registry import lookup
from cuzk.groth16.formats.params_file import write_params, write_vk
from cuzk.groth16.keys import ProvingKey
from cuzk.groth16.setup import ToxicWaste, generate_insecure_parameters
from cuzk.providers.debug import debug_params_path, generate_debug_params

#: Test circuits the engine and provider tests prove: tiny, so that a test is about the engine, not the prover.
DEBUG_CIRCUITS = ("mimc-3", "mimc-4", "bits-1")


@dataclass(frozen=True)
class ParamsFixture:
    circuit_id: str
    pk: ProvingKey
    params_path: Path
    vk_path: Path


def _make(circuit_id: str, seed: int, root: Path) -> ParamsFixture:
    pk = generate_insecure_parameters(lookup(circuit_id).blank(), waste=ToxicWaste.random(random.Random(seed)))
    params_path = root / f"{circuit_id}.params"
    vk_path = root / f"{circuit_id}.vk"
    write_params(params_path, pk)
    write_vk(vk_path, pk.vk)
    return ParamsFixture(circuit_id, pk, params_path, vk_path)


@pytest.fixture(scope="session")
def params_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("params")


@pytest.fixture(scope="session")
def mimc_params(params_dir: Path) -> ParamsFixture:
    """MiMC, 2^10 constraints: dense random witness."""
    return _make("mimc-10", 1, params_dir)


@pytest.fixture(scope="session")
def bits_params(params_dir: Path) -> ParamsFixture:
    """Bit decompositions: a witness that is mostly 0/1, several public inputs."""
    return _make("bits-3", 2, params_dir)


@pytest.fixture(scope="session")
def circom_fixtures(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """circom circuits compiled, set up and proven by the real circom2 and snarkjs, once per run."""
    import snarkjs_tools

    reason = snarkjs_tools.tools_missing_reason()
    if reason:
        pytest.skip(reason)
    return snarkjs_tools.standard_fixtures(tmp_path_factory.mktemp("circom"))


@pytest.fixture(scope="session")
def official_params_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A parameter cache for Filecoin circuits under their official v28 names (INSECURE, test-only),
    filled on demand by `official_params` so each parameter set is generated once per run: under
    pytest-xdist in the run's directory that all workers share (porep-2k takes minutes)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return tmp_path_factory.mktemp("official-params")
    shared = tmp_path_factory.getbasetemp().parent / "official-params"
    shared.mkdir(exist_ok=True)
    return shared


@pytest.fixture(scope="session")
def porep_2k_params(official_params_dir: Path) -> Path:
    """porep-2k parameters (domain 2^22: a few minutes on 2 cores), shared by every test that needs them."""
    return official_params(official_params_dir, "porep-2k", 12)


@pytest.fixture(scope="session")
def debug_params(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A param_cache directory holding `cuzk-test-<circuit>.params` for DEBUG_CIRCUITS, in the daemon's naming."""
    root = tmp_path_factory.mktemp("engine-params")
    for circuit in DEBUG_CIRCUITS:
        generate_debug_params(circuit, str(debug_params_path(root, circuit)))
    return root
