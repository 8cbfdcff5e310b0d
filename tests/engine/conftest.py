"""Engine fixtures: insecure test-circuit parameters, generated once per session in the daemon's naming."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuzk.providers.debug import debug_params_path, generate_debug_params

#: Circuits the engine tests prove: tiny, so that a test is about the engine, not the prover.
ENGINE_CIRCUITS = ("mimc-3", "mimc-4", "bits-1")


@pytest.fixture(scope="session")
def debug_params(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A param_cache directory holding `cuzk-test-<circuit>.params` for ENGINE_CIRCUITS."""
    root = tmp_path_factory.mktemp("engine-params")
    for circuit in ENGINE_CIRCUITS:
        generate_debug_params(circuit, str(debug_params_path(root, circuit)))
    return root
