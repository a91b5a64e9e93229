"""A started node's processes, counted: all of them under its main process (none reparented to PID 1,
no zombie), the ones `warrenctl status` lists, and none left after SIGTERM or `warrenctl stop`."""
from __future__ import annotations

import json
import signal

import psutil
import pytest

from tests.integration.admin_support import ok
from scripts.local_cluster import HOST
from tests.integration.nodes import start_node
from tests.waiting import until

pytestmark = pytest.mark.integration
# main, Thespian's admin and logger, the supervisor, and the hosts of the default configuration
HOSTS = ("node", "quorum", "conn0", "conn1")  # the classic queues run in the connection hosts
PROCESSES = 4 + len(HOSTS)
wait_s = 30.0


def tree(pid: int) -> list[psutil.Process]:
    main = psutil.Process(pid)
    return [main, *main.children(recursive=True)]


def same_command(pid: int) -> set[int]:
    """Every process on the machine running the node's command line, wherever it hangs."""
    cmdline = psutil.Process(pid).cmdline()
    return {p.pid for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == cmdline}


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those still in the process table (a zombie counts: something failed to reap it)."""
    return [p for p in procs if p.is_running()]


def settled(pid: int) -> list[psutil.Process]:
    """The node's tree once the admin's daemonising child is gone and every host is up."""
    return until(lambda: (lambda procs: procs if len(procs) == PROCESSES else None)(tree(pid)),
                 f"{PROCESSES} processes under the node's main process", wait_s)


def test_every_process_hangs_under_main_none_is_a_zombie_and_sigterm_leaves_none(tmp_path):
    node = start_node(tmp_path / "data")
    try:
        procs = settled(node.proc.pid)
        assert {p.pid for p in procs} == same_command(node.proc.pid)  # nothing reparented to PID 1
        assert [p for p in procs if p.status() == psutil.STATUS_ZOMBIE] == []
    finally:
        node.proc.send_signal(signal.SIGTERM)
        assert node.proc.wait(wait_s) == 0
    assert alive(procs) == []  # gone by the time main exited, reaped


def test_status_lists_the_processes_and_stop_leaves_none(tmp_path):
    node = start_node(tmp_path / "data")
    try:
        procs = settled(node.proc.pid)
        st = json.loads(ok(node, "status", "--formatter", "json"))
        assert sorted(p["pid"] for p in st["processes"]) == sorted(p.pid for p in procs)
        names = {p["name"]: p for p in st["processes"]}
        assert set(names) == {"main", "admin", "logger", "supervisor", *HOSTS}
        assert names["main"]["pid"] == node.proc.pid == st["pid"]
        assert all(names[h]["restarts"] == 0 for h in HOSTS)
        assert (st["node"], st["amqp_port"], st["cluster_port"]) == (f"data@{HOST}", node.port, node.cluster_port)
        assert st["uptime_s"] >= 0 and st["memory_pss"] == sum(p["pss"] for p in st["processes"]) > 0
        table = ok(node, "status")
        assert f"amqp_port\t{node.port}" in table.splitlines()
        assert "name\tpid\trestarts\trss\tpss" in table.splitlines()
        assert ok(node, "stop").strip() == f"Stopping and halting node data@{HOST} ..."
        # stop returned after every process had exited; main waits for this test to reap it
        assert alive(procs[1:]) == []
        assert node.proc.wait(wait_s) == 0
    finally:
        node.stop()


def test_status_counts_a_hosts_restart(tmp_path):
    node = start_node(tmp_path / "data")
    try:
        settled(node.proc.pid)
        conn0 = next(p for p in json.loads(ok(node, "status", "--formatter", "json"))["processes"]
                      if p["name"] == "conn0")
        psutil.Process(conn0["pid"]).kill()

        def restarted():
            st = json.loads(ok(node, "status", "--formatter", "json"))
            row = next((p for p in st["processes"] if p["name"] == "conn0"), None)
            return row if row is not None and row["pid"] != conn0["pid"] else None
        row = until(restarted, "conn0 restarted", wait_s)
        assert row["restarts"] == 1
    finally:
        node.stop()
