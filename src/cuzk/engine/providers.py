"""Circuit providers: how a request becomes partitions a synthesis process can turn into assignments.

The engine knows no proof kind by name. For each request it asks the provider that handles the
request's kind:

- `payload_from_message(kind, message)`: the request's `RequestPayload` from a cuzk.v1
  SubmitProofRequest (the fields the kind uses, checked); `decode_payload(kind, data)` reads back the
  form the journal kept; `default_priority`: the priority of a request that names none;
- `circuit_id(request)`: cheap checks at submit time (errors become INVALID_ARGUMENT) and the id of
  the parameter set (SRS) the request needs;
- `plan(request)`: the heavy part (parse the payload, derive public inputs), run on a planning
  thread: one picklable `PartitionRecipe` per partition and the public inputs each partition proof
  must verify against;
- `srs_source(circuit_id)`: where the `.params` file is, and optionally how to create it;
- `shape_call(circuit_id)`: a picklable call, run once per circuit id in a synthesis process, that
  returns the circuit's `CircuitShape` (the engine caches it and sizes memory reservations from it);
- `warm_up_calls()`: calls a synthesis process runs before it reports ready;
- `compiled_circuits`, `build_size(circuit_id)`: whether its circuits may be synthesized from a
  compiled circuit, and what building one takes; the engine owns that path (the ready file, the
  fallback, the witness hand-off: `cuzk.engine.compiled_recipe`).

Recipes are pickled to a synthesis process, where `assignment()` runs: the engine never synthesizes
in the daemon process. The providers themselves live in the `providers` package on the floor above
the engine, which builds the `ProviderRegistry` a daemon runs with and hands it to the engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuzk.engine.jobs import Priority, ProofKind, ProofRequest, RequestPayload
from cuzk.errors import CuzkError

#: A call a worker process can make: ("module:function", args).
WorkerCall = tuple[str, tuple[Any, ...]]


class InvalidRequestError(CuzkError):
    """A request that can never succeed as sent (gRPC INVALID_ARGUMENT); the message says why."""


class PartitionRecipe(ABC):
    """Picklable instructions for one partition; `assignment()` runs in a synthesis process."""

    @abstractmethod
    def assignment(self) -> Any:
        """The partition's `cuzk.groth16.assignment.Assignment`."""

    def assignment_into(self, segment: Callable[[int, int], Any]) -> Any:
        """`assignment()`, where a recipe that can generate its witness in place may call
        `segment(num_inputs, num_aux)` for a `cuzk.engine.synthesis.WitnessSegment` and write it
        there (the synthesis processes pass one; nothing is then copied at the hand-off)."""
        return self.assignment()


class CircuitRecipe(PartitionRecipe):
    """A recipe that builds a circuit object and synthesizes it the way the Groth16 prover expects;
    the engine may synthesize it from a compiled circuit instead (`cuzk.engine.compiled_recipe`)."""

    @abstractmethod
    def build(self) -> Any:
        """The circuit instance, witness included."""

    def check_inputs(self, allocated: Sequence[int]) -> None:
        """Refuse a witness whose allocated inputs (ONE first, as ints) are not the ones the plan
        derived (its proof could only fail verification), before any products are computed; on every
        synthesis path. Nothing is checked unless a recipe knows what to expect."""

    def assignment(self) -> Any:
        from cuzk.groth16.assignment import Assignment
        from cuzk.groth16.synthesis import synthesize_for_proving

        cs = synthesize_for_proving(self.build())
        self.check_inputs(cs.input_assignment)
        return Assignment.from_proving_assignment(cs)


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


@dataclass(frozen=True)
class BuildSize:
    """What a provider tells the compiled-circuit store about a circuit to build
    (`cuzk.engine.compiled_store.build_memory_estimate`): rows and variables, and for a circuit of
    identical blocks how many (`blocks`, 3 or more: compiled block by block) and an upper bound of its
    header rows where the header is large."""

    num_constraints: int
    num_variables: int
    blocks: int | None = None
    header_rows: int = 0


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
    #: The priority of a request of this provider's kinds that leaves it unset (cuzk.v1 PRIORITY_UNSPECIFIED).
    default_priority: Priority = Priority.NORMAL
    #: Whether its jobs may synthesize from a compiled circuit of their circuit id (built from
    #: `cuzk.circuits.registry`'s blank circuit of that id): the engine then wraps its plans'
    #: recipes, which must be `CircuitRecipe`s, in `cuzk.engine.compiled_recipe.CompiledRecipe`.
    compiled_circuits: bool = False

    @abstractmethod
    def payload_from_message(self, kind: ProofKind, message: Any) -> RequestPayload:
        """The payload of a cuzk.v1 SubmitProofRequest (`message`, read by field name) of `kind`;
        InvalidRequestError when a field can never be right."""

    @abstractmethod
    def decode_payload(self, kind: ProofKind, data: bytes) -> RequestPayload:
        """A payload from its `encode()`, or from the whole request record of a schema-1 journal
        (`cuzk.engine.journal`), which kept the request's fields in the journal's own layout."""

    @abstractmethod
    def circuit_id(self, request: ProofRequest) -> str:
        """Validate cheaply and name the parameter set; raise InvalidRequestError on bad input."""

    def batchable(self, request: ProofRequest) -> bool:
        """Whether jobs of this request's circuit may be collected into batches of several jobs."""
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

    def build_size(self, circuit_id: str) -> BuildSize | None:
        """What the compiled-circuit store needs to know to build `circuit_id`'s compiled circuit (its
        memory estimate; a circuit of identical blocks is compiled block by block); None: not known,
        and a build then reserves no memory."""
        return None

    def warm_up_calls(self) -> list[WorkerCall]:
        """Calls a synthesis process makes once before it reports ready, so that its first partition of
        this provider's circuits runs at full speed (imports, numba kernels from their cache). A call
        may return an assignment, which the process then exports to shared memory once and frees."""
        return []


# -- the registry ---------------------------------------------------------------------------------

class ProviderRegistry:
    """The providers a daemon runs with, and the errors for what none of them handles.

    `refusals`: for a kind no provider serves on purpose (e.g. test circuits while disabled), the
    message a request of it is refused with; `known_circuits`: the circuit ids the providers know,
    in words, for the error on an unknown one; `warm_up`: synthesis warm-up calls of the daemon, run
    before the providers' own (`warm_up_calls`)."""

    def __init__(self, providers: list[CircuitProvider], *, test_circuits_enabled: bool,
                 refusals: Mapping[ProofKind, str] | None = None, known_circuits: str = "",
                 warm_up: Sequence[WorkerCall] = ()) -> None:
        self.providers = providers
        self.test_circuits_enabled = test_circuits_enabled
        self.refusals = dict(refusals or {})
        self.known_circuits = known_circuits
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
        return self.for_kind(request.proof_kind)

    def for_kind(self, kind: ProofKind) -> CircuitProvider:
        for p in self.providers:
            if kind in p.kinds:
                return p
        if kind in self.refusals:
            raise InvalidRequestError(self.refusals[kind])
        raise InvalidRequestError(f"unsupported proof_kind {kind.proto_name} ({kind.label})")

    def payload_from_message(self, kind: ProofKind, message: Any) -> RequestPayload:
        return self.for_kind(kind).payload_from_message(kind, message)

    def decode_payload(self, kind: ProofKind, data: bytes) -> RequestPayload:
        return self.for_kind(kind).decode_payload(kind, data)

    def srs_source(self, circuit_id: str) -> SrsSource:
        if not circuit_id:
            raise InvalidRequestError("circuit_id is empty")
        for p in self.providers:
            source = p.srs_source(circuit_id)
            if source is not None:
                return source
        known = f" (known: {self.known_circuits})" if self.known_circuits else ""
        raise InvalidRequestError(f"unknown circuit id {circuit_id!r}{known}")

    def provider_for_circuit(self, circuit_id: str) -> CircuitProvider:
        for p in self.providers:
            if p.srs_source(circuit_id) is not None:
                return p
        self.srs_source(circuit_id)  # raises the precise error
        raise InvalidRequestError(f"no provider for circuit {circuit_id!r}")  # pragma: no cover
