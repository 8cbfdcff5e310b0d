"""Run the real circom2 and snarkjs tools to build BLS12-381 test fixtures (helper module, no tests).

Both tools are GPL-3.0 npm packages installed by `npm install` into the repository's node_modules.
They are only ever run as external programs here; nothing of theirs is imported or copied.

Entry points:
- `tools_missing_reason()`: None when node, circom2 and snarkjs are usable, else why not (for skips).
- `build_circom_fixture(circuit, workdir, ptau_power=..., input=...)`: compile, trusted setup, witness,
  and snarkjs's own proof, returning the file paths as `Paths`.
- `standard_fixtures(base_dir)`: the two circuits of tests/fixtures/circom sharing one ptau, built once
  per process (wrap it in a session fixture; see its docstring).
- `snarkjs_verify`, `zkey_export_json`, `wtns_export_json`: snarkjs as an oracle.

The slow step is `powersoftau prepare phase2` (about 20 s for power 9 on 2 cores). Set the environment
variable CUZK_PTAU_CACHE to a directory to keep prepared ptau files between test sessions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
NODE_MODULES = REPO_ROOT / "node_modules"
SNARKJS_CLI = NODE_MODULES / "snarkjs" / "build" / "cli.cjs"
CIRCOM_CLI = NODE_MODULES / "circom2" / "cli.js"
CIRCUITS_DIR = REPO_ROOT / "tests" / "fixtures" / "circom"
PTAU_CACHE_ENV = "CUZK_PTAU_CACHE"

# Fixed entropy only avoids the interactive prompt: snarkjs mixes in OS randomness, so keys differ
# between builds. Tests must compare against the files of the same build, never against constants.
_ENTROPY = "cuzk-test-fixture-entropy"
_TOOL_TIMEOUT_S = float(os.environ.get("CUZK_TOOL_TIMEOUT_S", "600"))  # big benchmark ptaus need more


class ToolError(RuntimeError):
    """A circom2/snarkjs run failed; the message carries its command line and output."""


@dataclass(frozen=True)
class Paths:
    """The files of one built circuit fixture (all in `workdir`)."""

    workdir: Path
    r1cs: Path
    wasm: Path
    zkey: Path
    vk_json: Path
    wtns: Path
    public_json: Path
    proof_json: Path
    input_json: Path
    build_seconds: float


def tools_missing_reason() -> str | None:
    """Why the external tools cannot run here, or None when they can."""
    if shutil.which("node") is None:
        return "node is not on PATH (needed to run snarkjs and circom2)"
    for cli, package in ((SNARKJS_CLI, "snarkjs"), (CIRCOM_CLI, "circom2")):
        if not cli.is_file():
            return f"{package} is not installed: {cli} is missing (run `npm install` in {REPO_ROOT})"
    return None


def _run(cli: Path, args: list[str], cwd: Path,
         timeout: float = _TOOL_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    cmd = ["node", str(cli), *args]
    env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"}
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"timed out after {timeout} s: {' '.join(cmd)} (in {cwd})") from exc
    return proc


def run_snarkjs(*args: str | os.PathLike[str], cwd: Path,
                check: bool = True) -> subprocess.CompletedProcess[str]:
    """`snarkjs <args>` in `cwd`; raises ToolError on a non-zero exit when `check`."""
    proc = _run(SNARKJS_CLI, [str(a) for a in args], cwd)
    if check and proc.returncode != 0:
        raise ToolError(f"snarkjs {' '.join(str(a) for a in args)} failed with exit code {proc.returncode} "
                        f"(in {cwd})\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def run_circom(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`circom2 <args>` in `cwd` (circom2's WASI sandbox sees cwd and its parents; keep paths relative)."""
    proc = _run(CIRCOM_CLI, list(args), cwd)
    if proc.returncode != 0:
        raise ToolError(f"circom2 {' '.join(args)} failed with exit code {proc.returncode} (in {cwd})\n"
                        f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def build_ptau(workdir: Path, power: int) -> Path:
    """A prepared (phase 2) BLS12-381 powers-of-tau file of 2^power, with one contribution.

    Reused when `workdir` already holds it, or when $CUZK_PTAU_CACHE holds one from an earlier run.
    A ptau of power p serves circuits up to a domain of 2^p: `zkey new` needs the Lagrange basis of the
    doubled domain 2^(p+1) for H, which `prepare phase2` computes for tauG1 (one power beyond p).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    name = f"pot{power}_final.ptau"
    final = workdir / name
    if final.is_file():
        return final
    cache_dir = os.environ.get(PTAU_CACHE_ENV)
    cached = Path(cache_dir) / name if cache_dir else None
    if cached is not None and cached.is_file():
        shutil.copyfile(cached, final)
        return final
    p0, p1, tmp = (workdir / f"pot{power}_{tag}.ptau" for tag in ("0000", "0001", "final.tmp"))
    run_snarkjs("powersoftau", "new", "bls12381", str(power), p0.name, cwd=workdir)
    run_snarkjs("powersoftau", "contribute", p0.name, p1.name, "--name=cuzk fixture", f"-e={_ENTROPY}",
                cwd=workdir)
    run_snarkjs("powersoftau", "prepare", "phase2", p1.name, tmp.name, cwd=workdir)
    tmp.replace(final)
    p0.unlink()
    p1.unlink()
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        part = cached.with_suffix(f".{os.getpid()}.part")
        shutil.copyfile(final, part)
        part.replace(cached)
    return final


def build_circom_fixture(circuit_path: Path, workdir: Path, *, ptau_power: int, input: dict[str, Any],
                         ptau: Path | None = None) -> Paths:
    """Compile `circuit_path` for BLS12-381 and run the whole snarkjs Groth16 flow on `input`.

    Steps: circom2 --r1cs --wasm --prime bls12381; the ptau (`build_ptau`, unless `ptau` is given);
    groth16 setup; one zkey contribution; export of the verification key; wtns calculate; and snarkjs's
    own groth16 prove, whose proof.json / public.json are the reference outputs.
    """
    start = time.perf_counter()
    workdir.mkdir(parents=True, exist_ok=True)
    name = circuit_path.stem
    local_circuit = workdir / circuit_path.name
    if circuit_path.resolve() != local_circuit.resolve():
        shutil.copyfile(circuit_path, local_circuit)
    run_circom(local_circuit.name, "--r1cs", "--wasm", "--sym", "--prime", "bls12381", cwd=workdir)
    ptau_file = ptau if ptau is not None else build_ptau(workdir, ptau_power)
    paths = Paths(
        workdir=workdir,
        r1cs=workdir / f"{name}.r1cs",
        wasm=workdir / f"{name}_js" / f"{name}.wasm",
        zkey=workdir / f"{name}.zkey",
        vk_json=workdir / f"{name}_vk.json",
        wtns=workdir / f"{name}.wtns",
        public_json=workdir / f"{name}_public.json",
        proof_json=workdir / f"{name}_proof.json",
        input_json=workdir / f"{name}_input.json",
        build_seconds=0.0,
    )
    zkey0 = workdir / f"{name}_0000.zkey"
    run_snarkjs("groth16", "setup", paths.r1cs, ptau_file, zkey0, cwd=workdir)
    run_snarkjs("zkey", "contribute", zkey0, paths.zkey, "--name=cuzk fixture", f"-e={_ENTROPY}", cwd=workdir)
    zkey0.unlink()
    run_snarkjs("zkey", "export", "verificationkey", paths.zkey, paths.vk_json, cwd=workdir)
    paths.input_json.write_text(json.dumps(input))
    run_snarkjs("wtns", "calculate", paths.wasm, paths.input_json, paths.wtns, cwd=workdir)
    run_snarkjs("groth16", "prove", paths.zkey, paths.wtns, paths.proof_json, paths.public_json, cwd=workdir)
    return Paths(**{**paths.__dict__, "build_seconds": time.perf_counter() - start})


def snarkjs_verify(vk_json: Path, public_json: Path, proof_json: Path) -> bool:
    """`snarkjs groth16 verify`: True iff it exits 0 and reports OK!."""
    proc = run_snarkjs("groth16", "verify", vk_json, public_json, proof_json, cwd=Path(vk_json).parent,
                       check=False)
    return proc.returncode == 0 and "OK!" in proc.stdout


def zkey_export_json(zkey: Path, out: Path | None = None) -> dict[str, Any]:
    """`snarkjs zkey export json`: the zkey with canonical decimal values (reference decoder)."""
    out = out or zkey.with_suffix(".zkey.json")
    run_snarkjs("zkey", "export", "json", zkey, out, cwd=zkey.parent)
    return json.loads(out.read_text())


def wtns_export_json(wtns: Path, out: Path | None = None) -> list[str]:
    """`snarkjs wtns export json`: the witness as decimal strings."""
    out = out or wtns.with_suffix(".wtns.json")
    run_snarkjs("wtns", "export", "json", wtns, out, cwd=wtns.parent)
    return json.loads(out.read_text())


def write_square_chain(dest_dir: Path, n: int) -> Path:
    """A copy of square_chain.circom with N = n (rows = n + 3; the domain is the next power of two)."""
    source = (CIRCUITS_DIR / "square_chain.circom").read_text()
    marker = "component main {public [x]} = SquareChain("
    head, _, _ = source.partition(marker)
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / f"square_chain_{n}.circom"
    dest.write_text(f"{head}{marker}{n});\n")
    return dest


# The standard fixtures: inputs, and one ptau big enough for both (square_chain has a 2^9 domain).
STANDARD_PTAU_POWER = 9
STANDARD_INPUTS: dict[str, dict[str, Any]] = {
    "multiplier": {"a": "3", "b": "11"},
    "square_chain": {"x": "3"},
}
_standard: dict[str, Paths] | None = None


def standard_fixtures(base_dir: Path) -> dict[str, Paths]:
    """Build (once per process) the circuits of tests/fixtures/circom under `base_dir`.

    Returns {"multiplier": Paths, "square_chain": Paths}. Later calls return the first build, whatever
    `base_dir` they pass, so several test modules share one build. For a session fixture:

        @pytest.fixture(scope="session")
        def circom_fixtures(tmp_path_factory):
            reason = snarkjs_tools.tools_missing_reason()
            if reason:
                pytest.skip(reason)
            return snarkjs_tools.standard_fixtures(tmp_path_factory.mktemp("circom"))
    """
    global _standard
    if _standard is not None and all(p.zkey.is_file() for p in _standard.values()):
        return _standard
    ptau = build_ptau(base_dir, STANDARD_PTAU_POWER)
    _standard = {
        name: build_circom_fixture(CIRCUITS_DIR / f"{name}.circom", base_dir / name,
                                   ptau_power=STANDARD_PTAU_POWER, input=inputs, ptau=ptau)
        for name, inputs in STANDARD_INPUTS.items()
    }
    return _standard
