"""The `cuzk` command line: real runs, exit codes, and errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuzk.cli.main import COMMAND_MODULES, build_parser, main


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_entry_point_is_installed() -> None:
    # The script installed next to this interpreter (a `cuzk` elsewhere on PATH may be another install).
    exe = Path(sys.executable).with_name("cuzk")
    assert exe.exists(), f"no cuzk entry point next to {sys.executable}"
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("cuzk ")


def _commands(parser) -> set[str]:
    return set(parser._subparsers._group_actions[0].choices)


def test_command_table_names_every_command_and_its_module() -> None:
    # A command line naming one command imports only the module COMMAND_MODULES gives for it.
    assert _commands(build_parser()) == set(COMMAND_MODULES)
    for name, module in COMMAND_MODULES.items():
        registered = _commands(build_parser([name]))
        assert name in registered
        assert {COMMAND_MODULES[c] for c in registered} == {module}


def test_one_command_does_not_import_the_others() -> None:
    code = ("import sys; from cuzk.cli.main import build_parser; build_parser(['groth16']); "
            "print('grpc' in sys.modules, 'cuzk.cli.client_cmd' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["False", "False"]


def test_params_info_reports_the_layout(capsys, mimc_params) -> None:
    code, out, _ = run_cli(capsys, "params", "info", mimc_params.params_path, "--json", "--digest", "--check")
    assert code == 0
    info = json.loads(out)
    assert info["kind"] == "params" and info["domain_size"] == 1024 and info["public_inputs"] == 1
    assert info["vectors"]["h"]["count"] == 1023
    assert len(info["blake2b_digest"]) == 32 and info["points_checked"] == "on curve"
    code, out, _ = run_cli(capsys, "params", "info", mimc_params.vk_path)
    assert code == 0 and "vk" in out


def test_params_gen_prove_verify_export(capsys, tmp_path: Path) -> None:
    out = tmp_path / "bits.params"
    code, _, err = run_cli(capsys, "params", "gen", "--insecure", "bits-1", out, "--seed", "4")
    assert code == 0 and "INSECURE" in err
    assert out.exists() and out.with_suffix(".vk").exists()
    proof, public, proof_bin = tmp_path / "proof.json", tmp_path / "public.json", tmp_path / "proof.bin"
    code, _, _ = run_cli(capsys, "groth16", "prove", "--params", out, "--circuit", "bits-1", "--proof", proof,
                         "--public", public, "--proof-bin", proof_bin)
    assert code == 0 and len(proof_bin.read_bytes()) == 192
    vk_json = tmp_path / "vk.json"
    assert run_cli(capsys, "groth16", "export-vk", out.with_suffix(".vk"), vk_json)[0] == 0
    for vk in (vk_json, out.with_suffix(".vk"), out):
        for p in (proof, proof_bin):
            code, stdout, _ = run_cli(capsys, "groth16", "verify", vk, public, p)
            assert (code, stdout.strip()) == (0, "OK")
    values = json.loads(public.read_text())
    values[0] = str(int(values[0]) + 1)
    public.write_text(json.dumps(values))
    code, stdout, _ = run_cli(capsys, "groth16", "verify", vk_json, public, proof)
    assert code == 1 and stdout.startswith("INVALID")


def test_gen_refuses_official_names_and_needs_insecure(capsys, tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "params", "gen", "--insecure", "bits-1", tmp_path / "v28-foo.params")
    assert code == 2 and "refusing to write" in err
    with pytest.raises(SystemExit) as info:
        main(["params", "gen", "bits-1", str(tmp_path / "x.params")])
    assert info.value.code == 2


def test_params_gen_from_a_compiled_file_writes_the_recorded_key(capsys, tmp_path: Path) -> None:
    recorded = tmp_path / "recorded.params"
    assert run_cli(capsys, "params", "gen", "--insecure", "bits-1", recorded, "--seed", "9")[0] == 0
    assert run_cli(capsys, "circuit", "compile", "bits-1", "--param-cache", tmp_path)[0] == 0
    compiled = next((tmp_path / "compiled").glob("bits-1*"))
    streamed = tmp_path / "streamed.params"
    code, _, err = run_cli(capsys, "params", "gen", "--insecure", "bits-1", streamed, "--seed", "9",
                           "--compiled", compiled, "--backend", "cpu")
    err = " ".join(err.split())  # rich wraps the summary line at the terminal's width
    assert code == 0 and "QAP at tau" in err and "INSECURE" in err
    assert streamed.read_bytes() == recorded.read_bytes()
    assert streamed.with_suffix(".vk").read_bytes() == recorded.with_suffix(".vk").read_bytes()
    code, _, err = run_cli(capsys, "params", "gen", "--insecure", "bits-2", tmp_path / "x.params", "--compiled",
                           compiled)
    assert code == 2 and "holds circuit 'bits-1', not 'bits-2'" in err
    assert not (tmp_path / "x.params").exists()


def test_params_gen_compiles_block_circuits_block_by_block(capsys, tmp_path: Path) -> None:
    """Without --compiled, a Filecoin circuit made of identical blocks (here WinningPoSt-2KiB's 66 challenges) is
    compiled block by block, as the large ones must be; the key equals the one from the whole recording."""
    import random

    from cuzk.circuits.registry import lookup
    from cuzk.groth16.formats.params_file import write_params
    from cuzk.groth16.setup import ToxicWaste, generate_insecure_parameters

    out = tmp_path / "winning.params"
    code, _, err = run_cli(capsys, "params", "gen", "--insecure", "winning-2k", out, "--seed", "3")
    err = " ".join(err.split())  # rich wraps the summary line at the terminal's width
    assert code == 0 and "compiling the circuit" in err
    expected = tmp_path / "expected.params"
    write_params(expected, generate_insecure_parameters(lookup("winning-2k").blank(),
                                                        waste=ToxicWaste.random(random.Random(3))))
    assert out.read_bytes() == expected.read_bytes()


def test_params_gen_stopped_by_sigterm_leaves_no_temporary(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "k.params"
    proc = subprocess.Popen([sys.executable, "-m", "cuzk.cli.main", "params", "gen", "--insecure", "winning-2k",
                             str(out), "--seed", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".k.params.tmp-*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the command ended before its file was started"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("signal_exc,code", [(SystemExit(143), 143), (KeyboardInterrupt(), 130)])
def test_signal_reported_by_c_code_keeps_its_exit_status(capsys, monkeypatch, signal_exc, code: int) -> None:
    """SIGTERM's handler (sys.exit(143)) or Ctrl-C landing while a numba dispatcher runs Python comes
    back as SystemError("... returned a result with an exception set") caused by it; the command still
    ends with the signal's status, not a crash's 1 (seen once in CI on params gen)."""
    import argparse

    import cuzk.cli.main as cli_main

    def handler(args: argparse.Namespace) -> int:
        try:
            raise signal_exc
        except BaseException as exc:
            raise SystemError("CPUDispatcher(<function f>) returned a result with an exception set") from exc

    class Parser:
        def parse_args(self, argv: list[str]) -> argparse.Namespace:
            return argparse.Namespace(handler=handler)

    monkeypatch.setattr(cli_main, "build_parser", lambda argv: Parser())
    if code == 143:
        with pytest.raises(SystemExit) as info:
            main(["params", "gen"])
        assert info.value.code == 143
    else:
        assert main(["params", "gen"]) == 130
        assert "interrupted" in capsys.readouterr().err

    def crash(args: argparse.Namespace) -> int:
        raise SystemError("a real one")

    monkeypatch.setattr(cli_main, "build_parser", lambda argv: type("P", (), {
        "parse_args": lambda self, argv: argparse.Namespace(handler=crash)})())
    with pytest.raises(SystemError, match="a real one"):
        main(["params", "gen"])


def test_params_gen_on_cuda_without_a_gpu_says_why(capsys, tmp_path: Path) -> None:
    from cuzk.backends.cuda import cuda_available

    reason = cuda_available()
    if reason is None:
        pytest.skip("a GPU is usable here")
    code, _, err = run_cli(capsys, "params", "gen", "--insecure", "bits-1", tmp_path / "x.params", "--backend", "cuda")
    assert code == 2 and f"--backend cuda: {reason}" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv,needle", [
    (["params", "info", "/nonexistent.params"], "no such file"),
    (["params", "gen", "--insecure", "bits-1", "/tmp/x.params", "--compiled", "/nonexistent.cc"], "no such file"),
    (["params", "gen", "--insecure", "nope-3", "/tmp/x.params"], "unknown circuit"),
    (["groth16", "prove", "--proof", "p.json", "--public", "q.json"], "needs --zkey and --wtns"),
])
def test_user_errors_exit_2_with_one_line(capsys, argv: list[str], needle: str) -> None:
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and needle in err and "Traceback" not in err


def test_garbage_files_give_clean_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.params"
    junk.write_bytes(b"\x01" * 300)
    proc = subprocess.run([sys.executable, "-m", "cuzk.cli.main", "params", "info", str(junk)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "junk.params" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_demo_runs_end_to_end(capsys, tmp_path: Path) -> None:
    report = tmp_path / "demo.json"
    code, out, _ = run_cli(capsys, "demo", "--circuit", "mimc-10", "--cache-dir", tmp_path, "--json", report)
    assert code == 0 and "proof verified by cuzk and by py_ecc" in out
    steps = {s["step"]: s for s in json.loads(report.read_text())["steps"]}
    assert steps["verify (cuzk)"]["notes"] == "OK" and steps["verify (py_ecc)"]["notes"] == "OK"
    assert steps["parameters"]["notes"].startswith("generated")
    # second run loads the cached parameters
    code, out, _ = run_cli(capsys, "demo", "--circuit", "mimc-10", "--cache-dir", tmp_path, "--json", report)
    assert code == 0
    steps = {s["step"]: s for s in json.loads(report.read_text())["steps"]}
    assert steps["parameters"]["notes"].startswith("loaded")
