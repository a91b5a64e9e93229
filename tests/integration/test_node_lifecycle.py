"""A node is one unit (issue 33): it starts whole or fails loudly, restarts whatever dies, keeps
a second node out of its data dir, tells systemd when it serves, and leaves nothing behind
(docs/DESIGN.md §4). Real nodes (scripts/local_cluster.py), real signals."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import psutil
import pytest

from actors.runtime.data_dir_lock import lock_path
from actors.runtime.logs import log_path
from actors.runtime.ports import port_open, stable_port
from scripts.local_cluster import HOST, ready_by
from tests.integration.admin_support import ok, warrenctl
from tests.integration.nodes import serving_processes, start_node, wait_serving
from tests.waiting import until

pytestmark = pytest.mark.integration
HOSTS = ("node", "quorum", "conn0", "conn1")
gone_s = 10.0  # nothing of a node is left this long after its main process died, or after a stop
back_s = 10.0  # every host runs again this long after a kill
CRASHES = ("host.crashed", "host.start_failed", "supervisor.host_exited", "supervisor.host_start_failed")


def events(node) -> list[dict]:
    path = log_path(node.data_dir)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def processes(node) -> dict[str, dict]:
    """`warrenctl status`'s processes by name."""
    return {p["name"]: p for p in json.loads(ok(node, "status", "--formatter", "json"))["processes"]}


def serving_again(node, old: dict[str, dict]) -> dict[str, dict] | None:
    """The processes once the node serves again with a new process for each host of `old`."""
    now = serving_processes(node)
    return now if now and all(h in now and now[h]["pid"] != row["pid"] for h, row in old.items()) else None


def alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("attempt", [1, 2, 3])
def test_a_first_start_with_no_cookie_file_comes_up_whole(tmp_path, monkeypatch, attempt):
    """Three first starts in a fresh HOME: three of four hosts used to crash reading an empty cookie."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    node = start_node(tmp_path / "data")
    try:
        names = processes(node)
        assert all(names[h]["restarts"] == 0 for h in HOSTS)
        evs = events(node)
        assert [e for e in evs if e["event"] in CRASHES] == []
        assert (home / ".warren.cookie").read_bytes()
        # the AMQP port opened only once every host had started
        order = [e["event"] for e in evs if e["event"] in ("host.started", "listener.started")]
        assert order[:len(HOSTS)] == ["host.started"] * len(HOSTS)
    finally:
        node.stop()


def test_kill_9_of_the_main_process_leaves_nothing_and_a_start_at_once_serves(tmp_path):
    node = start_node(tmp_path / "data")
    pids = [p.pid for p in node.processes()]
    assert len(pids) == 4 + len(HOSTS)
    node.proc.kill()
    node.proc.wait()
    again = start_node(node.data_dir, port=node.port, cluster_port=node.cluster_port)  # at once
    try:
        until(lambda: alive(pids) == [], "every process of the killed node gone", gone_s)
        assert json.loads(ok(again, "status", "--formatter", "json"))["pid"] == again.proc.pid
    finally:
        again.stop()


def test_sigkill_of_the_process_group_leaves_nothing(tmp_path):
    """Thespian's admin daemonises into a session of its own: the group kill does not reach it."""
    node = start_node(tmp_path / "data")
    pids = [p.pid for p in node.processes()]
    os.killpg(node.proc.pid, signal.SIGKILL)
    node.proc.wait()
    until(lambda: alive(pids) == [], "every process of the node gone", gone_s)


STRAGGLER = """
import fcntl, json, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, json.dumps({"node": "old", "pid": int(sys.argv[2]), "started": 0.0}).encode())
print("holding", flush=True)
time.sleep(600)
"""


def test_a_start_waits_for_what_is_left_of_an_old_run_then_serves(tmp_path):
    """A process of an earlier run whose main process is gone still holds the data dir's lock (a
    node's processes end within moments of their main process: this one stands in for one that
    has not yet). The new start waits for it, says so, and serves once it is gone."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()  # an old main process's pid, gone
    straggler = subprocess.Popen([sys.executable, "-c", STRAGGLER, str(lock_path(data_dir)), str(dead.pid)],
                                 stdout=subprocess.PIPE, text=True)
    assert straggler.stdout.readline() == "holding\n"
    node = start_node(data_dir, wait=False)
    try:
        until(lambda: any(e["event"] == "node.waiting_for_old_incarnation" for e in events(node)),
              "the new start waiting for the old run")
        assert node.proc.poll() is None and ready_by(data_dir) != node.proc.pid
        straggler.kill()
        straggler.wait()
        wait_serving(node)
        assert any(e["event"] == "node.old_incarnation_gone" for e in events(node))
    finally:
        straggler.kill()
        node.stop()


LINGERING_LISTENER = """
import fcntl, json, os, socket, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, json.dumps({"node": "old", "pid": int(sys.argv[2]), "started": 0.0}).encode())
listener = socket.create_server(("127.0.0.1", int(sys.argv[3])))
print("holding", flush=True)
sys.stdin.readline()
os.close(fd)  # an exiting process closes its descriptors in order: the lock's goes first
print("unlocked", flush=True)
sys.stdin.readline()
listener.close()
sys.stdin.readline()
"""


def test_a_start_waits_for_the_old_runs_ports_which_close_after_its_lock(tmp_path):
    """The old run's last process lets go of the lock a moment before its listening sockets: the
    new start waits for the ports too rather than fail with 'address in use'."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    port = stable_port()
    old = subprocess.Popen([sys.executable, "-c", LINGERING_LISTENER, str(lock_path(data_dir)), str(dead.pid),
                            str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert old.stdout.readline() == "holding\n"
    node = start_node(data_dir, port=port, wait=False)
    try:
        until(lambda: any(e["event"] == "node.waiting_for_old_incarnation" for e in events(node)),
              "the new start waiting for the old run")
        old.stdin.write("\n")
        old.stdin.flush()
        assert old.stdout.readline() == "unlocked\n"
        until(lambda: any(e["event"] == "node.waiting_for_old_ports" for e in events(node)),
              "the new start waiting for the old run's port")
        old.stdin.write("\n")
        old.stdin.flush()
        wait_serving(node)
    finally:
        old.kill()
        old.wait()
        node.stop()


def test_a_second_node_on_a_live_nodes_data_dir_is_refused(tmp_path):
    node = start_node(tmp_path / "data")
    try:
        second = start_node(node.data_dir, wait=False)
        assert second.proc.wait(60) == 1
        assert f"is in use by node data@{HOST} (pid {node.proc.pid})" in second.log()
        assert warrenctl(node, "check_running").returncode == 0
    finally:
        node.stop()


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One node for the kill tests: each starts from a node that serves."""
    n = start_node(tmp_path_factory.mktemp("kills") / "data")
    yield n
    n.stop()


@pytest.mark.parametrize("victims", [("conn0", "quorum"), ("conn0", "conn1"), ("node",)])
def test_hosts_killed_together_all_come_back_and_status_counts_them(shared, victims):
    old = until(lambda: serving_processes(shared), "the node serving")
    for name in victims:
        os.kill(old[name]["pid"], signal.SIGKILL)
    now = until(lambda: serving_again(shared, {v: old[v] for v in victims}), "the killed hosts back", back_s)
    assert {h: now[h]["restarts"] for h in HOSTS} == {h: old[h]["restarts"] + (h in victims) for h in HOSTS}
    assert {h: now[h]["pid"] for h in HOSTS if h not in victims} == {h: old[h]["pid"] for h in HOSTS if h not in victims}


@pytest.mark.parametrize("victim", ["admin", "logger", "supervisor"])
def test_a_control_plane_process_killed_brings_the_node_back_whole(shared, victim):
    """The admin dies with its logger, the hosts with the supervisor: the main process starts the
    control plane again, and it every host."""
    old = until(lambda: serving_processes(shared), "the node serving")
    lost_before = len([e for e in events(shared) if e["event"] == "node.control_plane_lost"])
    os.kill(old[victim]["pid"], signal.SIGKILL)
    now = until(lambda: serving_again(shared, {h: old[h] for h in HOSTS}), "every host back", back_s)
    assert set(now) == {"main", "admin", "logger", "supervisor", *HOSTS}
    assert now["main"]["pid"] == shared.proc.pid
    lost = [e for e in events(shared) if e["event"] == "node.control_plane_lost"]
    assert len(lost) == lost_before + 1 and lost[-1]["process"].split()[0] in ("admin", "logger", "supervisor")
    until(lambda: len(shared.processes()) == 4 + len(HOSTS), "the old ones all gone")


def test_stop_ends_every_process_even_when_a_host_hangs(tmp_path):
    conf = tmp_path / "warren.conf"
    conf.write_text("stop_timeout = 2000\n")
    node = start_node(tmp_path / "data", "--config", str(conf))
    hung = psutil.Process(processes(node)["conn1"]["pid"])
    pids = [p.pid for p in node.processes()]
    hung.suspend()
    try:
        assert warrenctl(node, "stop").returncode == 0
        assert node.proc.wait(30) == 0
        until(lambda: alive(pids) == [], "every process gone", gone_s)
        killed = [e for e in events(node) if e["event"] == "supervisor.host_killed"]
        assert [(e["host"], e["pid"]) for e in killed] == [("conn1", hung.pid)]
    finally:
        node.stop()


def test_a_host_that_cannot_start_stops_the_node_with_an_error_naming_it(tmp_path):
    conf = tmp_path / "warren.conf"
    conf.write_text(f"listeners.ssl.default = {stable_port()}\nssl_options.certfile = /nonexistent/cert.pem\n"
                    "ssl_options.keyfile = /nonexistent/key.pem\n")
    node = start_node(tmp_path / "data", "--config", str(conf), wait=False)
    assert node.proc.wait(120) == 1
    failed = [e for e in events(node) if e["event"] == "node.failed"]
    assert len(failed) == 1 and failed[0]["reason"].startswith(("host conn0 exited 6 times", "host conn1 exited 6 times"))
    assert "FileNotFoundError" in failed[0]["reason"]
    assert node.processes() == []


def test_systemd_is_told_ready_once_the_node_serves_and_stopping_when_it_stops(tmp_path, monkeypatch):
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.settimeout(90)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
    node = start_node(tmp_path / "data", wait=False)
    try:
        ready = notify.recv(4096).decode().split("\n")
        assert ready[0] == "READY=1" and f"MAINPID={node.proc.pid}" in ready
        assert port_open(node.port) and (node.data_dir / "ready").exists()
        node.terminate()
        assert notify.recv(4096).decode() == "STOPPING=1"
    finally:
        node.stop()
        notify.close()
