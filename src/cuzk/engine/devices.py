"""The prover devices a configuration names (`gpus.backend`, `gpus.devices`), found without
loading a GPU library in the daemon process, and what follows from them for synthesis (where a
compiled circuit's products are computed, whether GPUs write the bulk of the witnesses).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass

from cuzk.backends.cuda.runtime import EMULATED_ENV, EMULATED_ROOM_ENV
from cuzk.config import Config, ConfigError
from cuzk.engine.jobs import Priority

log = logging.getLogger("cuzk.engine.devices")
CUDA_BACKEND_MODULE = "cuzk.backends.cuda"


@dataclass(frozen=True)
class DeviceSpec:
    ordinal: int
    kind: str  #: "cpu" or "cuda"
    #: This logical device's place among those on the same ordinal, and how many there are.
    slot: int = 0
    share: int = 1

    @property
    def label(self) -> str:
        """Unique among a daemon's devices: "cuda0", "cuda0.1" for the second device on GPU 0."""
        return f"{self.kind}{self.ordinal}" + (f".{self.slot}" if self.slot else "")


def nvidia_gpus() -> list[int]:
    """GPU indices nvidia-smi reports (empty without a driver)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [int(x) for x in out.stdout.split() if x.strip().isdigit()] if out.returncode == 0 else []


def cuda_backend_installed() -> bool:
    """Whether the CUDA backend and CuPy are installed, found without importing either (the daemon
    process never loads a GPU library; only device processes do)."""
    try:
        spec = importlib.util.find_spec(CUDA_BACKEND_MODULE)
        cupy = importlib.util.find_spec("cupy")
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin not in (None, "namespace") and cupy is not None


def _emulated_cards(config: Config) -> list[int]:
    """`gpus.emulate`'s cards, named in the environment that the device processes inherit (with one
    room for all of them, so that devices on one card share its memory); [] when none."""
    sizes = config.gpus.emulate
    if not sizes:
        return []
    os.environ[EMULATED_ENV] = ",".join(str(n) for n in sizes)
    if not os.environ.get(EMULATED_ROOM_ENV):
        from cuzk.backends.cuda.emulated.device import make_room  # the emulator only where it is asked for

        os.environ[EMULATED_ROOM_ENV] = str(make_room())
    log.warning("gpus.emulate: proving on %d emulated CUDA card(s) (%s), a development and test device",
                len(sizes), ", ".join(f"{n / (1 << 30):g} GiB" for n in sizes))
    return list(range(len(sizes)))


def detect_devices(config: Config) -> list[DeviceSpec]:
    """The prover devices for this configuration (gpus.backend, gpus.devices, gpus.emulate)."""
    backend = config.gpus.backend
    emulated = _emulated_cards(config)
    if emulated:
        wrong = [d for d in config.gpus.devices if d not in emulated]
        if wrong:
            raise ConfigError(f"gpus.devices names {wrong}, but gpus.emulate has {len(emulated)} card(s) "
                              f"(0-{len(emulated) - 1})")
        return shared([DeviceSpec(g, "cuda") for g in config.gpus.devices or emulated])
    cuda_available = cuda_backend_installed()
    if backend == "cpu":
        # Several CPU devices, each its own process: for tests and hosts that split their cores.
        return shared([DeviceSpec(k, "cpu") for k in config.gpus.devices or [0]])
    gpus = config.gpus.devices or nvidia_gpus()
    if backend == "cuda" or (backend == "auto" and config.gpus.devices):
        if not cuda_available:
            raise ConfigError(f"gpus.backend = \"{backend}\" with GPUs configured, but the CUDA backend "
                              f"({CUDA_BACKEND_MODULE} with CuPy) is not installed")
        if not gpus:
            raise ConfigError("gpus.backend = \"cuda\" but no GPU was found (nvidia-smi); set gpus.devices")
        return shared([DeviceSpec(g, "cuda") for g in gpus])
    if gpus and cuda_available:
        return shared([DeviceSpec(g, "cuda") for g in gpus])
    if gpus:
        log.warning("GPUs %s found but the CUDA backend is not installed: proving on the CPU", gpus)
    return [DeviceSpec(0, "cpu")]


def shared(specs: list[DeviceSpec]) -> list[DeviceSpec]:
    """The specs with each one's place among the logical devices of its ordinal (`devices = [0, 0]`:
    two devices on GPU 0, each planning with half its memory unless `memory_limit` says otherwise)."""
    counts: dict[tuple[str, int], int] = {}
    for s in specs:
        counts[(s.kind, s.ordinal)] = counts.get((s.kind, s.ordinal), 0) + 1
    seen: dict[tuple[str, int], int] = {}
    out = []
    for s in specs:
        key = (s.kind, s.ordinal)
        out.append(DeviceSpec(s.ordinal, s.kind, slot=seen.get(key, 0), share=counts[key]))
        seen[key] = seen.get(key, 0) + 1
    return out


def sparse_products_where(setting: str, specs: list[DeviceSpec]) -> str:
    """`synthesis.sparse_products` resolved: "auto" is "prover" when every device is a GPU (whose
    backend computes a, b, c next to the proof) and "synthesis" otherwise."""
    if setting != "auto":
        return setting
    return "prover" if specs and all(spec.kind == "cuda" for spec in specs) else "synthesis"


def device_witness_floor(setting: str, sparse_products: str, specs: list[DeviceSpec]) -> Priority | None:
    """`synthesis.device_witness` resolved to the lowest priority whose jobs leave the bulk of their
    deferred witnesses to the devices, or None for no job. The devices can take it when the products
    are on the prover and every device is a GPU (the CUDA backend writes the rows there); else the
    synthesis processes write whole witnesses ("on" says so in the log). "deadlines" is HIGH: the
    Merkle openings of a large partition take a synthesis process far longer than the GPU
    (docs/compiled-circuits.md), while throughput work keeps the GPU for its MSMs."""
    if setting == "off":
        return None
    if sparse_products == "prover" and specs and all(spec.kind == "cuda" for spec in specs):
        return Priority.LOW if setting == "on" else Priority.HIGH
    if setting == "on":
        log.warning("synthesis.device_witness = \"on\" needs sparse products on the prover and every device a GPU "
                    "(sparse_products resolves to %r, devices: %s): synthesis writes whole witnesses", sparse_products,
                    ", ".join(f"{spec.kind}:{spec.ordinal}" for spec in specs) or "none")
    return None
