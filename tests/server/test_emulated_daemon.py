"""`cuzk daemon run` proving on an emulated CUDA card (`[gpus] emulate`) over gRPC: a test circuit and
each Filecoin kind at 2KiB as Curio sends them, every proof checked by cuzk's verifier and one
partition of each also by py_ecc's (`reference_verifier`), and the status telling the card's truth."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fixture_params import official_params
from providers.filecoin.test_filecoin_providers import (
    MINER,
    RANDOMNESS,
    SECTOR_NUMBER,
    SIZE,
    WINDOW_SECTORS,
    WINNING_SECTOR,
    c1_2k,
    curio_submit,
    porep_request,
    sector_2k,
    snap_request,
    snap_update,
    window_request,
    winning_request,
)
from server.conftest import LiveDaemon, start_daemon

from cuzk.circuits.filecoin.compound_porep import seal_public_inputs, verify_seal
from cuzk.circuits.filecoin.compound_post import fallback_post_public_inputs, verify_window_post, verify_winning_post
from cuzk.circuits.filecoin.compound_snap import update_public_inputs, verify_update
from cuzk.filecoin.sizes import CircuitKind, parameter_file_name
from cuzk.groth16 import reference_verifier
from cuzk.groth16.formats.params_file import read_vk, vk_to_bytes
from cuzk.providers.debug import debug_params_path, debug_public_inputs
from cuzk.providers.filecoin.payload import prover_id_from_miner
from cuzk.server._gen import proving_pb2 as pb
from cuzk.server.client import build_submit, payload_for_test_circuit

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("g++") is None, reason="the emulated device builds its kernels with g++")]

CARD = 8 << 30


@pytest.fixture(scope="module")
def emulated_daemon(tmp_path_factory: pytest.TempPathFactory, server_params: Path, porep_2k_params: Path,
                    monkeypatch_module: pytest.MonkeyPatch) -> LiveDaemon:
    params = tmp_path_factory.mktemp("emulated-params")
    for f in [*server_params.iterdir(), *porep_2k_params.parent.glob(porep_2k_params.stem + ".*")]:
        shutil.copy(f, params / f.name)
    for circuit, seed in (("winning-2k", 11), ("wpost-2k", 13), ("snap-2k", 14)):
        official_params(params, circuit, seed)
    for name in ("CUZK_EMULATED_GPUS", "CUZK_EMULATED_GPU_ROOM"):
        monkeypatch_module.delenv(name, raising=False)
    daemon = start_daemon(tmp_path_factory.mktemp("emulated-daemon"), params,
                          gpus={"backend": "cuda", "emulate": [CARD], "gpu_workers_per_device": 2},
                          memory={"total_budget": "16GiB"})
    yield daemon
    code = daemon.stop()
    assert code == 0, f"the daemon exited with {code} on SIGTERM; log:\n{daemon.log()}"


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def vk_of(daemon: LiveDaemon, kind: CircuitKind):  # type: ignore[no-untyped-def]
    return read_vk(daemon.root / "params" / parameter_file_name(kind, SIZE, "vk"))


def completed(result: pb.AwaitProofResponse, circuit_id: str) -> bytes:
    assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message
    assert result.circuit_id == circuit_id
    return result.proof


def test_the_status_tells_the_emulated_card(emulated_daemon: LiveDaemon) -> None:
    with emulated_daemon.client() as client:
        status = client.status()
    (gpu,) = status.gpus
    assert gpu.device_kind == "cuda" and "emulated" in gpu.name and gpu.vram_total_bytes == CARD


def test_a_test_circuit(emulated_daemon: LiveDaemon, server_params: Path) -> None:
    with emulated_daemon.client(timeout=60) as client:
        request = build_submit("test", request_id="emu-mimc", vanilla_proof=payload_for_test_circuit("mimc-3", seed=3))
        proof = completed(client.prove(request, timeout=600), "mimc-3")
    vk = read_vk(debug_params_path(server_params, "mimc-3"))
    assert reference_verifier.verify(vk_to_bytes(vk), proof, debug_public_inputs("mimc-3", 3))


def test_winning_post_2k(emulated_daemon: LiveDaemon) -> None:
    with emulated_daemon.client(timeout=60) as client:
        proof = completed(client.prove(curio_submit(winning_request(request_id="emu-winning")), timeout=900),
                          "winning-2k")
    vk = vk_of(emulated_daemon, CircuitKind.WINNING)
    replicas = {WINNING_SECTOR: sector_2k().comm_r}
    assert verify_winning_post(vk, proof, registered_proof=0, randomness=RANDOMNESS,
                               prover_id=prover_id_from_miner(MINER), replicas=replicas)
    sectors = list(replicas.items()) * 66  # WinningPoSt lists its one sector 66 times
    inputs = fallback_post_public_inputs(0, randomness=RANDOMNESS, sectors=sectors, k=0)
    assert reference_verifier.verify(vk_to_bytes(vk), proof[:192], inputs)


def test_window_post_2k(emulated_daemon: LiveDaemon) -> None:
    with emulated_daemon.client(timeout=60) as client:
        proof = completed(client.prove(curio_submit(window_request(request_id="emu-window")), timeout=900),
                          "wpost-2k")
    vk = vk_of(emulated_daemon, CircuitKind.WINDOW)
    replicas = {s: sector_2k().comm_r for s in WINDOW_SECTORS}
    assert verify_window_post(vk, proof, registered_proof=10, randomness=RANDOMNESS,
                              prover_id=prover_id_from_miner(MINER), replicas=replicas)
    inputs = fallback_post_public_inputs(10, randomness=RANDOMNESS, sectors=sorted(replicas.items()), k=0)
    assert reference_verifier.verify(vk_to_bytes(vk), proof[:192], inputs)


def test_snap_deals_2k(emulated_daemon: LiveDaemon) -> None:
    with emulated_daemon.client(timeout=60) as client:
        proof = completed(client.prove(curio_submit(snap_request(request_id="emu-snap")), timeout=900), "snap-2k")
    update, _ = snap_update()
    vk = vk_of(emulated_daemon, CircuitKind.SNAP)
    commitments = {"comm_r_old": update.comm_r_old, "comm_d_new": update.comm_d_new, "comm_r_new": update.comm_r_new}
    assert verify_update(vk, proof, registered_proof=0, **commitments)
    assert reference_verifier.verify(vk_to_bytes(vk), proof[:192], update_public_inputs(0, **commitments, k=0))


def test_porep_2k(emulated_daemon: LiveDaemon) -> None:
    c1 = c1_2k()
    with emulated_daemon.client(timeout=60) as client:
        proof = completed(client.prove(curio_submit(porep_request()), timeout=1800), "porep-2k")
    vk = vk_of(emulated_daemon, CircuitKind.POREP)
    public = {"comm_r": c1.comm_r, "comm_d": c1.comm_d, "prover_id": prover_id_from_miner(MINER),
              "sector_id": SECTOR_NUMBER, "ticket": c1.ticket, "seed": c1.seed}
    assert verify_seal(vk, proof, registered_proof=c1.registered_proof, **public)
    inputs = seal_public_inputs(c1.registered_proof, **public, k=0)
    assert reference_verifier.verify(vk_to_bytes(vk), proof[:192], inputs)
