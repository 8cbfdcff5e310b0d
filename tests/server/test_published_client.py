"""A client generated from the *published* cuzk.v1 proto (Curio's file, not our copy) against a live daemon.

The published file belongs to another project and is not committed; CI cannot fetch it. Point
CUZK_PUBLISHED_PROTO at a copy (e.g. `git -C <curio> show HEAD:extern/cuzk/cuzk-proto/proto/cuzk/v1/proving.proto`)
to run this test. The client runs in its own interpreter with only grpcio and the freshly generated
modules on its path (our `cuzk` package is shadowed there), speaks to the daemon over TCP and over
its unix socket, and reports what it got; the proofs are verified here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuzk.engine.providers import debug_params_path, debug_public_inputs
from cuzk.groth16.params_file import read_vk
from cuzk.groth16.proof import proofs_from_bytes
from cuzk.groth16.verifier import verify_proof

PUBLISHED = os.environ.get("CUZK_PUBLISHED_PROTO", "")
pytestmark = [
    pytest.mark.skipif(not PUBLISHED, reason="CUZK_PUBLISHED_PROTO is not set (path to Curio's published "
                                             "cuzk/v1/proving.proto); the published file cannot be committed"),
    pytest.mark.skipif(importlib.util.find_spec("grpc_tools") is None, reason="grpcio-tools is not installed"),
]

CLIENT = textwrap.dedent('''
    import json, sys
    import grpc
    from cuzk.v1 import proving_pb2 as pb, proving_pb2_grpc as rpc
    import cuzk.v1.proving_pb2
    assert "cuzk-published" in cuzk.v1.proving_pb2.__file__, "the published client must not use cuzk's copy"

    addr = sys.argv[1]
    def payload(**kw):
        return json.dumps({"test_circuit": "mimc-3", **kw}).encode()
    out = {}
    with grpc.insecure_channel(addr) as channel:
        stub = rpc.ProvingEngineStub(channel)
        s = stub.GetStatus(pb.GetStatusRequest(), timeout=30)
        out["status"] = {"gpus": len(s.gpus), "queues": sorted(q.proof_kind for q in s.queues),
                         "srs": [e.circuit_id for e in s.loaded_srs], "uptime": s.uptime_seconds}
        r = stub.Prove(pb.ProveRequest(submit=pb.SubmitProofRequest(
            request_id=sys.argv[2] + "-prove", proof_kind=pb.PROOF_KIND_UNSPECIFIED, priority=pb.HIGH,
            vanilla_proof=payload(partitions=2, seed=50))), timeout=120).result
        out["prove"] = {"status": pb.AwaitProofResponse.Status.Name(r.status), "proof": r.proof.hex(),
                        "total_ms": r.total_ms, "error": r.error_message}
        sub = stub.SubmitProof(pb.SubmitProofRequest(request_id=sys.argv[2] + "-submit",
                                                     vanilla_proof=payload(seed=60)), timeout=30)
        a = stub.AwaitProof(pb.AwaitProofRequest(job_id=sub.job_id, timeout_ms=120000), timeout=130)
        out["await"] = {"job_id": sub.job_id, "status": pb.AwaitProofResponse.Status.Name(a.status),
                        "proof": a.proof.hex()}
        slow = stub.SubmitProof(pb.SubmitProofRequest(request_id=sys.argv[2] + "-cancel",
                                                      vanilla_proof=payload(partitions=3, synth_delay_ms=2000)))
        t = stub.AwaitProof(pb.AwaitProofRequest(job_id=slow.job_id, timeout_ms=100), timeout=30)
        out["timeout"] = pb.AwaitProofResponse.Status.Name(t.status)
        c = stub.CancelProof(pb.CancelProofRequest(job_id=slow.job_id), timeout=30)
        a = stub.AwaitProof(pb.AwaitProofRequest(job_id=slow.job_id), timeout=30)
        out["cancel"] = {"was_running": c.was_running, "status": pb.AwaitProofResponse.Status.Name(a.status)}
        try:
            stub.SubmitProof(pb.SubmitProofRequest(proof_kind=pb.WINNING_POST, randomness=bytes(32)), timeout=30)
            out["winning"] = "accepted?"
        except grpc.RpcError as err:
            out["winning"] = [err.code().name, err.details()]
        p = stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="mimc-3"), timeout=60)
        out["preload"] = p.already_loaded
        m = stub.GetMetrics(pb.GetMetricsRequest(), timeout=30)
        out["metrics"] = "cuzk_proofs_completed_total" in m.prometheus_text
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def published_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cuzk-published")
    (root / "proto" / "cuzk" / "v1").mkdir(parents=True)
    (root / "proto" / "cuzk" / "v1" / "proving.proto").write_bytes(Path(PUBLISHED).read_bytes())
    gen = root / "gen"
    gen.mkdir()
    proc = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{root / 'proto'}", f"--python_out={gen}",
                           f"--grpc_python_out={gen}", "cuzk/v1/proving.proto"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    for pkg in (gen / "cuzk", gen / "cuzk" / "v1"):  # regular packages, so they shadow cuzk's own
        (pkg / "__init__.py").write_text("")
    (gen / "client.py").write_text(CLIENT)
    return gen


def run_client(gen: Path, addr: str, tag: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(gen)
    proc = subprocess.run([sys.executable, str(gen / "client.py"), addr, tag], capture_output=True, text=True,
                          env=env, cwd=gen, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def verify(hex_proof: str, params: Path, seed: int, partitions: int) -> bool:
    vk = read_vk(debug_params_path(params, "mimc-3"))
    proofs = proofs_from_bytes(bytes.fromhex(hex_proof), expected=partitions)
    return all(verify_proof(vk, p, debug_public_inputs("mimc-3", seed + k)) for k, p in enumerate(proofs))


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_published_client_against_live_daemon(daemon, published_client: Path, server_params: Path,
                                              transport: str) -> None:
    addr = daemon.tcp_addr if transport == "tcp" else daemon.unix_addr
    out = run_client(published_client, addr, f"pub-{transport}")
    assert out["status"]["gpus"] == 1 and "porep-c2" in out["status"]["queues"]
    assert out["prove"]["status"] == "COMPLETED" and verify(out["prove"]["proof"], server_params, 50, 2)
    assert out["await"]["status"] == "COMPLETED" and verify(out["await"]["proof"], server_params, 60, 1)
    assert out["timeout"] == "TIMEOUT"
    assert out["cancel"]["status"] == "CANCELLED"
    assert out["winning"][0] == "INVALID_ARGUMENT" and "WINNING_POST: vanilla_proofs holds 0" in out["winning"][1]
    assert out["preload"] is True and out["metrics"] is True
