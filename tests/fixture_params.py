"""Parameter files for tests that need Filecoin circuits (imported by conftest.py and test modules)."""

from __future__ import annotations

import fcntl
import random
from pathlib import Path

from cuzk.groth16.formats.params_file import write_params, write_vk
from cuzk.groth16.setup import ToxicWaste, generate_insecure_parameters


def official_params(root: Path, circuit_id: str, seed: int) -> Path:
    """Insecure parameters for a Filecoin circuit id, written once per run under the official name the
    daemon looks for (force_official_name: these files never leave the test's temporary directory)."""
    from cuzk.circuits.filecoin.compound import blank_circuit
    from cuzk.filecoin.sizes import parameter_file_name, parse_circuit_id

    kind, size = parse_circuit_id(circuit_id)
    path = root / parameter_file_name(kind, size)
    # Several pytest-xdist workers share `root`: the first to take the lock makes the file (the .vk
    # last, so its presence says both are whole), the others wait for it instead of making their own.
    with open(root.parent / f".{root.name}-{circuit_id}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.with_suffix(".vk").exists():
            pk = generate_insecure_parameters(blank_circuit(circuit_id), waste=ToxicWaste.random(random.Random(seed)))
            write_params(path, pk, force_official_name=True)
            write_vk(path.with_suffix(".vk"), pk.vk, force_official_name=True)
    return path
