"""The CPU backend: numba NTTs and blst (or py-arkworks) MSMs on all cores (the embedded default)."""

from __future__ import annotations

import platform
from collections.abc import MutableMapping
from typing import TYPE_CHECKING

from cuzk.backends.base import DeviceInfo, ProverBackend
from cuzk.curve.msm import cpu_count, msm_engine, prepare_bases
from cuzk.groth16 import prover
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.keys import ProvingKey
from cuzk.groth16.proof import Proof

if TYPE_CHECKING:
    from cuzk.r1cs.compiled import CompiledCircuit


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class CpuBackend(ProverBackend):
    name = "cpu"

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(name=cpu_model(), kind="cpu", memory_total=_mem_total(),
                           extra={"threads": str(cpu_count()), "msm_engine": msm_engine()})]

    def load_key(self, pk: ProvingKey, compiled: CompiledCircuit | None = None) -> None:
        for bases in (pk.h, pk.l, pk.a, pk.b_g1, pk.b_g2):
            prepare_bases(bases)

    def unload_key(self, pk: ProvingKey) -> None:
        for bases in (pk.h, pk.l, pk.a, pk.b_g1, pk.b_g2):
            bases.release_points()

    def prove(self, pk: ProvingKey, asg: Assignment, *, r: int | None = None, s: int | None = None,
              timings: MutableMapping[str, float] | None = None) -> Proof:
        return prover.prove(pk, asg, r=r, s=s, timings=timings)
