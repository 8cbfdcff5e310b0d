"""`cuzk bench local`: the daemon's measurements in this process, without a daemon (kernel and synthesis work).

Each proof goes through what the daemon does, one step after the other: the circuit provider plans
the request (the same providers as the daemon, so the same inputs work), every partition is
synthesized, proven on the chosen backend with its sub-phase timer, and verified. The samples have
the daemon's result layout (one partition record per partition, ms since the proof started), so
statistics, timelines and `bench compare` treat both alike; queueing and hand-off phases are zero.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cuzk.bench.inputs import ProofInputs
from cuzk.errors import CuzkError

SYNTH_WORKER = "local-synthesis"
DEVICE_WORKER = "local-device"


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


class LocalProver:
    """Parameters made resident once, then proofs one at a time."""

    def __init__(self, inputs: ProofInputs, *, param_cache: Path, backend: str = "cpu", verify: bool = True) -> None:
        from cuzk.engine.compiled_store import CompiledStore
        from cuzk.engine.device_worker import make_backend
        from cuzk.engine.providers import InvalidRequestError
        from cuzk.groth16.formats.params_file import read_params
        from cuzk.groth16.verifier import prepare_verifying_key
        from cuzk.providers import build_providers

        inputs.check()
        self.inputs = inputs
        self.verify = verify
        self.providers = build_providers(str(param_cache), test_circuits=True)
        #: Ready compiled circuits are used as a daemon uses them (with the products computed in synthesis).
        self.compiled = CompiledStore(Path(param_cache) / "compiled")
        probe = inputs.engine_request(request_id="local-probe")
        try:
            self.provider = self.providers.for_request(probe)
            self.circuit_id = self.provider.circuit_id(probe)
            source = self.providers.srs_source(self.circuit_id)
        except InvalidRequestError as err:
            raise CuzkError(f"bench local: {err}") from None
        start = time.monotonic()
        if not source.path.exists():
            if source.generator is None:
                raise CuzkError(f"bench local: parameters for {self.circuit_id} not found at {source.path} "
                                "(--param-cache)")
            ref, args = source.generator
            module, _, name = ref.partition(":")
            generate: Callable[..., Any] = getattr(importlib.import_module(module), name)
            source.path.parent.mkdir(parents=True, exist_ok=True)
            generate(*args)
        try:
            self.backend = make_backend(backend, 0)
        except Exception as err:
            raise CuzkError(f"bench local: backend {backend!r} is not usable here: "
                            f"{type(err).__name__}: {err}") from None
        self.backend_name = backend
        self.pk = read_params(source.path)
        self.pvk = prepare_verifying_key(self.pk.vk)
        self.backend.load_key(self.pk)
        self.srs_load_s = time.monotonic() - start

    def prove(self, index: int, *, warmup: bool = False) -> dict[str, Any]:
        """One proof as a sample (failures are samples too, with the reason)."""
        from cuzk.engine.compiled_recipe import use_compiled
        from cuzk.groth16.verifier import verify_proof

        submit_unix = time.time()
        t0 = time.monotonic()
        partitions: list[dict[str, Any]] = []
        status, error, proof_bytes = "COMPLETED", "", 0
        try:
            request = self.inputs.engine_request(request_id=f"local-{index}")
            plan = self.provider.plan(request)
            use_compiled(plan, self.provider, self.compiled, request)
            planned = time.monotonic()
            for part in plan.partitions:
                s0 = time.monotonic()
                asg = part.recipe.assignment()
                s1 = time.monotonic()
                phases: dict[str, float] = {}
                proof = self.backend.prove(self.pk, asg, timings=phases)
                d1 = time.monotonic()
                if self.verify and not verify_proof(self.pvk, proof, part.public_inputs):
                    raise CuzkError(f"partition {part.index}: the proof did not verify")
                proof_bytes += len(proof.to_bytes())
                done = time.monotonic()
                partitions.append({
                    "index": part.index, "planned_ms": _ms(planned - t0), "synth_start_ms": _ms(s0 - t0),
                    "synth_end_ms": _ms(s1 - t0), "device_queue_ms": _ms(s1 - t0), "device_start_ms": _ms(s1 - t0),
                    "device_end_ms": _ms(d1 - t0), "done_ms": _ms(done - t0), "device_ordinal": 0,
                    "worker": DEVICE_WORKER, "synth_worker": SYNTH_WORKER, "batch_size": 1,
                    "verify_us": round((done - d1) * 1e6),
                    "device_phases_us": {k: round(v * 1e6) for k, v in phases.items()},
                })
        except Exception as err:
            status, error = "FAILED", f"{type(err).__name__}: {err}"
        end = time.monotonic()
        result = {
            "job_id": f"local-{index}", "status": status, "error": error, "proof_bytes": proof_bytes,
            "queue_wait_ms": 0, "srs_load_ms": 0,
            "synthesis_ms": sum(p["synth_end_ms"] - p["synth_start_ms"] for p in partitions),
            "gpu_compute_ms": sum(p["device_end_ms"] - p["device_start_ms"] for p in partitions),
            "verify_ms": round(sum(p["verify_us"] for p in partitions) / 1000), "total_ms": _ms(end - t0),
            "submitted_at_unix_ms": round(submit_unix * 1000), "started_at_unix_ms": round(submit_unix * 1000),
            "finished_at_unix_ms": round((submit_unix + end - t0) * 1000), "proof_kind": self.inputs.kind,
            "circuit_id": self.circuit_id, "partitions": partitions,
        }
        return {"index": index, "stream": "local", "kind": self.inputs.label, "priority": "default",
                "deadline_s": None, "warmup": warmup, "job_id": result["job_id"], "status": status, "error": error,
                "submit_unix_ms": submit_unix * 1000, "end_unix_ms": (submit_unix + end - t0) * 1000,
                "latency_s": end - t0, "result": result}


def run_local(prover: LocalProver, *, count: int, warmup: int = 0,
              on_sample: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    if count < 1:
        raise CuzkError(f"-c/--count must be at least 1, got {count}")
    if warmup < 0:
        raise CuzkError(f"--warmup must be at least 0, got {warmup}")
    samples = []
    for k in [-1 - w for w in range(warmup)] + list(range(count)):
        sample = prover.prove(k, warmup=k < 0)
        samples.append(sample)
        if on_sample is not None:
            on_sample(sample)
    return samples
