"""`cuzk groth16 prove|verify|export-vk`: Groth16 with snarkjs-compatible files.

- prove from a snarkjs `.zkey` and a circom `.wtns`, writing snarkjs `proof.json`/`public.json`;
- prove one of cuzk's own circuits with a `.params` file (`--params/--circuit`);
- verify a proof given as snarkjs JSON or as bellperson's 192 bytes, against a snarkjs `vk.json`
  or a bellperson `.vk`/`.params`;
- export a `.vk`/`.params` verifying key as snarkjs `vk.json`.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuzk.cli.main import EXIT_INVALID, EXIT_OK
from cuzk.errors import CuzkError, FormatError

if TYPE_CHECKING:
    from cuzk.groth16.keys import VerifyingKey
    from cuzk.groth16.proof import Proof


def register(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser("groth16", help="prove and verify with snarkjs/bellperson files")
    gsub = g.add_subparsers(dest="groth16_command", metavar="SUBCOMMAND", required=True)

    p = gsub.add_parser("prove", help="prove from --zkey/--wtns (snarkjs) or --params/--circuit (cuzk)")
    p.add_argument("--zkey", type=Path, help="snarkjs proving key (.zkey), BLS12-381")
    p.add_argument("--wtns", type=Path, help="circom witness (.wtns)")
    p.add_argument("--params", type=Path, help="bellperson .params file (with --circuit)")
    p.add_argument("--circuit", help="cuzk circuit id proven with a random witness (with --params)")
    p.add_argument("--proof", type=Path, required=True, help="output: proof as snarkjs proof.json")
    p.add_argument("--public", type=Path, required=True, help="output: public inputs as snarkjs public.json")
    p.add_argument("--proof-bin", type=Path, help="also write the 192-byte bellperson proof")
    p.set_defaults(handler=cmd_prove, exit_without_teardown=True)

    v = gsub.add_parser("verify", help="verify: VK (vk.json | .vk | .params) PUBLIC (json) PROOF (json | 192 B)")
    v.add_argument("vk", type=Path)
    v.add_argument("public", type=Path)
    v.add_argument("proof", type=Path)
    v.set_defaults(handler=cmd_verify, exit_without_teardown=True)

    e = gsub.add_parser("export-vk", help="write a .vk/.params verifying key as snarkjs vk.json")
    e.add_argument("source", type=Path)
    e.add_argument("out", type=Path)
    e.set_defaults(handler=cmd_export_vk)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as err:
        raise CuzkError(f"cannot read {path}: {err.strerror}") from None
    except (ValueError, RecursionError) as err:  # also over-long numbers and too deep nesting
        raise FormatError(f"not valid JSON ({err})", source=str(path)) from None


def _write_json(path: Path, data: Any) -> None:
    try:
        path.write_text(json.dumps(data, indent=1) + "\n")
    except OSError as err:
        raise CuzkError(f"cannot write {path}: {err.strerror}") from None


def _looks_like_json(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(64).lstrip()
    except OSError as err:
        raise CuzkError(f"cannot read {path}: {err.strerror}") from None
    return head[:1] in (b"{", b"[")


def _load_vk(path: Path) -> VerifyingKey:
    from cuzk.groth16.formats import snarkjs_json
    from cuzk.groth16.formats.params_file import read_vk
    from cuzk.groth16.keys import VerifyingKey

    if _looks_like_json(path):
        parts = snarkjs_json.vk_from_json(_read_json(path), source=str(path))
        return VerifyingKey(alpha_g1=parts["alpha_g1"], beta_g1=None, beta_g2=parts["beta_g2"],
                            gamma_g2=parts["gamma_g2"], delta_g1=None, delta_g2=parts["delta_g2"], ic=list(parts["ic"]))
    return read_vk(path)


def _load_proof(path: Path) -> Proof:
    from cuzk.groth16.formats import snarkjs_json
    from cuzk.groth16.proof import PROOF_BYTES, Proof

    if _looks_like_json(path):
        return Proof(*snarkjs_json.proof_from_json(_read_json(path), source=str(path)))
    data = path.read_bytes()
    if len(data) != PROOF_BYTES:
        raise FormatError(f"expected a snarkjs proof.json or a {PROOF_BYTES}-byte proof, got {len(data)} bytes",
                          source=str(path))
    return Proof.from_bytes(data, source=str(path))


def cmd_prove(args: argparse.Namespace) -> int:
    # Each branch imports only what it uses: the circuit registry alone costs ~0.1 s of start-up.
    from cuzk.groth16.formats import snarkjs_json

    if args.zkey or args.wtns:
        from cuzk.groth16.formats.circom import prove_circom

        if not (args.zkey and args.wtns) or args.params or args.circuit:
            raise CuzkError("prove takes either --zkey and --wtns, or --params and --circuit")
        proof, asg = prove_circom(args.zkey, args.wtns)
    elif args.params and args.circuit:
        from cuzk.circuits.registry import lookup
        from cuzk.groth16.assignment import Assignment
        from cuzk.groth16.formats.params_file import read_params
        from cuzk.groth16.prover import prove
        from cuzk.groth16.synthesis import synthesize_for_proving

        pk = read_params(args.params)
        circuit = lookup(args.circuit).example(random.Random())
        asg = Assignment.from_proving_assignment(synthesize_for_proving(circuit))
        proof = prove(pk, asg)
    else:
        raise CuzkError("prove needs --zkey and --wtns, or --params and --circuit")
    _write_json(args.proof, snarkjs_json.proof_to_json(proof))
    _write_json(args.public, snarkjs_json.public_to_json(asg.public_inputs()))
    if args.proof_bin:
        args.proof_bin.write_bytes(proof.to_bytes())
    print(f"wrote {args.proof} and {args.public}")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from cuzk.groth16.formats import snarkjs_json
    from cuzk.groth16.verifier import verify_proof

    vk = _load_vk(args.vk)
    publics = snarkjs_json.public_from_json(_read_json(args.public), source=str(args.public))
    proof = _load_proof(args.proof)
    if verify_proof(vk, proof, publics):
        print("OK")
        return EXIT_OK
    print("INVALID: the proof does not verify for these public inputs")
    return EXIT_INVALID


def cmd_export_vk(args: argparse.Namespace) -> int:
    from cuzk.groth16.formats import snarkjs_json
    from cuzk.groth16.formats.params_file import read_vk

    _write_json(args.out, snarkjs_json.vk_to_json(read_vk(args.source)))
    print(f"wrote {args.out}")
    return EXIT_OK
