"""The test circuits: cuzk's example circuits (`mimc-K`, `bits-N`) as proof jobs, for tests and load tests.

Installed only with `[debug] test_circuits = true`. A request uses `proof_kind =
PROOF_KIND_UNSPECIFIED` and a JSON `vanilla_proof`:

    {"test_circuit": "mimc-8", "partitions": 3, "seed": 7, "fail_partition": null,
     "fail_mode": "error", "synth_delay_ms": 0, "device_delay_ms": 0, "partition_memory": 0,
     "batchable": true}

Only `test_circuit` is required. `fail_mode` says how `fail_partition` fails: "error" (synthesis
raises), "crash" (the synthesis process exits), "crash_filling" (it exits with a shared-memory
segment made and not yet handed over, as a process killed mid-witness does), "prove" (the partition
is synthesized from a circuit of another size, so the prover rejects it against the parameters) or
"unverifiable" (the proof is checked against wrong public inputs).
`device_delay_ms` holds the device that long before each partition's proof (under the device lock on
the CPU path), to make device contention on purpose.
`partition_memory` (bytes) raises each partition's memory reservation to at least that much, to
create budget pressure on purpose.
Their parameters are generated (INSECURE, logged as such) into `srs.param_cache` on first use.

`warm_up_synthesis` (`SYNTHESIS_WARM_UP`), the synthesis processes' warm-up on the mimc-3 example, is
run by every daemon, test circuits enabled or not.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuzk.engine.jobs import ProofRequest, RequestPayload
from cuzk.engine.providers import (
    CircuitProvider,
    CircuitRecipe,
    InvalidRequestError,
    JobPlan,
    PartitionPlan,
    SrsSource,
    WorkerCall,
)
from cuzk.errors import SynthesisError
from cuzk.kinds import ProofKind
from cuzk.providers.fields import SubmitFields, fields_of

TEST_PARAMS_PREFIX = "cuzk-test-"
MAX_TEST_PARTITIONS = 64
MAX_TEST_LOG_CONSTRAINTS = 16
FAIL_MODES = ("error", "crash", "crash_filling", "prove", "unverifiable")


@dataclass(frozen=True)
class DebugCircuitSpec:
    circuit: str
    partitions: int = 1
    seed: int = 0
    fail_partition: int | None = None
    fail_mode: str = "error"
    synth_delay_ms: int = 0
    partition_memory: int = 0
    batchable: bool = True
    device_delay_ms: int = 0

    @classmethod
    def from_payload(cls, payload: bytes) -> DebugCircuitSpec:
        try:
            data = json.loads(payload.decode())
        except (ValueError, RecursionError) as err:  # also over-long numbers and too deep nesting
            raise InvalidRequestError(f"test circuit: vanilla_proof is not JSON: {err}") from None
        if not isinstance(data, dict) or "test_circuit" not in data:
            raise InvalidRequestError("test circuit: vanilla_proof must be a JSON object with a \"test_circuit\" key, "
                                 "e.g. {\"test_circuit\": \"mimc-8\", \"partitions\": 2}")
        allowed = {"test_circuit", "partitions", "seed", "fail_partition", "fail_mode", "synth_delay_ms",
                   "device_delay_ms", "partition_memory", "batchable"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise InvalidRequestError(f"test circuit: unknown field(s) {', '.join(unknown)} "
                                      f"(allowed: {', '.join(sorted(allowed))})")

        def integer(name: str, default: int, lo: int, hi: int) -> int:
            v = data.get(name, default)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise InvalidRequestError(f"test circuit: {name} must be an integer in [{lo}, {hi}], got {v!r}")
            return v

        circuit = data["test_circuit"]
        if not isinstance(circuit, str):
            raise InvalidRequestError(f"test circuit: test_circuit must be a string, got {circuit!r}")
        _check_test_circuit_id(circuit)
        partitions = integer("partitions", 1, 1, MAX_TEST_PARTITIONS)
        fail = data.get("fail_partition")
        if fail is not None:
            fail = integer("fail_partition", 0, 0, partitions - 1)
        mode = data.get("fail_mode", "error")
        if mode not in FAIL_MODES:
            raise InvalidRequestError(f"test circuit: fail_mode must be one of {', '.join(FAIL_MODES)}, got {mode!r}")
        batchable = data.get("batchable", True)
        if not isinstance(batchable, bool):
            raise InvalidRequestError(f"test circuit: batchable must be true or false, got {batchable!r}")
        return cls(circuit=circuit, partitions=partitions, seed=integer("seed", 0, 0, 2**63 - 1),
                   fail_partition=fail, fail_mode=mode, synth_delay_ms=integer("synth_delay_ms", 0, 0, 60_000),
                   partition_memory=integer("partition_memory", 0, 0, 1 << 50), batchable=batchable,
                   device_delay_ms=integer("device_delay_ms", 0, 0, 60_000))


TEST_CIRCUIT_RE = re.compile(r"^(mimc|bits)-\d+$")


def _check_test_circuit_id(circuit_id: str) -> None:
    """Only cuzk's example circuits: the registry also knows Filecoin ids, which are never test circuits
    (their parameters must come from the trusted setup, never from this provider's generator)."""
    from cuzk.circuits.registry import UnknownCircuitError, lookup

    if not TEST_CIRCUIT_RE.match(circuit_id):
        raise InvalidRequestError(f"test circuit: unknown circuit {circuit_id!r} (test circuits are mimc-K and bits-N)")
    try:
        lookup(circuit_id)
    except UnknownCircuitError as err:
        raise InvalidRequestError(f"test circuit: {err}") from None
    m = re.match(r"^mimc-(\d+)$", circuit_id)
    if m and int(m.group(1)) > MAX_TEST_LOG_CONSTRAINTS:
        raise InvalidRequestError(f"test circuit: {circuit_id} is larger than test circuits may be "
                             f"(mimc-K with K <= {MAX_TEST_LOG_CONSTRAINTS})")
    m = re.match(r"^bits-(\d+)$", circuit_id)
    if m and int(m.group(1)) > 256:
        raise InvalidRequestError(f"test circuit: {circuit_id} is larger than test circuits may be "
                                  "(bits-N with N <= 256)")


@dataclass(frozen=True)
class DebugCircuitRecipe(CircuitRecipe):
    circuit_id: str
    seed: int
    fail: str | None = None  #: None, or a FAIL_MODES entry acted on in the synthesis process
    delay_ms: int = 0
    label: str = field(default="")

    def build(self) -> Any:
        from cuzk.circuits.registry import lookup

        circuit_id = self.circuit_id
        if self.fail == "prove":  # one size up: a valid circuit that does not fit the parameters
            family, size = circuit_id.rsplit("-", 1)
            circuit_id = f"{family}-{int(size) + 1}"
        return lookup(circuit_id).example(random.Random(self.seed))

    def assignment(self) -> Any:
        if self.delay_ms:
            time.sleep(self.delay_ms / 1000)
        if self.fail == "error":
            raise SynthesisError(f"injected synthesis failure ({self.label})")
        if self.fail in ("crash", "crash_filling"):
            import multiprocessing

            if multiprocessing.parent_process() is None:
                raise SynthesisError(f"injected crash ({self.label}) refused outside a worker process")
            if self.fail == "crash_filling":
                from cuzk.engine.synthesis import new_segment

                new_segment(1 << 16).close()
            os._exit(70)
        return super().assignment()


def debug_public_inputs(circuit_id: str, seed: int) -> list[int]:
    """The public inputs of the example instance a DebugCircuitRecipe with this seed synthesizes."""
    from cuzk.circuits.registry import lookup

    return list(lookup(circuit_id).example(random.Random(seed)).public_inputs())


def debug_circuit_shape(circuit_id: str) -> Any:
    """Worker call: the blank test circuit's shape (sizes and densities)."""
    from cuzk.circuits.registry import lookup
    from cuzk.groth16.synthesis import circuit_shape

    return circuit_shape(lookup(circuit_id).blank())


def warm_up_synthesis() -> Any:
    """Worker call: both synthesis paths once on the mimc-3 example circuit, the constraint system
    and the compiled path (its sparse-product and row-check kernels); returns the assignment, for the
    caller to run the shared-memory export once too."""
    from cuzk.groth16.synthesis import compile_circuit, synthesize_compiled

    recipe = DebugCircuitRecipe("mimc-3", 0)
    assignment = recipe.assignment()
    circuit = recipe.build()
    synthesize_compiled(circuit, compile_circuit(circuit, "mimc-3"))
    return assignment


#: The synthesis warm-up every daemon runs, whatever its providers (test circuits need not be enabled).
SYNTHESIS_WARM_UP: WorkerCall = ("cuzk.providers.debug:warm_up_synthesis", ())


def generate_debug_params(circuit_id: str, path: str) -> int:
    """Worker call: INSECURE random parameters for a test circuit, written atomically; returns bytes."""
    from cuzk.circuits.registry import lookup
    from cuzk.groth16.formats.params_file import write_params, write_vk
    from cuzk.groth16.setup import generate_insecure_parameters

    pk = generate_insecure_parameters(lookup(circuit_id).blank())
    target = Path(path)
    write_params(target, pk)
    write_vk(target.with_suffix(".vk"), pk.vk)
    return target.stat().st_size


def debug_params_path(param_cache: str | os.PathLike, circuit_id: str) -> Path:
    return Path(param_cache) / f"{TEST_PARAMS_PREFIX}{circuit_id}.params"


class DebugCircuitProvider(CircuitProvider):
    """cuzk's example circuits (`mimc-K`, `bits-N`) as proof jobs, for tests and load tests."""

    name = "test-circuits"
    kinds = (ProofKind.TEST,)

    def __init__(self, param_cache: str | os.PathLike) -> None:
        self.param_cache = Path(param_cache)

    def payload_from_message(self, kind: ProofKind, message: Any) -> RequestPayload:
        return SubmitFields.from_message(kind, message)

    def decode_payload(self, kind: ProofKind, data: bytes) -> RequestPayload:
        return SubmitFields.decode(kind, data)

    def _spec(self, request: ProofRequest) -> DebugCircuitSpec:
        fields = fields_of(request)
        if fields.vanilla_proofs:
            raise InvalidRequestError("test circuit: send the description in vanilla_proof; "
                                      "vanilla_proofs must be empty")
        return DebugCircuitSpec.from_payload(fields.vanilla_proof)

    def circuit_id(self, request: ProofRequest) -> str:
        return self._spec(request).circuit

    def batchable(self, request: ProofRequest) -> bool:
        return self._spec(request).batchable

    def plan(self, request: ProofRequest) -> JobPlan:
        spec = self._spec(request)
        partitions = []
        for k in range(spec.partitions):
            seed = spec.seed + k
            fail = spec.fail_mode if spec.fail_partition == k else None
            inputs = debug_public_inputs(spec.circuit, seed)
            if fail == "unverifiable":
                inputs = [(x + 1) for x in inputs] or inputs
            recipe = DebugCircuitRecipe(spec.circuit, seed, None if fail == "unverifiable" else fail,
                                       spec.synth_delay_ms, f"{request.request_id} partition {k}")
            partitions.append(PartitionPlan(k, recipe, inputs, spec.device_delay_ms / 1000))
        return JobPlan(spec.circuit, partitions, min_partition_bytes=spec.partition_memory)

    def srs_source(self, circuit_id: str) -> SrsSource | None:
        try:
            _check_test_circuit_id(circuit_id)
        except InvalidRequestError:
            return None
        path = debug_params_path(self.param_cache, circuit_id)
        return SrsSource(circuit_id, path, ("cuzk.providers.debug:generate_debug_params", (circuit_id, str(path))),
                         insecure=True)

    def shape_call(self, circuit_id: str) -> WorkerCall:
        return ("cuzk.providers.debug:debug_circuit_shape", (circuit_id,))
