"""GetStatus's GPUs (`cuzk.server.grpc_service.status_to_proto`) from a status built by hand: one
GPUStatus per physical GPU, so that two logical devices on one GPU (`gpus.devices = [0, 0]`) report
as that GPU once with the workers of both, and CPU devices beside it keep their own entries. Its
workers are the lanes that prove at once (`gpus.gpu_workers_per_device`), not those synthesizing
ahead of them."""

from __future__ import annotations

from typing import Any

from cuzk.server.grpc_service import status_to_proto


def _device(label: str, kind: str, ordinal: int, provers: int = 2) -> dict[str, Any]:
    return {"label": label, "ordinal": ordinal, "kind": kind, "name": f"{kind} {ordinal}", "memory_total": 100,
            "memory_free": 40, "provers": provers}


def _worker(device: str, kind: str, ordinal: int, *, job: str = "", reserved: str | None = None,
            state: str = "proving") -> dict[str, Any]:
    return {"worker_id": f"{device}/w", "device": device, "gpu_ordinal": ordinal, "device_kind": kind,
            "state": state if job else "idle", "current_job": job or None,
            "current_proof_kind": "porep" if job else "", "reserved_for": reserved}


def _status(devices: list[dict[str, Any]], workers: list[dict[str, Any]]) -> dict[str, Any]:
    return {"devices": devices, "gpu_workers": workers, "allocations": {"srs": []}, "queues": [],
            "memory": {"used_bytes": 0, "total_bytes": 1, "process_rss_bytes": 0},
            "counters": {"total_completed": 0, "total_failed": 0, "total_cancelled": 0}, "uptime_secs": 1,
            "instance_id": "i", "accepting": True}


def test_two_logical_devices_on_one_gpu_report_that_gpu_once() -> None:
    devices = [_device("cuda0", "cuda", 0), _device("cuda0.1", "cuda", 0), _device("cuda1", "cuda", 1)]
    workers = [_worker("cuda0", "cuda", 0, job="j1"), _worker("cuda0", "cuda", 0),
               _worker("cuda0", "cuda", 0, reserved="CRITICAL"),
               _worker("cuda0.1", "cuda", 0, job="j2"), _worker("cuda0.1", "cuda", 0),
               _worker("cuda0.1", "cuda", 0, reserved="CRITICAL"),
               _worker("cuda1", "cuda", 1), _worker("cuda1", "cuda", 1),
               _worker("cuda0", "cuda", 0, job="j3", state="synthesizing")]  # a lane ahead of the provers
    gpus = status_to_proto(_status(devices, workers)).gpus
    assert [g.ordinal for g in gpus] == [0, 1]
    assert (gpus[0].workers, gpus[0].busy_workers, gpus[0].current_job_id) == (4, 2, "j1")
    assert (gpus[1].workers, gpus[1].busy_workers, gpus[1].current_job_id) == (2, 0, "")


def test_a_cpu_device_with_ordinal_0_beside_gpu_0_is_its_own_entry() -> None:
    devices = [_device("cuda0", "cuda", 0, 1), _device("cpu0", "cpu", 0, 1)]
    workers = [_worker("cuda0", "cuda", 0, job="j"), _worker("cpu0", "cpu", 0)]
    gpus = status_to_proto(_status(devices, workers)).gpus
    assert [(g.device_kind, g.workers, g.busy_workers) for g in gpus] == [("cuda", 1, 1), ("cpu", 1, 0)]
    assert gpus[1].vram_total_bytes == 0  # a CPU device has no VRAM
