"""`cuzk params check FILE CIRCUIT`: header lengths against the circuit's shape. Exit 0 with one OK line,
1 naming every differing length, 2 for files that are not a readable .params (truncated, corrupted
length fields, trailing bytes, a .vk)."""

from __future__ import annotations

import json
import shutil
import struct
import time
from pathlib import Path

import pytest
from fixture_params import official_params

from cuzk.cli.main import main
from cuzk.filecoin.sizes import CircuitKind, parameter_file_name, sector_params
from cuzk.groth16.formats.params_file import VK_HEADER_BYTES, scan_layout


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_fitting_file_gives_one_ok_line(capsys, mimc_params) -> None:
    code, out, err = run_cli(capsys, "params", "check", mimc_params.params_path, "mimc-10")
    assert code == 0 and out.startswith("OK: ") and out.count("\n") == 1 and "Traceback" not in err
    assert "fits mimc-10" in out and "H 1,023" in out and "counted" in out


def test_another_circuit_names_every_differing_length(capsys, mimc_params) -> None:
    # mimc-11: twice the rows, same inputs: H, L, A and both B queries differ, IC does not
    code, out, _ = run_cli(capsys, "params", "check", mimc_params.params_path, "mimc-11")
    assert code == 1 and out.startswith("MISMATCH: ") and "cannot be used for mimc-11" in out
    for needle in ("h length 1,023 in the file, the circuit needs 2,047", "l length 1,022", "a length",
                   "b_g1 length", "b_g2 length"):
        assert needle in out
    assert "ic length" not in out
    code, out, _ = run_cli(capsys, "params", "check", mimc_params.params_path, "bits-3", "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and report["source"] == "counted"
    by_vector = {m["vector"]: m for m in report["mismatches"]}
    assert by_vector["ic"] == {"vector": "ic", "expected": 4, "found": 2,
                               "meaning": "public inputs, ONE included (vk IC)"}
    assert report["found"]["h"] == 1023 and report["expected"]["h"] == 1023  # both have 2^10 domains


def _rewrite_u32(src: Path, dst: Path, offset: int, value: int) -> None:
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        f.seek(offset)
        f.write(struct.pack(">I", value))


def test_unreadable_files_exit_2(capsys, mimc_params, tmp_path: Path) -> None:
    src = mimc_params.params_path
    layout = scan_layout(src)
    truncated = tmp_path / "truncated.params"
    truncated.write_bytes(src.read_bytes()[:-100])
    bigger_l = tmp_path / "bigger-l.params"  # the next length is then read from point bytes: implausible
    _rewrite_u32(src, bigger_l, layout.vector("l").offset - 4, layout.vector("l").count + 1)
    smaller_b = tmp_path / "smaller-b.params"  # a shorter B_G2 leaves bytes after the last vector
    _rewrite_u32(src, smaller_b, layout.vector("b_g2").offset - 4, layout.vector("b_g2").count - 1)
    stub = tmp_path / "stub.params"
    stub.write_bytes(bytes(VK_HEADER_BYTES // 2))
    cases = [(truncated, "the b_g2 vector declares"), (bigger_l, "the a vector declares"),
             (smaller_b, "unexpected bytes"), (stub, "while reading the verifying key"),
             (mimc_params.vk_path, "a verifying key"),
             (tmp_path / "absent.params", "no such file"), (tmp_path, "not a regular file")]
    for path, needle in cases:
        code, out, err = run_cli(capsys, "params", "check", path, "mimc-10")
        assert (code, out) == (2, ""), path
        assert needle in err and str(path) in err and err.count("\n") == 1 and "Traceback" not in err, err
    code, _, err = run_cli(capsys, "params", "check", src, "porep-4g")
    assert code == 2 and "unknown circuit" in err


def _sparse_params(path: Path, ic: int, lengths: list[int]) -> None:
    """A .params file with these lengths whose points are all zero bytes, written sparsely: only the
    length fields occupy disk, whatever the size the header declares."""
    with open(path, "wb") as f:
        f.seek(VK_HEADER_BYTES - 4)
        f.write(struct.pack(">I", ic))
        pos = VK_HEADER_BYTES + 96 * ic
        for i, count in enumerate(lengths):
            f.seek(pos)
            f.write(struct.pack(">I", count))
            pos += 4 + count * (192 if i == 4 else 96)
        f.truncate(pos)


def test_a_47_gb_porep_32g_file_is_checked_from_its_header(capsys, tmp_path: Path) -> None:
    """The lengths of the published porep-32g file (IC 328, H 2^27 − 1, L 130,169,893, A 129,753,620,
    B 33,112,282): checked in well under a second, so no point is read."""
    path = tmp_path / parameter_file_name(CircuitKind.POREP, sector_params("32GiB"))
    _sparse_params(path, 328, [(1 << 27) - 1, 130_169_893, 129_753_620, 33_112_282, 33_112_282])
    assert path.stat().st_size == 47_373_928_632
    start = time.perf_counter()
    code, out, _ = run_cli(capsys, "params", "check", path, "porep-32g")
    assert code == 0 and out.startswith(f"OK: {path} fits porep-32g") and "table" in out
    assert time.perf_counter() - start < 5
    # the same header against the 64GiB circuit: every length but IC differs; the file name is noticed
    code, out, _ = run_cli(capsys, "params", "check", path, "porep-64g")
    assert code == 1 and "the header fits porep-32g" in out
    assert "official parameter file name of porep-32g, not of porep-64g" in out
    assert "l length 130,169,893 in the file, the circuit needs 131,076,643" in out


@pytest.fixture(scope="module")
def winning_2k_params(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Insecure winning-2k parameters under the official name (2^17 domain: ~15 s on 2 cores)."""
    return official_params(tmp_path_factory.mktemp("winning-params"), "winning-2k", 21)


@pytest.mark.slow
def test_generated_filecoin_parameters_fit_their_circuit(capsys, winning_2k_params: Path) -> None:
    code, out, _ = run_cli(capsys, "params", "check", winning_2k_params, "winning-2k")
    assert code == 0 and "fits winning-2k" in out and "IC 133" in out and "table" in out
    code, out, _ = run_cli(capsys, "params", "check", winning_2k_params, "winning-2k", "--count", "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["source"] == "counted" and report["mismatches"] == []
    code, out, _ = run_cli(capsys, "params", "check", winning_2k_params, "wpost-2k")
    assert code == 1 and "ic length 133 in the file, the circuit needs 23" in out
    assert "the header fits winning-2k" in out and "official parameter file name of winning-2k" in out
