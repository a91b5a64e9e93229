"""How long a refused password check takes for a user that exists and for one that does not.

The registry checks a missing user's password against a dummy hash (metadata/access.py), so both
refusals do the same work: one salted SHA-256 and one constant-time compare. This prints the
median and the 10th/90th percentiles of each, measured in alternating rounds (so a noisy machine
slows both alike), and their ratio.

    .venv/bin/python -m bench.login_timing [--rounds 200] [--per-round 200]
"""
from __future__ import annotations

import argparse
import statistics
import time

from metadata import passwords
from metadata.registry import Registry


def _round(check, user: str, n: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(n):
        check(user, "wrong password")
    return (time.perf_counter_ns() - start) / n


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--per-round", type=int, default=200)
    a = p.parse_args(argv)
    reg = Registry()
    reg.add_user("bob", passwords.hash_password("secret", b"\x01\x02\x03\x04"))
    times: dict[str, list[float]] = {"existing user": [], "missing user": []}
    for i in range(a.rounds):
        order = ("existing user", "missing user") if i % 2 == 0 else ("missing user", "existing user")
        for what in order:
            times[what].append(_round(reg.check_login, "bob" if what == "existing user" else "nobody", a.per_round))
    for what, samples in times.items():
        q = statistics.quantiles(samples, n=10)
        print(f"{what:14s} median {statistics.median(samples) / 1000:6.2f} us  p10 {q[0] / 1000:6.2f}  "
              f"p90 {q[-1] / 1000:6.2f}")
    ratio = statistics.median(times["missing user"]) / statistics.median(times["existing user"])
    print(f"missing / existing: {ratio:.3f}")


if __name__ == "__main__":
    main()
