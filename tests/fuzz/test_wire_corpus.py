"""The wire fuzz target's contracts (tests/fuzz/wire_target.py) on the corpus kept in the repo (seeds
and what atheris campaigns found: `python -m tests.fuzz.wire_fuzz`), on Hypothesis's inputs, and on
inputs that once broke them."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from tests.fuzz.sequences import case
from tests.fuzz.wire_target import check

CORPUS = sorted((Path(__file__).resolve().parent / "corpus").iterdir())


def test_the_corpus_is_there():
    assert len(CORPUS) >= 100


def test_every_corpus_input_keeps_the_contracts():
    for path in CORPUS:
        try:
            check(path.read_bytes())
        except AssertionError as e:
            raise AssertionError(f"{path.name}: {e}") from e


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_any_octets_keep_the_contracts(data):
    check(data)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 255))
def test_mutated_valid_sequences_keep_the_contracts(seed, mode):
    check(bytes([mode]) + case(seed).data)


@pytest.mark.parametrize("args", [b"\xff" * 400, bytes(range(256)) * 3])
def test_a_long_undecodable_method_still_gets_a_close_that_fits(args):
    """Found against the oracle: the FRAME_ERROR text quoting the octets ran past a shortstr."""
    payload = struct.pack(">HH", 20, 10) + args
    check(b"\x00" + struct.pack(">BHI", 1, 1, len(payload)) + payload + b"\xce")
