"""The coverage-guided campaign over the frame parser and the method and property decoders (atheris,
libFuzzer's engine): `python -m tests.fuzz.wire_fuzz -max_total_time=600` (any libFuzzer flag).

It starts from the corpus kept in the repo (tests/fuzz/corpus/: valid streams and their mutations,
plus every input a past campaign found interesting) and adds the new inputs it finds there, so a
later run starts where this one stopped; `tests/fuzz/test_wire_corpus.py` replays the corpus in the
suite. An input that breaks a contract of tests/fuzz/wire_target.py stops the run and is written as
crash-<sha1> in the working directory: fix the bug and move the file into the corpus. Needs atheris
(`pip install -e .[fuzz]`); `--seed-corpus` rewrites the corpus's seed files from tests/fuzz/sequences.py.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"
SEED_CASES = range(40)
SEED_MODES = (0, 4, 101)  # frame_max 131072, 4096 and none; reads of 1, 2 and 34 octets


def seed_corpus() -> int:
    """Write the seed inputs: mode octet + the octets of a sequences.py case (valid, then mutated)."""
    from tests.fuzz.sequences import case
    CORPUS.mkdir(exist_ok=True)
    written = 0
    for seed in SEED_CASES:
        for mode in SEED_MODES:
            data = bytes([mode]) + case(seed, mutation_rate=0.5 if seed % 2 else 0.0).data
            if len(data) <= 4096:
                (CORPUS / f"seed-{hashlib.sha1(data).hexdigest()[:16]}").write_bytes(data)
                written += 1
    return written


def main() -> None:
    if "--seed-corpus" in sys.argv:
        print(f"wrote {seed_corpus()} seed inputs to {CORPUS}")
        return
    import atheris
    with atheris.instrument_imports(include=["wire"]):
        import wire.codec, wire.inbound, wire.methods, wire.properties  # noqa: F401  (instrumented)
    from tests.fuzz.wire_target import check
    args = [a for a in sys.argv if not a.startswith("--")]
    if not any(not a.startswith("-") for a in args[1:]):
        args.append(str(CORPUS))
    if not any(a.startswith("-max_len") for a in args):
        args.append("-max_len=4096")
    atheris.Setup(args, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
