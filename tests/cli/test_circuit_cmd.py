"""`cuzk circuit shape|list`: Filecoin shapes from the table without synthesis, counted shapes on request,
and the .params layout they imply (checked against a real file's size)."""

from __future__ import annotations

import json
import time

import pytest

from cuzk.cli.main import main

POREP_32G_PARAMS = ("v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-"
                    "82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820.params")


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def shape_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code, out, _ = run_cli(capsys, "circuit", "shape", *args, "--json")
    assert code == 0
    return json.loads(out)


def test_porep_32g_comes_from_the_table_at_once(capsys) -> None:
    start = time.perf_counter()
    info = shape_json(capsys, "porep-32g")
    assert time.perf_counter() - start < 5  # 130M rows: never synthesized without --count
    assert info["source"] == "table" and info["count_seconds"] is None and info["table_agrees"] is None
    part = info["per_partition"]
    # docs/circuits.md §6 (rows without the input rows) and the Rust daemon's extracted aux and densities
    assert part["rows_without_input_rows"] == 130_278_541 and part["input_rows"] == part["public_inputs"] == 328
    assert part["aux"] == 130_169_893
    assert part["a_density"] == {"inputs": 328, "aux": 129_753_292, "total": 129_753_620}
    assert part["b_density"] == {"inputs": 1, "aux": 33_112_281, "total": 33_112_282}
    assert info["domain_size"] == 1 << 27 and info["partitions"] == 10 and info["proof_bytes"] == 1920
    assert info["params_file"] == POREP_32G_PARAMS
    assert info["params_layout"] == {"ic": 328, "h": (1 << 27) - 1, "l": 130_169_893, "a": 129_753_620,
                                     "b_g1": 33_112_282, "b_g2": 33_112_282, "params_bytes": 47_373_928_632,
                                     "vk_bytes": 868 + 96 * 328}


@pytest.mark.parametrize(("circuit_id", "rows", "inputs", "partitions"), [
    ("wpost-32g", 125_279_217, 25_840, None),  # one partition per 2,349 sectors: set by the request
    ("snap-2k", 1_705_039, 5, 1),
    ("snap-32g", 81_049_499, 5, 16),
    ("porep-8m", 3_844_929, 40, 1),
    ("winning-2k", 90_750, 133, 1),
])
def test_published_row_counts(capsys, circuit_id: str, rows: int, inputs: int, partitions: int | None) -> None:
    info = shape_json(capsys, circuit_id)
    assert info["per_partition"]["rows_without_input_rows"] == rows
    assert info["per_partition"]["public_inputs"] == inputs and info["partitions"] == partitions


def test_count_synthesizes_and_compares_with_the_table(capsys) -> None:
    info = shape_json(capsys, "wpost-2k", "--count")
    assert info["source"] == "counted" and info["count_seconds"] > 0 and info["table_agrees"] is True
    assert info["per_partition"]["constraints"] == 21_889 and info["per_partition"]["aux"] == 22_128
    code, out, _ = run_cli(capsys, "circuit", "shape", "wpost-2k", "--count")
    assert code == 0 and "counted on the shape back end" in out and "the table agrees" in out
    code, out, _ = run_cli(capsys, "circuit", "shape", "snap-64g")
    assert code == 0 and "source" in out and "table" in out and "85,006,101 + 5 input rows" in out


def test_test_circuits_are_counted(capsys, mimc_params) -> None:
    info = shape_json(capsys, "mimc-10")
    assert info["source"] == "counted" and info["per_partition"]["constraints"] == 1024
    # the layout the shape implies is the one the generator wrote, down to the byte count
    assert info["params_layout"]["params_bytes"] == mimc_params.params_path.stat().st_size
    assert info["params_layout"]["vk_bytes"] == mimc_params.vk_path.stat().st_size
    assert info["params_layout"]["h"] == len(mimc_params.pk.h) and info["params_layout"]["a"] == len(mimc_params.pk.a)


@pytest.mark.parametrize(("argv", "needle"), [
    (["circuit", "shape", "mimc-24"], "pass --count"),  # 16.8M rows: only when asked
    (["circuit", "shape", "porep-4g"], "unknown circuit 'porep-4g'"),
    (["circuit", "shape", "bits-0"], "1 <= N"),
])
def test_bad_ids_exit_2(capsys, argv: list[str], needle: str) -> None:
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and needle in err and "Traceback" not in err


def test_list_names_every_filecoin_id(capsys) -> None:
    code, out, _ = run_cli(capsys, "circuit", "list", "--json")
    assert code == 0
    listing = json.loads(out)
    ids = [row["circuit_id"] for row in listing["filecoin"]]
    assert len(ids) == 20 and {"porep-2k", "winning-64g", "wpost-512m", "snap-32g"} <= set(ids)
    assert all(row["source"] == "table" and row["params_file"].startswith("v28-") for row in listing["filecoin"])
    assert {t["pattern"] for t in listing["test"]} == {"mimc-K", "bits-N"}
    code, out, _ = run_cli(capsys, "circuit", "list")
    assert code == 0 and POREP_32G_PARAMS in out and "130,278,869" in out
