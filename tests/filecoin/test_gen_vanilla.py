"""`cuzk gen-vanilla` (registered on a local parser: the lead wires it into cuzk.cli.main)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from cuzk.cli.gen_vanilla import register
from cuzk.errors import CuzkError
from cuzk.filecoin.c1 import SealCommitPhase1Output
from cuzk.filecoin.porep import verify_porep_vanilla
from cuzk.filecoin.post import FallbackPoStSectorProof, verify_post_vanilla
from cuzk.filecoin.sizes import post_proof, sector_params
from cuzk.filecoin.snap import PartitionProof, verify_snap_vanilla


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="cuzk")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["gen-vanilla", *argv])
    return args.handler(args)


def test_porep_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "porep"
    assert run("porep", "--sector-size", "2KiB", "--out", str(out), "--bincode", "--verify", "--seed", "5") == 0
    assert "porep 2KiB: 3 files" in capsys.readouterr().out
    public = json.loads((out / "public.json").read_text())
    c1 = SealCommitPhase1Output.from_json((out / "c1.json").read_text(), "c1.json")
    assert SealCommitPhase1Output.from_bincode((out / "c1.bin").read_bytes(), public["registered_proof"]) == c1
    assert public["comm_r"] == c1.comm_r.hex() and public["vanilla_verified"] is True
    assert public["parameter_file"].startswith("v28-stacked-proof-of-replication")
    assert public["circuit_id"] == "porep-2k"
    assert public["challenges"] == [[p.challenge for p in c1.vanilla_proofs[0]]]
    prover = bytes.fromhex(public["prover_id"])
    assert verify_porep_vanilla(c1, prover_id=prover, sector_id=public["sector_id"]) == []


def test_post_files(tmp_path: Path) -> None:
    size = sector_params("2KiB")
    for kind, count in (("winning", 3), ("wpost", 2)):
        out = tmp_path / kind
        assert run(kind, "--sector-size", "2KiB", "--out", str(out), "--sectors", str(count), "--verify") == 0
        public = json.loads((out / "public.json").read_text())
        proof = post_proof(public["registered_proof"])
        files = sorted(out.glob(f"{kind}-vanilla-*.bin"))
        assert len(files) == (1 if kind == "winning" else count)
        proofs = [FallbackPoStSectorProof.from_bincode(f.read_bytes(), size, str(f)) for f in files]
        ids = [c["sector_id"] for c in public["challenged_sectors"]]
        assert verify_post_vanilla(proof, bytes.fromhex(public["randomness"]), proofs, sector_ids=ids) == []


def test_snap_files(tmp_path: Path) -> None:
    out = tmp_path / "snap"
    assert run("snap", "--sector-size", "2KiB", "--out", str(out), "--verify") == 0
    public = json.loads((out / "public.json").read_text())
    size = sector_params("2KiB")
    proofs = [PartitionProof.from_bincode((out / "snap-partition-0.bin").read_bytes(), size)]
    h = bytes.fromhex
    assert verify_snap_vanilla(size, h(public["comm_r_old"]), h(public["comm_d_new"]), h(public["comm_r_new"]),
                               proofs, public["h"]) == []
    assert public["k_and_h_select"] == [1]


def test_user_errors(tmp_path: Path) -> None:
    out = str(tmp_path)
    with pytest.raises(CuzkError, match="add --sparse"):
        run("porep", "--sector-size", "32GiB", "--out", out)
    with pytest.raises(CuzkError, match="unknown sector size"):
        run("porep", "--sector-size", "3KiB", "--out", out)
    with pytest.raises(CuzkError, match="--ticket: expected 32 bytes"):
        run("porep", "--sector-size", "2KiB", "--out", out, "--ticket", "00ff")
    with pytest.raises(CuzkError, match="--prover-id: not a hex string"):
        run("porep", "--sector-size", "2KiB", "--out", out, "--prover-id", "xyz")
    with pytest.raises(CuzkError, match="randomness: not a canonical field element"):
        run("wpost", "--sector-size", "2KiB", "--out", out, "--randomness", "ff" * 32)
    with pytest.raises(CuzkError, match="sparse sectors support interactive PoRep only"):
        run("porep", "--sector-size", "2KiB", "--out", out, "--sparse", "--registered-proof", "10")
    with pytest.raises(CuzkError, match="is not a winning proof for 2KiB"):
        run("winning", "--sector-size", "2KiB", "--out", out, "--post-proof", "StackedDrgWindow2KiBV1")
