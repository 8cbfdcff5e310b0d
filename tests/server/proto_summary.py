"""A JSON-able summary of a proto file's interface: services and methods, messages with field numbers,
types and labels, enums with values. Facts only, used to compare our cuzk.v1 with the published one.

    python tests/server/proto_summary.py PATH/TO/cuzk/v1/proving.proto > summary.json
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2

PROTO_NAME = "cuzk/v1/proving.proto"


def _type(field: descriptor_pb2.FieldDescriptorProto) -> str:
    name = descriptor_pb2.FieldDescriptorProto.Type.Name(field.type).removeprefix("TYPE_").lower()
    return f"{name} {field.type_name.lstrip('.')}" if field.type_name else name


def summarize(fdp: descriptor_pb2.FileDescriptorProto) -> dict[str, Any]:
    messages: dict[str, Any] = {}
    enums: dict[str, Any] = {}

    def walk(msg: descriptor_pb2.DescriptorProto, prefix: str) -> None:
        name = prefix + msg.name
        messages[name] = {
            f.name: [f.number, _type(f), descriptor_pb2.FieldDescriptorProto.Label.Name(f.label)
                     .removeprefix("LABEL_").lower()] for f in msg.field
        }
        for e in msg.enum_type:
            enums[f"{name}.{e.name}"] = {v.name: v.number for v in e.value}
        for nested in msg.nested_type:
            walk(nested, f"{name}.")

    for msg in fdp.message_type:
        walk(msg, "")
    for e in fdp.enum_type:
        enums[e.name] = {v.name: v.number for v in e.value}
    services = {s.name: {m.name: [m.input_type.lstrip("."), m.output_type.lstrip(".")] for m in s.method}
                for s in fdp.service}
    return {"package": fdp.package, "syntax": fdp.syntax, "services": services, "messages": messages, "enums": enums}


def compile_proto(path: Path) -> descriptor_pb2.FileDescriptorProto:
    """Parse a .proto with grpcio-tools' protoc (placed as cuzk/v1/proving.proto)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "cuzk" / "v1").mkdir(parents=True)
        (root / PROTO_NAME).write_bytes(path.read_bytes())
        out = root / "set.pb"
        proc = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{root}", f"--descriptor_set_out={out}",
                               PROTO_NAME], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"protoc failed on {path}: {proc.stderr}")
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return fds.file[0]


def compare(published: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    """Everything in `published` must be in `ours` unchanged; additions may not reuse numbers."""
    problems = []
    for key in ("package", "syntax"):
        if published[key] != ours[key]:
            problems.append(f"{key}: {ours[key]!r} != {published[key]!r}")
    for service, methods in published["services"].items():
        for method, sig in methods.items():
            got = ours["services"].get(service, {}).get(method)
            if got != sig:
                problems.append(f"rpc {service}.{method}: {got} != {sig}")
    for message, fields in published["messages"].items():
        mine = ours["messages"].get(message)
        if mine is None:
            problems.append(f"message {message} missing")
            continue
        used = {spec[0] for spec in fields.values()}
        for name, spec in fields.items():
            if mine.get(name) != spec:
                problems.append(f"{message}.{name}: {mine.get(name)} != {spec}")
        for name, spec in mine.items():
            if name not in fields and spec[0] in used:
                problems.append(f"{message}.{name}: extension reuses field number {spec[0]}")
    for enum, values in published["enums"].items():
        if ours["enums"].get(enum) != values:
            problems.append(f"enum {enum}: {ours['enums'].get(enum)} != {values}")
    return problems


if __name__ == "__main__":
    print(json.dumps(summarize(compile_proto(Path(sys.argv[1]))), indent=2, sort_keys=True))
