"""`cuzk daemon run` proving on an emulated CUDA card (`[gpus] emulate`) over gRPC: a test circuit,
WinningPoSt-2KiB and WindowPoSt-2KiB as Curio sends them, every proof checked by cuzk's verifier and
by py_ecc's (`reference_verifier`), and the status telling the card's truth.

SnapDeals-2KiB (2^21 constraints) and PoRep-2KiB (2^22) are left out: the emulator runs the MSMs'
kernels one thread at a time (about 40 s for WinningPoSt's 2^17 on two cores), so each would take
10-20 minutes. What is theirs alone on the device, the deferred witness, runs on the emulated device
in tests/gpu (test_cuda_sha256_witness.py: PoRep-2KiB's partition; test_cuda_poseidon_witness.py:
SnapDeals-2KiB's)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fixture_params import official_params
from providers.filecoin.test_filecoin_providers import (
    MINER,
    RANDOMNESS,
    SIZE,
    WINDOW_SECTORS,
    WINNING_SECTOR,
    curio_submit,
    sector_2k,
    window_request,
    winning_request,
)
from server.conftest import LiveDaemon, start_daemon

from cuzk.circuits.filecoin.compound_post import fallback_post_public_inputs, verify_window_post, verify_winning_post
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
def emulated_daemon(tmp_path_factory: pytest.TempPathFactory, server_params: Path,
                    monkeypatch_module: pytest.MonkeyPatch) -> LiveDaemon:
    params = tmp_path_factory.mktemp("emulated-params")
    for f in server_params.iterdir():
        shutil.copy(f, params / f.name)
    for circuit, seed in (("winning-2k", 11), ("wpost-2k", 13)):
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
