"""README's "A cluster on one machine", run as it is written: its three `scripts/start_node` lines
(parsed out of README.md, so this fails when the README changes into something that does not
work), each in a shell of its own as a user runs them in three terminals, then the cluster used
across its nodes: `warrenctl cluster_status` (the README's own line) names three running nodes, a
message published through n2 to a queue n1 declared is consumed through n3, and each node serves
its management API on a port of its own (scripts/config.py's rule).

Where the data goes: the commands use `--name`, so each node keeps its data under `var/NAME` of
the checkout it runs from (scripts/start_node runs the node from its own tree). They run from a
copy of this tree in the test's tmp dir, never from the checkout, whose `var/` a user may be using.
The copy's `.venv` is the virtualenv running this test, already set up for this tree: the copy's
setup.cfg is dated before the virtualenv's install stamp, so that scripts/setup, which start_node
runs first, finds it installed (as it does in a checkout after `scripts/setup`) rather than
installing the copy into it.
"""
from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pika
import pytest

from actors.runtime.ports import can_listen
from scripts.local_cluster import REPO, port_open
from tests.waiting import until

pytestmark = pytest.mark.integration

start_timeout_s = 300.0
COPY_IGNORED = shutil.ignore_patterns(".venv", "var", ".git", "__pycache__", ".pytest_cache", "out", "*.pyc")


def section(readme: str, title: str) -> str:
    start = readme.index(f"## {title}\n")
    end = readme.find("\n## ", start + 1)
    return readme[start:end if end >= 0 else None]


def recipe() -> tuple[list[str], str]:
    """The recipe's start_node lines, and its cluster_status command."""
    text = section((REPO / "README.md").read_text(), "A cluster on one machine")
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block is not None, "README's cluster recipe has no sh block"
    starts = [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]
    assert len(starts) == 3 and all(line.startswith("scripts/start_node ") for line in starts), starts
    status = re.search(r"`(scripts/warrenctl [^`]*cluster_status)`", text)
    assert status is not None, "README's cluster recipe names no cluster_status command"
    return starts, status.group(1)


def flag(line: str, name: str) -> str:
    found = re.search(rf"--{name} (\S+)", line)
    assert found is not None, f"{line!r} has no --{name}"
    return found.group(1)


def tree_copy(tmp: Path) -> Path:
    stamp = Path(sys.prefix) / ".warren-installed"
    if not stamp.exists() or shutil.which("java") is None:
        pytest.skip("scripts/setup has not set up this virtualenv: start_node would install into it")
    copy = tmp / "warren"
    shutil.copytree(REPO, copy, ignore=COPY_IGNORED)
    (copy / ".venv").symlink_to(sys.prefix)
    before = stamp.stat().st_mtime - 1
    os.utime(copy / "setup.cfg", (before, before))
    return copy


def api_get(port: int, path: str) -> bytes:
    auth = base64.b64encode(b"guest:guest").decode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Basic {auth}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.read()


def test_the_readme_cluster_recipe_forms_a_cluster_used_across_its_nodes(tmp_path):
    starts, status_command = recipe()
    ports = [int(flag(line, "port")) for line in starts]
    names = [flag(line, "name") for line in starts]
    needed = [p + offset for p in ports for offset in (0, 10000, 10020, 20000)]
    taken = [p for p in needed if not can_listen(p, "127.0.0.1")]
    assert not taken, f"README's recipe needs ports {taken} that another process holds here"
    copy = tree_copy(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    procs: list[subprocess.Popen] = []
    try:
        for line, name, port in zip(starts, names, ports):
            with open(tmp_path / f"{name}.out", "wb") as out:
                procs.append(subprocess.Popen(["bash", "-c", line], cwd=copy, env=env, stdout=out,
                                              stderr=subprocess.STDOUT, start_new_session=True))
            until(lambda: procs[-1].poll() is not None or ((copy / "var" / name / "ready").exists()
                                                           and port_open(port)),
                  f"{name} to serve", timeout_s=start_timeout_s)
            assert procs[-1].poll() is None, (tmp_path / f"{name}.out").read_text()[-3000:]

        def running() -> list[str]:
            done = subprocess.run(["bash", "-c", status_command], cwd=copy, env=env, capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            listed = done.stdout.split("Running Nodes\n\n", 1)[1].split("\n\n", 1)[0]
            return [n for n in names if re.search(rf"\b{n}@", listed)]
        until(lambda: running() == names, "cluster_status to list the three nodes running", timeout_s=60)

        queue = "readme-recipe"
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", ports[0])) as c1:
            c1.channel().queue_declare(queue, durable=True)
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", ports[1])) as c2:
            ch = c2.channel()
            ch.confirm_delivery()
            for i in range(10):
                ch.basic_publish("", queue, f"m{i}".encode(), pika.BasicProperties(delivery_mode=2), mandatory=True)
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", ports[2])) as c3:
            ch = c3.channel()
            got = []
            for _method, _props, body in ch.consume(queue, inactivity_timeout=30):
                assert body is not None, f"consumed {got} through {names[2]}, then nothing for 30 s"
                got.append(body.decode())
                ch.basic_ack(_method.delivery_tag)
                if len(got) == 10:
                    break
            ch.cancel()
        assert got == [f"m{i}" for i in range(10)]
        for name, port in zip(names, ports):  # each node's own management API: AMQP port + 10000
            assert f'"node":"{name}@'.encode() in api_get(port + 10000, "/api/overview").replace(b" ", b""), name
            assert port_open(port + 10020), f"{name}'s Prometheus port"
    finally:  # as Ctrl-C in each terminal (start_node execs the node's main process), then what is left
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
