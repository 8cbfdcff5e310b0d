"""`loads_in_pieces`: json.loads's value and errors, parsed so that the C decoder never holds the GIL
over a whole large document (a PoRep C1 in the daemon process)."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pytest

from cuzk.filecoin.c1 import SealCommitPhase1Output
from cuzk.filecoin.codec import loads_in_pieces

DOCUMENTS = [
    "{}", "[]", " [ ] ", "0", '"x"', "null", "true", "[1,2,3]", '{"a":1}', '{"a":[1,{"b":[]}],"c":{}}',
    ' \n{ "a" : [ 1 , 2 ] ,\t"b" : { "c" : null } }\r\n', '[[[[[[1]]]]]]', '{"a":1,"a":2}', '[NaN, -Infinity]',
    '{"\\u00e9":"\\ud83d\\ude00","k":[1.5e3,-0.0,12345678901234567890]}', '[{"x":[{"y":[[],{}]}]}]',
]
BAD = ["", "[", "]", "{", '{"a"}', '{"a":}', '{"a":1,}', "[1,]", "[1 2]", '{"a":1 "b":2}', "[1]x", "{1:2}",
       '{"a":[1,2}', "[01]", '["\\x"]']


@pytest.mark.parametrize("text", DOCUMENTS)
@pytest.mark.parametrize("depth", [0, 1, 2, 3, 10])
def test_the_value_is_json_loads(text: str, depth: int) -> None:
    want = json.loads(text)
    got = loads_in_pieces(text, depth)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
    assert json.dumps(loads_in_pieces(text.encode(), depth), sort_keys=True) == json.dumps(want, sort_keys=True)


@pytest.mark.parametrize("text", BAD)
@pytest.mark.parametrize("depth", [0, 2])
def test_bad_documents_raise_value_errors_like_json_loads(text: str, depth: int) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        loads_in_pieces(text, depth)


def test_random_nested_documents() -> None:
    rng = random.Random(7)

    def value(d: int) -> object:
        pick = rng.random()
        if d == 0 or pick < 0.3:
            return rng.choice([0, -3, 2.5, "s", "ü", None, True, False, 10**20])
        if pick < 0.65:
            return [value(d - 1) for _ in range(rng.randrange(4))]
        return {f"k{j}": value(d - 1) for j in range(rng.randrange(4))}

    for _ in range(200):
        doc = value(5)
        for indent in (None, 1):
            text = json.dumps(doc, indent=indent)
            assert loads_in_pieces(text, rng.randrange(6)) == json.loads(text)


def test_a_c1_parses_the_same_and_lets_other_threads_run(tmp_path: Path) -> None:
    # A C1's bulk in one value per challenge (as $.vanilla_proofs.<variant>[k][i] is): a thread that
    # sleeps 1 ms at a time keeps waking while it is parsed.
    proof = {"data": {"Single": {"root": [1] * 32, "leaf": [2] * 32, "path": {"path": [{"hashes": [[3] * 32],
                                                                                          "index": 1}] * 400}}}}
    doc = {"registered_proof": "StackedDrg2KiBV1_1", "vanilla_proofs": {"StackedDrg2KiBV1": [[proof] * 60] * 10},
           "comm_r": [0] * 32}
    text = json.dumps(doc, separators=(",", ":"))
    wakes: list[float] = []
    done = threading.Event()

    def tick() -> None:
        while not done.is_set():
            wakes.append(time.perf_counter())
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        time.sleep(0.01)
        start = time.perf_counter()
        value = loads_in_pieces(text, depth=4)
        end = time.perf_counter()
    finally:
        done.set()
        ticker.join()
    assert value == json.loads(text)
    assert sum(start <= w <= end for w in wakes) >= 3


def test_c1_errors_still_name_the_problem() -> None:
    from cuzk.errors import FormatError

    with pytest.raises(FormatError, match="not valid JSON"):
        SealCommitPhase1Output.from_json('{"registered_proof": "StackedDrg2KiBV1_1", "vanilla_proofs": {')


def test_the_collector_is_paused_while_any_holder_runs_and_restored_after() -> None:
    import gc

    from cuzk.filecoin.codec import collector_paused

    assert gc.isenabled()
    first_in, second_out, release = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def holder(entered: threading.Event, wait: threading.Event | None) -> None:
        with collector_paused():
            entered.set()
            if wait is not None:
                wait.wait(10)
            seen.append(gc.isenabled())

    a = threading.Thread(target=holder, args=(first_in, release))
    a.start()
    first_in.wait(10)
    b = threading.Thread(target=holder, args=(second_out, None))
    b.start()
    b.join()  # the second holder has left; the first still holds it off
    assert not gc.isenabled()
    release.set()
    a.join()
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()
