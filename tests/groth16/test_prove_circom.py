"""`prove_circom`: the zkey + wtns prover that starts the B_G2 MSM before the key is read and checked.

Its proof must be the one the separate steps give (same r, s), and a key that fails its checks must
still fail with the reader's own error, whether or not the early MSM was started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cuzk.cli.main import main
from cuzk.errors import PointDecodeError
from cuzk.groth16.formats.binfile import read_binfile
from cuzk.groth16.formats.circom import circom_key, prove_circom
from cuzk.groth16.formats.wtns import read_wtns
from cuzk.groth16.formats.zkey import read_zkey, unchecked_b2_limbs
from cuzk.groth16.prover import prove

pytestmark = pytest.mark.external

R, S = 12345, 67890


def _sections(path: Path) -> dict[int, tuple[int, int]]:
    with read_binfile(path, b"zkey", 1) as bf:
        return dict(bf.sections)


def _b2_off_curve(zkey: Path, dest: Path) -> tuple[Path, int]:
    """A copy of zkey with one B2 point (not the identity) moved off the curve; its index."""
    raw = bytearray(zkey.read_bytes())
    off, size = _sections(zkey)[7]
    index = next(i for i in range(size // 192) if raw[off + 192 * i: off + 192 * (i + 1)] != bytes(192))
    raw[off + 192 * index + 150] ^= 4
    dest.write_bytes(bytes(raw))
    return dest, index


@pytest.mark.parametrize("name", ["multiplier", "square_chain"])
def test_same_proof_as_the_separate_steps(circom_fixtures: dict, name: str) -> None:
    paths = circom_fixtures[name]
    key = circom_key(read_zkey(paths.zkey))
    asg = key.assignment(read_wtns(paths.wtns))
    expected = prove(key.pk, asg, r=R, s=S)
    timings: dict[str, float] = {}
    proof, early_asg = prove_circom(paths.zkey, paths.wtns, r=R, s=S, timings=timings)
    assert proof.to_bytes() == expected.to_bytes()
    assert early_asg.public_inputs() == asg.public_inputs()
    assert {"msm_b_g2", "msm_h", "msm_a", "msm_b_g1", "msm_l"} <= timings.keys()


def test_unchecked_b2_limbs(circom_fixtures: dict, tmp_path: Path) -> None:
    paths = circom_fixtures["square_chain"]
    assert np.array_equal(unchecked_b2_limbs(paths.zkey), read_zkey(paths.zkey).affine["b2"])
    # Anything that is not a well-formed key header gives None: the full reader reports it.
    assert unchecked_b2_limbs(paths.wtns) is None
    truncated = tmp_path / "short.zkey"
    truncated.write_bytes(paths.zkey.read_bytes()[:200])
    assert unchecked_b2_limbs(truncated) is None
    assert unchecked_b2_limbs(tmp_path / "missing.zkey") is None


def test_bad_b2_point_fails_with_the_readers_error(circom_fixtures: dict, tmp_path: Path) -> None:
    paths = circom_fixtures["square_chain"]
    bad, index = _b2_off_curve(paths.zkey, tmp_path / "b2.zkey")
    assert unchecked_b2_limbs(bad) is not None  # so the early MSM does start on the bad point
    with pytest.raises(PointDecodeError, match=f"section 7 \\(B2 points\\): point #{index} of"):
        prove_circom(bad, paths.wtns)
    out = tmp_path / "proof.json"
    assert main(["groth16", "prove", "--zkey", str(bad), "--wtns", str(paths.wtns), "--proof", str(out),
                 "--public", str(tmp_path / "public.json")]) == 2
    assert not out.exists()


def test_console_script_exits_with_the_commands_status(circom_fixtures: dict, tmp_path: Path) -> None:
    """`cuzk groth16 prove` leaves through os._exit: outputs complete, status kept, errors printed."""
    paths = circom_fixtures["multiplier"]
    entry = [sys.executable, "-c", "from cuzk.cli.main import entry; entry()"]
    proof, public = tmp_path / "proof.json", tmp_path / "public.json"
    done = subprocess.run([*entry, "groth16", "prove", "--zkey", str(paths.zkey), "--wtns", str(paths.wtns),
                           "--proof", str(proof), "--public", str(public)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"wrote {proof}" in done.stdout
    assert main(["groth16", "verify", str(paths.vk_json), str(public), str(proof)]) == 0
    bad, _ = _b2_off_curve(paths.zkey, tmp_path / "b2.zkey")
    failed = subprocess.run([*entry, "groth16", "prove", "--zkey", str(bad), "--wtns", str(paths.wtns),
                             "--proof", str(tmp_path / "p2.json"), "--public", str(tmp_path / "pub2.json")],
                            capture_output=True, text=True)
    assert failed.returncode == 2
    assert "section 7 (B2 points)" in failed.stderr and "Traceback" not in failed.stderr
