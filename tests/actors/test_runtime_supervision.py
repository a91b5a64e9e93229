"""Supervision with Thespian, with real node processes: readiness, control asks, restarts of a
SIGKILLed host, and no process left behind after SIGTERM or a kill -9 of the node."""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from actors.runtime.client import control
from actors.runtime.lifeline import die_with_parent, forked_by
from actors.runtime.logs import log_path
from actors.runtime.ports import port_open, stable_port
from tests.waiting import until

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
wait_s = 30.0


class Node:
    def __init__(self, data_dir: Path, hosts: list[str], wait: bool = True) -> None:
        """`hosts`: tests/actors/runtime_hosts.py's NAME[:KIND[:VALUE]]."""
        self.port = stable_port()
        self.data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        with open(data_dir / "node.out", "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.actors.runtime_hosts", str(data_dir), str(self.port), *hosts],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        if wait:
            until(lambda: (data_dir / "ready").exists() or self.proc.poll() is not None, "node ready", wait_s)
            assert self.proc.poll() is None, "node exited during startup"

    def events(self) -> list[dict]:
        return [json.loads(line) for line in log_path(self.data_dir).read_text().splitlines()]

    def remaining(self) -> list[psutil.Process]:
        """Processes still running this node's command line (none once it has stopped)."""
        marker = str(self.data_dir)
        return [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] and marker in p.info["cmdline"]
                and p.pid != os.getpid()]

    def ask(self, host: str, op: str, args: dict | None = None, timeout: float = 10):
        return control(self.port, host, op, args or {}, timeout)

    def answer(self, host: str, op: str) -> Any:
        """The host's answer, None while it restarts (its backoff) or starts."""
        try:
            return self.ask(host, op, timeout=2)
        except (RuntimeError, TimeoutError):
            return None

    def processes(self, hosts: list[str]) -> list[psutil.Process]:
        """Every process of the node: main, hosts, and Thespian's admin/logger/supervisor."""
        procs = {psutil.Process(self.proc.pid)}
        for host in hosts:
            p = psutil.Process(self.ask(host, "pid"))
            procs.add(p)
            procs.update(a for a in p.parents() if a.pid != 1 and a.pid not in _ours())
        for p in list(procs):
            procs.update(p.children(recursive=True))
        return list(procs)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(wait_s)


def _ours() -> set[int]:
    """This test process and its ancestors (never the node's)."""
    me = psutil.Process()
    return {me.pid, *(p.pid for p in me.parents())}


def _gone(procs: list[psutil.Process]) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(procs, timeout=wait_s)
    return [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


@pytest.fixture
def long_data_dir(tmp_path: Path) -> Path:
    # longer than sockaddr_un allows, so the node must put its sockets under /tmp
    return tmp_path / ("d" * 90)


def test_ready_control_asks_and_cross_host_messages(long_data_dir: Path) -> None:
    node = Node(long_data_dir, ["a", "b"])
    try:
        assert node.ask("a", "ping") == {"host": "a", "actors": 1}
        assert node.ask("a", "send_echo", {"host": "b"}) == ["b/echo", "echo", [1, 2]]
        states = node.ask("b", "flow_states")
        assert states["echo"]["state"] == "running" and states["echo"]["blocked_on"] == []
        with pytest.raises(RuntimeError, match="no host 'zz'"):
            node.ask("zz", "ping")
        assert not (long_data_dir / "sock").exists()
    finally:
        node.stop()


def test_supervisor_restarts_a_sigkilled_host(tmp_path: Path) -> None:
    node = Node(tmp_path, ["a", "b"])
    try:
        old = node.ask("a", "pid")
        os.kill(old, signal.SIGKILL)

        def restarted():
            try:
                pid = node.ask("a", "pid", timeout=2)
            except (RuntimeError, TimeoutError):  # asked the dead one, or the new one is starting
                return None
            return pid if pid != old else None
        new = until(restarted, "host a restarted", wait_s)
        assert psutil.pid_exists(new) and new != old
        assert node.ask("$supervisor", "status") == {"hosts": ["a", "b"], "restarts": 1}
        # the restarted host is reachable on the data path again
        assert node.ask("b", "send_echo", {"host": "a"}) == ["a/echo", "echo", [1, 2]]
    finally:
        node.stop()


def test_hosts_killed_together_are_all_restarted(tmp_path: Path) -> None:
    """Thespian reports one child's exit and reaps the others dead by then without a word: of the
    connection hosts killed together by the quorum queue tests, one was never restarted."""
    hosts = ["a", "b", "c"]
    node = Node(tmp_path, [*hosts, "d"])
    try:
        for round in range(1, 4):
            for pid in [until(lambda: node.answer(host, "pid"), f"{host} running", wait_s) for host in hosts]:
                os.kill(pid, signal.SIGKILL)
            until(lambda: node.ask("$supervisor", "status")["restarts"] == round * len(hosts),
                  f"all three restarted (round {round})", wait_s)
        for host in hosts:  # each one there (after its backoff), on the data path too
            until(lambda: node.answer(host, "pid"), f"{host} running", wait_s)
            assert node.ask("d", "send_echo", {"host": host}, timeout=wait_s) == [f"{host}/echo", "echo", [1, 2]]
    finally:
        node.stop()


def test_a_host_whose_first_process_exits_before_it_started_is_restarted(tmp_path: Path) -> None:
    """A host that died before its HostStarted reached the supervisor was in no record, and the
    watch never looked at it again: the node served without it."""
    node = Node(tmp_path, ["a:exits", "b"])
    try:
        assert node.ask("b", "send_echo", {"host": "a"}) == ["a/echo", "echo", [1, 2]]
        assert node.ask("$supervisor", "status") == {"hosts": ["a", "b"], "restarts": 1}
        exited = [e for e in node.events() if e["event"] == "supervisor.host_exited"]
        assert [(e["host"], e["cause"]) for e in exited] == [("a", "exited with status 3")]
    finally:
        node.stop()


def test_a_host_that_cannot_start_stops_the_node_with_an_error_naming_it(tmp_path: Path) -> None:
    node = Node(tmp_path, ["a", "bad:fail"], wait=False)
    assert node.proc.wait(60) == 1
    reason = "host bad exited 6 times within 30 s; the last time: RuntimeError: bad cannot start: told to fail"
    assert [e["reason"] for e in node.events() if e["event"] == "node.failed"] == [reason]
    assert len([e for e in node.events() if e["event"] == "supervisor.host_start_failed"]) == 6
    assert not (tmp_path / "ready").exists()
    assert _gone(node.remaining()) == []


def test_listeners_open_only_once_every_host_has_started(tmp_path: Path) -> None:
    port = stable_port()
    node = Node(tmp_path, [f"l:listen:{port}", "s:slow:1.5", "e"])
    try:
        assert port_open(port)
        order = [(e["event"], e["host"]) for e in node.events()
                 if e["event"] in ("host.started", "test.listener_opened")]
        assert order.index(("test.listener_opened", "l")) > order.index(("host.started", "s"))
        assert order.index(("test.listener_opened", "l")) > order.index(("host.started", "e"))
        # once the node has served, a listening host that restarts opens as soon as it has started
        os.kill(node.ask("l", "pid"), signal.SIGKILL)
        until(lambda: len([e for e in node.events() if e["event"] == "test.listener_opened"]) == 2, "l reopened")
        assert node.ask("$supervisor", "state")["not_serving"] in ([], ["l"])
    finally:
        node.stop()


def test_sigterm_stops_every_process(tmp_path: Path) -> None:
    node = Node(tmp_path, ["a", "b"])
    procs = node.processes(["a", "b"])
    assert len(procs) >= 5  # main, admin, supervisor, 2 hosts
    node.stop()
    assert node.proc.returncode == 0
    assert _gone(procs) == []
    assert not (tmp_path / "ready").exists()


def test_kill_9_of_the_node_leaves_nothing_running(tmp_path: Path) -> None:
    node = Node(tmp_path, ["a"])
    procs = node.processes(["a"])
    node.proc.kill()
    node.proc.wait(wait_s)
    assert _gone(procs) == []


def test_hosts_do_not_outlive_their_supervisor(tmp_path: Path) -> None:
    # a host forked just as the node went down may never be told to start: its parent's death is
    # all it can see, so that must be enough to end it
    node = Node(tmp_path, ["a", "b"])
    try:
        hosts = [psutil.Process(node.ask(h, "pid")) for h in ("a", "b")]
        supervisor = hosts[0].parent()
        assert supervisor is not None and supervisor.pid == hosts[1].ppid()
        supervisor.kill()
        assert _gone(hosts) == []
    finally:
        node.stop()


def _grandchild(started: Any, go: Any) -> None:
    started.set()
    go.wait(wait_s)  # the parent is gone by now: the child was adopted before it looked
    die_with_parent(forked_by())
    go.wait(wait_s * 10)  # a host that missed its parent's death would live on


def _child(started: Any, go: Any, pid_out: Any) -> None:
    grandchild = multiprocessing.get_context("fork").Process(target=_grandchild, args=(started, go))
    grandchild.start()
    pid_out.value = grandchild.pid
    started.wait()
    os._exit(0)  # gone before the grandchild starts its watch (a Supervisor dying as it forks a host)


def test_a_host_whose_parent_died_before_its_watch_began_exits() -> None:
    """die_with_parent compares the parent multiprocessing recorded at the fork, not the one
    `getppid()` names when it is called (which is already the adopter)."""
    ctx = multiprocessing.get_context("fork")
    started, go, pid_out = ctx.Event(), ctx.Event(), ctx.Value("i", 0)
    child = ctx.Process(target=_child, args=(started, go, pid_out))
    child.start()
    # not join(): the grandchild holds the child's sentinel pipe open, exitcode asks waitpid
    until(lambda: child.exitcode is not None, "the child gone", wait_s)
    grandchild = psutil.Process(pid_out.value)
    until(lambda: grandchild.ppid() != child.pid, "the grandchild adopted")
    go.set()
    try:
        assert _gone([grandchild]) == []
    finally:
        if grandchild.is_running():
            grandchild.kill()
