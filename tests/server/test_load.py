"""Load: 208 jobs from 16 concurrent clients against a live daemon. Every job gets exactly one
result, every proof verifies, the counters agree, and the daemon's processes stay within budget."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from server.conftest import start_daemon

from cuzk.groth16.formats.params_file import read_vk
from cuzk.groth16.proof import proofs_from_bytes
from cuzk.groth16.verifier import prepare_verifying_key, verify_proof
from cuzk.providers.debug import debug_params_path, debug_public_inputs
from cuzk.server._gen import proving_pb2 as pb
from cuzk.server.client import CuzkClient, build_submit, payload_for_test_circuit

CLIENTS = 16
JOBS_PER_CLIENT = 13
BUDGET = 2 << 30


def partitions(client: int, job: int) -> int:
    """One to three partitions, so jobs overlap partition by partition in the pipeline."""
    return 1 + (client + job) % 3


@pytest.mark.slow
def test_many_clients_many_jobs(tmp_path: Path, server_params: Path) -> None:
    d = start_daemon(tmp_path / "load", server_params, memory={"total_budget": BUDGET},
                     pipeline={"synthesis_lookahead": 4})
    results: dict[str, list[pb.AwaitProofResponse]] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop_sampling = threading.Event()
    peak_rss = [0]

    def sample() -> None:
        while not stop_sampling.wait(0.05):
            peak_rss[0] = max(peak_rss[0], d.tree_rss())

    def client(k: int) -> None:
        try:
            with CuzkClient(d.tcp_addr if k % 2 else d.unix_addr, timeout=None) as c:
                for j in range(JOBS_PER_CLIENT):
                    rid = f"load-{k}-{j}"
                    request = build_submit("test", request_id=rid, vanilla_proof=payload_for_test_circuit(
                        "mimc-3", partitions=partitions(k, j), seed=1000 * k + j))
                    if (k + j) % 2:
                        result = c.prove(request, timeout=300)
                    else:
                        job = c.submit(request).job_id
                        result = c.await_proof(job, 300_000)
                    with lock:
                        results.setdefault(rid, []).append(result)
        except BaseException as err:
            errors.append(err)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.monotonic()
    try:
        threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        elapsed = time.monotonic() - start
        with d.client() as c:
            status = c.status()
            metrics = c.metrics()
    finally:
        stop_sampling.set()
        sampler.join(5)
        code = d.stop()
    assert not errors, errors[:3]
    total = CLIENTS * JOBS_PER_CLIENT
    assert len(results) == total and all(len(r) == 1 for r in results.values()), "exactly one result per job"
    assert {r[0].job_id for r in results.values()} == set(results), "no job lost, merged or duplicated"
    pvk = prepare_verifying_key(read_vk(debug_params_path(server_params, "mimc-3")))
    for rid, (result,) in results.items():
        assert result.status == pb.AwaitProofResponse.COMPLETED, (rid, result.error_message)
        k, j = map(int, rid.split("-")[1:])
        proofs = proofs_from_bytes(result.proof, expected=partitions(k, j))
        for n, proof in enumerate(proofs):
            assert verify_proof(pvk, proof, debug_public_inputs("mimc-3", 1000 * k + j + n)), (rid, n)
    assert status.total_proofs_completed == total and status.total_proofs_failed == 0
    assert f"cuzk_proofs_completed_total {float(total)}" in metrics
    assert status.memory_reserved_bytes <= status.memory_budget_bytes == BUDGET
    assert 0 < peak_rss[0] <= BUDGET, f"peak RSS {peak_rss[0]:,} over the {BUDGET:,}-byte budget"
    assert code == 0
    print(f"{total} jobs from {CLIENTS} clients in {elapsed:.1f} s; peak RSS {peak_rss[0] / 2**20:.0f} MiB")
