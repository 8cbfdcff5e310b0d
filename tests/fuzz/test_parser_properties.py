"""Property tests for every parser of user data: whatever the input, a parser either accepts it or refuses
it with a CuzkError (the CLI's exit 2, the daemon's INVALID_ARGUMENT), never another exception.

Inputs: arbitrary bytes, mutations of valid inputs (truncations, bit flips, overwritten length fields,
insertions, repeated chunks), and structured values (JSON documents, TOML configurations with the
daemon's keys, SubmitProofRequest messages with any field values). The targets are the atheris
harness's (fuzz/cuzk_fuzz_targets.py); each picks a parser with its first byte where it covers several.
"""

from __future__ import annotations

import json
from functools import cache

import pytest
from fuzz.targets import fuzz_targets, seeds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuzk.config import Config
from cuzk.errors import CuzkError
from cuzk.server._gen import proving_pb2 as pb

TARGETS = sorted(fuzz_targets.TARGETS)
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])


def clean(target: str, data: bytes) -> None:
    """Run `target`; fail with the input's description on anything but acceptance or a CuzkError."""
    try:
        fuzz_targets.run_clean(target, data)
    except CuzkError:  # pragma: no cover - run_clean returns False for these
        raise
    except Exception as err:
        raise AssertionError(f"{target} raised {type(err).__name__}: {err} on {data[:120]!r} "
                             f"({len(data)} bytes)") from err


@cache
def valid_inputs(target: str) -> tuple[bytes, ...]:
    return tuple(seeds(target))


# -- arbitrary bytes --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
@FUZZ
@given(data=st.binary(max_size=2048))
def test_arbitrary_bytes(target: str, data: bytes) -> None:
    clean(target, data)


# -- mutations of valid inputs ------------------------------------------------------------------------------------
INTERESTING = [b"\x00", b"\xff", b"\x7f", b"\x80", b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x00\x00\x00\x80",
               b"\xff\xff\xff\xff\xff\xff\xff\xff", b"\x00\x00\x00\x01\x00\x00\x00\x00", b"\x01\x00\x00\x00",
               b"{", b"}", b"[", b"]", b'"', b"-1", b"1e999", b"9" * 30, b"null", b"\\u0000", b"\xc3\x28"]


@st.composite
def mutated(draw: st.DrawFn, target: str) -> bytes:
    base = bytearray(draw(st.sampled_from(valid_inputs(target))))
    for _ in range(draw(st.integers(1, 4))):
        if not base:
            break
        at = draw(st.integers(0, len(base) - 1))
        op = draw(st.sampled_from(["truncate", "flip", "overwrite", "insert", "repeat", "delete"]))
        if op == "truncate":
            del base[at:]
        elif op == "flip":
            base[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "overwrite":
            value = draw(st.sampled_from(INTERESTING) | st.binary(min_size=1, max_size=8))
            base[at:at + len(value)] = value
        elif op == "insert":
            base[at:at] = draw(st.sampled_from(INTERESTING) | st.binary(min_size=1, max_size=16))
        elif op == "repeat":
            end = min(len(base), at + draw(st.integers(1, 64)))
            base[at:at] = base[at:end] * draw(st.integers(1, 8))
        else:
            del base[at:at + draw(st.integers(1, 64))]
    return bytes(base)


@pytest.mark.parametrize("target", TARGETS)
def test_the_corpus_has_valid_inputs(target: str) -> None:
    assert valid_inputs(target), f"fuzz/corpus/{target} has no input the parser accepts"


@pytest.mark.parametrize("target", TARGETS)
@FUZZ
@given(data=st.data())
def test_mutated_valid_inputs(target: str, data: st.DataObject) -> None:
    clean(target, data.draw(mutated(target)))


# -- structured inputs ------------------------------------------------------------------------------------------
JSON_KEYS = st.sampled_from(["registered_proof", "vanilla_proofs", "comm_r", "comm_d", "replica_id", "seed",
                             "ticket", "StackedDrg2KiBV1", "pi_a", "pi_b", "pi_c", "protocol", "curve", "nPublic",
                             "vk_alpha_1", "IC", "test_circuit", "partitions", "Phase1Out", "SectorNum", "SectorSize"])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(JSON_KEYS | st.text(max_size=8), children,
                                                                      max_size=6),
    max_leaves=40)


@FUZZ
@given(value=JSON_VALUES, selector=st.integers(1, 3))
def test_json_documents(value: object, selector: int) -> None:
    text = json.dumps(value).encode()
    clean("c1_json", text)
    clean("proof", bytes([selector]) + text)


@FUZZ
@given(depth=st.integers(1, 100_000), opener=st.sampled_from([b"[", b'{"a":', b"-"]),
       digits=st.integers(1, 50_000))
def test_deep_nesting_and_long_numbers(depth: int, opener: bytes, digits: int) -> None:
    for text in (opener * depth, b"9" * digits, b'{"registered_proof": ' + b"1" * digits + b"}"):
        clean("c1_json", text)
        clean("proof", b"\x01" + text)
        clean("config_toml", b"a = " + text)
        clean("grpc_request", pb.SubmitProofRequest(proof_kind=0, vanilla_proof=text).SerializeToString())
        clean("grpc_request", pb.SubmitProofRequest(proof_kind=1, vanilla_proof=b'{"x": ' + text).SerializeToString())


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


CONFIG_SECTIONS = Config().settings()
TOML_SCALARS = (st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
                | st.text(max_size=12) | st.sampled_from(["5GiB", "auto", "1h30m", "0600", "0666", ":9820",
                                                          "0.0.0.0:1", "unix:///tmp/x", "1e999", "-1"]))


@st.composite
def config_texts(draw: st.DrawFn) -> bytes:
    lines = []
    for section in draw(st.lists(st.sampled_from([*CONFIG_SECTIONS, "bogus"]), max_size=4, unique=True)):
        lines.append(f"[{section}]")
        keys = list(CONFIG_SECTIONS.get(section, {"x": 0}))
        for key in draw(st.lists(st.sampled_from([*keys, "unknown_key"]), max_size=5, unique=True)):
            value = draw(TOML_SCALARS | st.lists(TOML_SCALARS, max_size=3))
            lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines).encode()


@FUZZ
@given(text=config_texts())
def test_configuration_files(text: bytes) -> None:
    clean("config_toml", text)


BLOB = st.binary(max_size=64) | st.sampled_from([bytes(32), b"\xff" * 32])


@FUZZ
@given(kind=st.integers(0, 6), registered=st.integers(0, 2**63 - 1) | st.integers(0, 20), priority=st.integers(0, 9),
       request_id=st.text(max_size=40), vanilla=BLOB | JSON_VALUES.map(lambda v: json.dumps(v).encode()),
       vanilla_list=st.lists(BLOB, max_size=4), randomness=BLOB, commitments=st.tuples(BLOB, BLOB, BLOB),
       numbers=st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1),
                         st.integers(0, 2**32 - 1)))
def test_submit_requests(kind: int, registered: int, priority: int, request_id: str, vanilla: bytes,
                         vanilla_list: list[bytes], randomness: bytes, commitments: tuple[bytes, bytes, bytes],
                         numbers: tuple[int, int, int, int]) -> None:
    sector_size, sector_number, miner_id, partition = numbers
    message = pb.SubmitProofRequest(
        proof_kind=kind, registered_proof=registered, priority=priority, request_id=request_id, vanilla_proof=vanilla,
        vanilla_proofs=vanilla_list, randomness=randomness, comm_r_old=commitments[0], comm_r_new=commitments[1],
        comm_d_new=commitments[2], sector_size=sector_size, sector_number=sector_number, miner_id=miner_id,
        partition_index=partition)
    clean("grpc_request", message.SerializeToString())
