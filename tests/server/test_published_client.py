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
from typing import Any

import pytest

from cuzk.groth16.formats.params_file import read_vk
from cuzk.groth16.proof import proofs_from_bytes
from cuzk.groth16.verifier import verify_proof
from cuzk.providers.debug import debug_params_path, debug_public_inputs

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


# -- Filecoin proofs through the published client ----------------------------------------------------

FILECOIN_CLIENT = textwrap.dedent('''
    import json, sys
    import grpc
    from cuzk.v1 import proving_pb2 as pb, proving_pb2_grpc as rpc
    assert "cuzk-published" in pb.__file__, "the published client must not use cuzk's copy"

    addr, requests = sys.argv[1], json.loads(open(sys.argv[2]).read())
    limit = 256 << 20
    out = {}
    with grpc.insecure_channel(addr, options=[("grpc.max_send_message_length", limit),
                                              ("grpc.max_receive_message_length", limit)]) as channel:
        stub = rpc.ProvingEngineStub(channel)
        for name, fields in requests.items():
            # built by field name, as Curio's client does: names, numbers and enum values must all match
            req = pb.SubmitProofRequest(
                request_id=fields["request_id"], proof_kind=pb.ProofKind.Value(fields["proof_kind"]),
                priority=pb.Priority.Value(fields["priority"]), sector_size=fields["sector_size"],
                registered_proof=fields["registered_proof"], vanilla_proof=bytes.fromhex(fields["vanilla_proof"]),
                vanilla_proofs=[bytes.fromhex(v) for v in fields["vanilla_proofs"]],
                sector_number=fields["sector_number"], miner_id=fields["miner_id"],
                randomness=bytes.fromhex(fields["randomness"]))
            r = stub.Prove(pb.ProveRequest(submit=req), timeout=3600).result
            out[name] = {"status": pb.AwaitProofResponse.Status.Name(r.status), "proof": r.proof.hex(),
                         "error": r.error_message}
    print(json.dumps(out))
''')


def _published_fields(req: Any) -> dict[str, Any]:
    """A ProofRequest as plain JSON for the published client (enum values by their published names)."""
    from cuzk.providers.fields import fields_of
    from cuzk.server._gen import proving_pb2 as ours

    f = fields_of(req)
    return {"request_id": req.request_id, "proof_kind": ours.ProofKind.Name(int(req.proof_kind)),
            "priority": ours.Priority.Name(int(req.priority)), "sector_size": f.sector_size,
            "registered_proof": f.registered_proof, "vanilla_proof": f.vanilla_proof.hex(),
            "vanilla_proofs": [v.hex() for v in f.vanilla_proofs], "sector_number": f.sector_number,
            "miner_id": f.miner_id, "randomness": f.randomness.hex()}


@pytest.mark.slow
def test_published_client_proves_winning_post_and_porep_2k(tmp_path: Path, published_client: Path,
                                                           official_params_dir: Path, porep_2k_params: Path) -> None:
    """WinningPoSt-2KiB and PoRep-2KiB requests sent by the published client (built field by field as
    Curio builds them) come back as proofs that verify here."""
    from fixture_params import official_params
    from providers.filecoin.test_filecoin_providers import (
        MINER,
        RANDOMNESS,
        WINNING_SECTOR,
        c1_2k,
        porep_request,
        sector_2k,
        winning_request,
    )
    from server.conftest import start_daemon

    from cuzk.circuits.filecoin.compound_porep import verify_seal
    from cuzk.circuits.filecoin.compound_post import verify_winning_post
    from cuzk.providers.filecoin.payload import prover_id_from_miner

    winning = official_params(official_params_dir, "winning-2k", 11)
    requests = {"winning": _published_fields(winning_request(request_id="pub-winning")),
                "porep": _published_fields(porep_request(request_id="pub-porep"))}
    (published_client / "requests.json").write_text(json.dumps(requests))
    daemon = start_daemon(tmp_path / "daemon", official_params_dir, memory={"total_budget": "16GiB"})
    try:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = str(published_client)
        (published_client / "filecoin_client.py").write_text(FILECOIN_CLIENT)
        proc = subprocess.run([sys.executable, str(published_client / "filecoin_client.py"), daemon.unix_addr,
                               str(published_client / "requests.json")], capture_output=True, text=True, env=env,
                              cwd=published_client, timeout=3600, check=False)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()
    assert out["winning"]["status"] == "COMPLETED", out["winning"]["error"]
    assert verify_winning_post(read_vk(winning.with_suffix(".vk")), bytes.fromhex(out["winning"]["proof"]),
                               registered_proof=0, randomness=RANDOMNESS, prover_id=prover_id_from_miner(MINER),
                               replicas={WINNING_SECTOR: sector_2k().comm_r})
    c1 = c1_2k()
    assert out["porep"]["status"] == "COMPLETED", out["porep"]["error"]
    assert verify_seal(read_vk(porep_2k_params.with_suffix(".vk")), bytes.fromhex(out["porep"]["proof"]),
                       comm_r=c1.comm_r, comm_d=c1.comm_d, prover_id=prover_id_from_miner(MINER),
                       sector_id=porep_request().sector_number, ticket=c1.ticket, seed=c1.seed,
                       registered_proof=c1.registered_proof)
