"""The cluster's cookie (actors/runtime/cluster_secret.py) appears whole or not at all: processes
that start together with no cookie file yet all read the same, non-empty one (hosts that read it
while the first was still writing it found it empty and crashed at a first start; with the cookie
created in place and written afterwards, 20 rounds of this test read it empty ~18 times)."""
from __future__ import annotations

import multiprocessing
import stat

from actors.runtime.cluster_secret import CookieError, read_or_create_cookie

rounds = 20
readers = 16


def _read(path: str, start: object, out: object) -> None:
    start.wait()
    try:
        out.put(read_or_create_cookie(path))
    except CookieError as e:
        out.put(str(e))


def test_processes_starting_together_all_read_one_whole_cookie(tmp_path):
    ctx = multiprocessing.get_context("fork")
    for n in range(rounds):
        start, out = ctx.Event(), ctx.Queue()
        path = tmp_path / f"home{n}" / ".warren.cookie"
        procs = [ctx.Process(target=_read, args=(str(path), start, out)) for _ in range(readers)]
        for p in procs:
            p.start()
        start.set()
        cookies = [out.get(timeout=30) for _ in procs]
        for p in procs:
            p.join(30)
        assert len(set(cookies)) == 1, cookies
        assert isinstance(cookies[0], bytes) and len(cookies[0]) == 20
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert [p.name for p in path.parent.iterdir()] == [".warren.cookie"]  # nothing left aside
