"""Circuit providers: how a request becomes partitions a synthesis process can turn into assignments.

The engine knows nothing about PoRep, PoSt or SnapDeals. For each request it asks the provider that
handles the request's kind:

- `circuit_id(request)`: cheap checks at submit time (errors become INVALID_ARGUMENT) and the id of
  the parameter set (SRS) the request needs, e.g. "porep-32g";
- `plan(request)`: the heavy part (parse a 50-200 MB C1 output, derive public inputs), run on a
  planning thread: one picklable `PartitionRecipe` per partition and the public inputs each
  partition proof must verify against;
- `srs_source(circuit_id)`: where the `.params` file is, and optionally how to create it;
- `shape_call(circuit_id)`: a picklable call, run once per circuit id in a synthesis process, that
  returns the circuit's `CircuitShape` (the engine caches it and sizes memory reservations from it).

Recipes are pickled to a synthesis process, where `assignment()` runs: the engine never synthesizes
in the daemon process. The Filecoin providers (PoRep, PoSt, SnapDeals) live in
`filecoin_providers.py` and are always installed by `build_providers`.

Test circuits (only with `[debug] test_circuits = true`) use `proof_kind = PROOF_KIND_UNSPECIFIED`
and a JSON `vanilla_proof`:

    {"test_circuit": "mimc-8", "partitions": 3, "seed": 7, "fail_partition": null,
     "fail_mode": "error", "synth_delay_ms": 0, "device_delay_ms": 0, "partition_memory": 0,
     "batchable": true}

Only `test_circuit` is required. `fail_mode` says how `fail_partition` fails: "error" (synthesis
raises), "crash" (the synthesis process exits), "prove" (the partition is synthesized from a
circuit of another size, so the prover rejects it against the parameters) or "unverifiable" (the
proof is checked against wrong public inputs).
`device_delay_ms` holds the device that long before each partition's proof (under the device lock on
the CPU path), to make device contention on purpose.
`partition_memory` (bytes) raises each partition's memory reservation to at least that much, to
create budget pressure on purpose.
Their parameters are generated (INSECURE, logged as such) into `srs.param_cache` on first use.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuzk.engine.jobs import ProofKind, ProofRequest
from cuzk.errors import CuzkError, SynthesisError

log = logging.getLogger("cuzk.engine.providers")

#: A call a worker process can make: ("module:function", args).
WorkerCall = tuple[str, tuple[Any, ...]]
TEST_PARAMS_PREFIX = "cuzk-test-"
MAX_TEST_PARTITIONS = 64
MAX_TEST_LOG_CONSTRAINTS = 16
FAIL_MODES = ("error", "crash", "prove", "unverifiable")


class InvalidRequestError(CuzkError):
    """A request that can never succeed as sent (gRPC INVALID_ARGUMENT); the message says why."""


class PartitionRecipe(ABC):
    """Picklable instructions for one partition; `assignment()` runs in a synthesis process."""

    @abstractmethod
    def assignment(self) -> Any:
        """The partition's `cuzk.groth16.assignment.Assignment`."""

    @property
    def batched_witness(self) -> bool:
        """Whether the witness comes from a batched generator, whose memory needs on the compiled path
        are a fraction of WitnessCS's (`PartitionEstimate.compiled`). False unless a recipe knows."""
        return False

    def assignment_into(self, segment: Callable[[int, int], Any]) -> Any:
        """`assignment()`, where a recipe that can generate its witness in place may call
        `segment(num_inputs, num_aux)` for a `cuzk.engine.synthesis.WitnessSegment` and write it
        there (the synthesis processes pass one; nothing is then copied at the hand-off)."""
        return self.assignment()

    def compiled_only(self) -> PartitionRecipe:
        """This recipe, never falling back from a compiled circuit to the constraint system (the engine
        reserved memory for the compiled path only). Recipes without a compiled path return themselves."""
        return self


class CircuitRecipe(PartitionRecipe):
    """A recipe that builds a circuit object and synthesizes it the way the Groth16 prover expects."""

    @abstractmethod
    def build(self) -> Any:
        """The circuit instance, witness included."""

    def assignment(self) -> Any:
        from cuzk.groth16.assignment import Assignment
        from cuzk.groth16.synthesis import synthesize_for_proving

        return Assignment.from_proving_assignment(synthesize_for_proving(self.build()))


@dataclass(frozen=True)
class PartitionPlan:
    index: int
    recipe: PartitionRecipe
    public_inputs: list[int]
    #: Seconds the device is held before the proof (test circuits' `device_delay_ms`).
    device_hold_s: float = 0.0


@dataclass
class JobPlan:
    circuit_id: str
    partitions: list[PartitionPlan]
    #: Each partition's reservation is at least this many bytes (0: the shape-based estimate alone).
    min_partition_bytes: int = 0
    #: The partitions synthesize from a ready compiled circuit (`cuzk.engine.memory.PartitionEstimate.compiled`).
    compiled: bool = False


@dataclass(frozen=True)
class SrsSource:
    circuit_id: str
    path: Path
    #: Creates the file when it is missing (test parameters only); None: the file must exist.
    generator: WorkerCall | None = None
    insecure: bool = False


class CircuitProvider(ABC):
    """Turns requests of some kinds into partition recipes; see the module docstring."""

    name: str = "provider"
    kinds: tuple[ProofKind, ...] = ()

    @abstractmethod
    def circuit_id(self, request: ProofRequest) -> str:
        """Validate cheaply and name the parameter set; raise InvalidRequestError on bad input."""

    def batchable(self, request: ProofRequest) -> bool:
        """Whether jobs of this request's circuit may be collected into cross-sector batches."""
        return False

    @abstractmethod
    def plan(self, request: ProofRequest) -> JobPlan:
        """Partitions, recipes and public inputs; may be slow (runs on a planning thread)."""

    @abstractmethod
    def srs_source(self, circuit_id: str) -> SrsSource | None:
        """Where this provider's parameters for `circuit_id` live; None if the id is not its own."""

    @abstractmethod
    def shape_call(self, circuit_id: str) -> WorkerCall:
        """A worker-process call returning the circuit's `CircuitShape`."""

    def warm_up_calls(self) -> list[WorkerCall]:
        """Calls a synthesis process makes once before it reports ready, so that its first partition of
        this provider's circuits runs at full speed (imports, numba kernels from their cache). A call
        may return an assignment, which the process then exports to shared memory once and frees."""
        return []


# -- test circuits --------------------------------------------------------------------------------

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
        if self.fail == "crash":
            import multiprocessing

            if multiprocessing.parent_process() is None:
                raise SynthesisError(f"injected crash ({self.label}) refused outside a worker process")
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
SYNTHESIS_WARM_UP: WorkerCall = ("cuzk.engine.providers:warm_up_synthesis", ())


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

    def _spec(self, request: ProofRequest) -> DebugCircuitSpec:
        if request.vanilla_proofs:
            raise InvalidRequestError("test circuit: send the description in vanilla_proof; "
                                      "vanilla_proofs must be empty")
        return DebugCircuitSpec.from_payload(request.vanilla_proof)

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
        return SrsSource(circuit_id, path, ("cuzk.engine.providers:generate_debug_params", (circuit_id, str(path))),
                         insecure=True)

    def shape_call(self, circuit_id: str) -> WorkerCall:
        return ("cuzk.engine.providers:debug_circuit_shape", (circuit_id,))


# -- the registry ---------------------------------------------------------------------------------

class ProviderRegistry:
    """The providers a daemon runs with, and the errors for what none of them handles."""

    def __init__(self, providers: list[CircuitProvider], *, test_circuits_enabled: bool,
                 warm_up: Sequence[WorkerCall] = ()) -> None:
        self.providers = providers
        self.test_circuits_enabled = test_circuits_enabled
        #: Synthesis warm-up calls of the daemon, run before the providers' own (`warm_up_calls`).
        self.warm_up = list(warm_up)

    def names(self) -> list[str]:
        return [p.name for p in self.providers]

    def warm_up_calls(self) -> list[WorkerCall]:
        """What a synthesis process runs before it reports ready: the registry's calls, then each
        provider's (`CircuitProvider.warm_up_calls`), every call once."""
        calls = list(self.warm_up)
        for p in self.providers:
            calls += [call for call in p.warm_up_calls() if call not in calls]
        return calls

    def for_request(self, request: ProofRequest) -> CircuitProvider:
        for p in self.providers:
            if request.proof_kind in p.kinds:
                return p
        kind = request.proof_kind
        if kind is ProofKind.TEST:
            if self.test_circuits_enabled:  # pragma: no cover - the test provider handles it
                raise InvalidRequestError("test circuits are enabled but no test provider is installed")
            raise InvalidRequestError("invalid proof_kind: 0 (PROOF_KIND_UNSPECIFIED); test circuits are disabled "
                                      "on this daemon ([debug] test_circuits = false)")
        raise InvalidRequestError(f"unsupported proof_kind {kind.proto_name} ({kind.label})")

    def srs_source(self, circuit_id: str) -> SrsSource:
        if not circuit_id:
            raise InvalidRequestError("circuit_id is empty")
        for p in self.providers:
            source = p.srs_source(circuit_id)
            if source is not None:
                return source
        known = "porep-|winning-|wpost-|snap- followed by 2k, 8m, 512m, 32g or 64g"
        if self.test_circuits_enabled:
            known += ", or a test circuit such as mimc-8 or bits-1"
        raise InvalidRequestError(f"unknown circuit id {circuit_id!r} (known: {known})")

    def provider_for_circuit(self, circuit_id: str) -> CircuitProvider:
        for p in self.providers:
            if p.srs_source(circuit_id) is not None:
                return p
        self.srs_source(circuit_id)  # raises the precise error
        raise InvalidRequestError(f"no provider for circuit {circuit_id!r}")  # pragma: no cover


def build_providers(param_cache: str, *, test_circuits: bool, compiled: Any = None,
                    sparse_products: str = "synthesis", device_witness: bool = False) -> ProviderRegistry:
    """The providers of a daemon: the four Filecoin kinds always (a job whose parameters are missing
    from `param_cache` fails naming the file), test circuits when enabled. `compiled` is the
    Filecoin providers' CompiledStore (None: the default store, used when files are present);
    `sparse_products` where its circuits' a, b, c are computed ("synthesis" or "prover"),
    `device_witness` whether the prover's device writes their deferred gadgets' aux."""
    from cuzk.engine.filecoin_providers import filecoin_providers  # it subclasses this module's classes

    providers: list[CircuitProvider] = filecoin_providers(param_cache, compiled=compiled,
                                                          sparse_products=sparse_products,
                                                          device_witness=device_witness)
    if test_circuits:
        providers.append(DebugCircuitProvider(param_cache))
    return ProviderRegistry(providers, test_circuits_enabled=test_circuits, warm_up=[SYNTHESIS_WARM_UP])
