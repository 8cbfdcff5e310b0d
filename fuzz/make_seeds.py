"""Write valid inputs for every fuzz target into fuzz/corpus/<target>/ (the fuzzers mutate from these).

    .venv/bin/python fuzz/make_seeds.py [--zkey F.zkey --wtns F.wtns] [--out fuzz/corpus]

Everything but the circom files is made by cuzk itself in a temporary directory: 2KiB PoRep C1
(JSON and bincode), WinningPoSt and SnapDeals vanilla proofs, insecure mimc-3 parameters, a proof
and its snarkjs JSON, configuration files, and SubmitProofRequests of every kind. `.zkey`/`.wtns`
seeds need snarkjs and circom (tests/snarkjs_tools.py builds them); without them that target keeps
whatever corpus it has. Files are named by their SHA-1, as libFuzzer names its corpus entries.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def cuzk(*args: str, cwd: Path) -> None:
    subprocess.run([sys.executable, "-m", "cuzk.cli.main", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def put(out: Path, target: str, data: bytes) -> None:
    folder = out / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)


def config_seeds() -> list[bytes]:
    from cuzk.config import Config

    secure = """[daemon]
listen = ["127.0.0.1:9820", "unix:///run/cuzk/cuzk.sock"]
status_listen = "127.0.0.1:9821"
max_message_size = "256MiB"
max_queued_jobs = 64
auth_token_file = "/etc/cuzk/token"
admin_token_file = "/etc/cuzk/admin-token"
tls_cert_file = "/etc/cuzk/server.pem"
tls_key_file = "/etc/cuzk/server.key"
tls_client_ca_file = "/etc/cuzk/ca.pem"
unix_socket_mode = "0660"
[memory]
total_budget = "64GiB"
eviction_min_idle = "5m"
"""
    return [Config().to_toml().encode(), secure.encode(), b"[pipeline]\nslot_size = 2\n[gpus]\ndevices = [0, 1]\n"]


def request_seeds(work: Path) -> list[bytes]:
    from cuzk.server._gen import proving_pb2 as pb

    c1_json = (work / "c1" / "c1.json").read_bytes()
    c1_bin = (work / "c1" / "c1.bin").read_bytes()
    win = json.loads((work / "win" / "public.json").read_text())
    snap = json.loads((work / "snap" / "public.json").read_text())
    wrapper = json.dumps({"SectorNum": 1, "Phase1Out": base64.b64encode(c1_json).decode(), "SectorSize": 2048})
    out = [
        pb.SubmitProofRequest(proof_kind=pb.POREP_SEAL_COMMIT, vanilla_proof=c1_json, miner_id=1000, sector_number=1),
        pb.SubmitProofRequest(proof_kind=pb.POREP_SEAL_COMMIT, vanilla_proof=c1_bin, registered_proof=5,
                              miner_id=1000),
        pb.SubmitProofRequest(proof_kind=pb.POREP_SEAL_COMMIT, vanilla_proof=wrapper.encode(), miner_id=1000),
        pb.SubmitProofRequest(proof_kind=pb.WINNING_POST, registered_proof=0, miner_id=1000,
                              randomness=bytes(32), vanilla_proofs=[p.read_bytes() for p in
                                                                    sorted((work / "win").glob("*.bin"))]),
        pb.SubmitProofRequest(proof_kind=pb.SNAP_DEALS_UPDATE, registered_proof=0,
                              vanilla_proofs=[p.read_bytes() for p in sorted((work / "snap").glob("*.bin"))]),
        pb.SubmitProofRequest(proof_kind=pb.PROOF_KIND_UNSPECIFIED, request_id="seed-1",
                              vanilla_proof=b'{"test_circuit": "mimc-3", "partitions": 2, "seed": 7}'),
    ]
    for key in ("comm_r_old", "comm_r_new", "comm_d_new"):
        if key in snap and isinstance(snap[key], str):
            setattr(out[4], key, bytes.fromhex(snap[key].removeprefix("0x")))
    if isinstance(win.get("randomness"), str):
        out[3].randomness = bytes.fromhex(win["randomness"].removeprefix("0x"))
    return [m.SerializeToString() for m in out]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "corpus")
    parser.add_argument("--zkey", type=Path)
    parser.add_argument("--wtns", type=Path)
    args = parser.parse_args()
    out: Path = args.out
    with tempfile.TemporaryDirectory(prefix="cuzk-seeds-") as tmp:
        work = Path(tmp)
        cuzk("gen-vanilla", "porep", "--sector-size", "2KiB", "--out", "c1", "--bincode", cwd=work)
        cuzk("gen-vanilla", "winning", "--sector-size", "2KiB", "--out", "win", cwd=work)
        cuzk("gen-vanilla", "snap", "--sector-size", "2KiB", "--out", "snap", cwd=work)
        cuzk("params", "gen", "--insecure", "mimc-3", "m3.params", "--vk", "m3.vk", cwd=work)
        cuzk("groth16", "prove", "--params", "m3.params", "--circuit", "mimc-3", "--proof", "proof.json",
             "--public", "public.json", "--proof-bin", "proof.bin", cwd=work)
        cuzk("groth16", "export-vk", "m3.vk", "vk.json", cwd=work)

        put(out, "c1_json", (work / "c1" / "c1.json").read_bytes())
        put(out, "vanilla_bincode", b"\x00" + (work / "c1" / "c1.bin").read_bytes())
        for blob in sorted((work / "win").glob("*.bin")):
            put(out, "vanilla_bincode", b"\x01" + blob.read_bytes())
        for blob in sorted((work / "snap").glob("*.bin")):
            put(out, "vanilla_bincode", b"\x02" + blob.read_bytes())
        put(out, "params_vk", b"\x00" + (work / "m3.vk").read_bytes())
        put(out, "params_vk", b"\x01" + (work / "m3.params").read_bytes())
        put(out, "params_vk", b"\x02" + (work / "m3.params").read_bytes())
        put(out, "proof", b"\x00" + (work / "proof.bin").read_bytes())
        put(out, "proof", b"\x01" + (work / "vk.json").read_bytes())
        put(out, "proof", b"\x02" + (work / "proof.json").read_bytes())
        put(out, "proof", b"\x03" + (work / "public.json").read_bytes())
        for text in config_seeds():
            put(out, "config_toml", text)
        for message in request_seeds(work):
            put(out, "grpc_request", message)
    if args.zkey is not None:
        put(out, "zkey_wtns", b"\x00" + args.zkey.read_bytes())
    if args.wtns is not None:
        put(out, "zkey_wtns", b"\x01" + args.wtns.read_bytes())
    for folder in sorted(out.iterdir()):
        print(f"{folder.name}: {len(list(folder.iterdir()))} file(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
