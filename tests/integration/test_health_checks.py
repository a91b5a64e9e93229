"""warrenctl's health checks (scripts/ctl_health.py) with rabbitmq-diagnostics' exit codes, as
RabbitMQ 3.10's answered them here: 0 when the check passes, 69 when it fails (the node
unreachable, not booted, an alarm in force, a port that does not connect), 64 for a check that
needs a booted node. Texts in RabbitMQ's shape; JSON with its keys."""
from __future__ import annotations

import json

import pytest

from scripts import ctl_health
from scripts.local_cluster import HOST
from tests.integration.admin_support import warrenctl, warrenctl_process
from tests.integration.nodes import module_node, start_node, wait_serving
from tests.waiting import until

pytestmark = pytest.mark.integration


node = module_node("health")


def run(node, *args):
    r = warrenctl(node, *args)
    return r.returncode, r.stdout.strip(), r.stderr.strip()


def test_a_serving_node_passes_every_check(node):
    name = f"data@{HOST}"
    assert run(node, "ping") == (0, "Ping succeeded", "")
    assert run(node, "check_running") == (0, f"warren on node {name} is fully booted and running", "")
    assert run(node, "check_local_alarms") == (0, f"Node {name} reported no local alarms", "")
    assert run(node, "check_port_connectivity") == (
        0, f"Successfully connected to ports {', '.join(map(str, sorted([node.port, node.cluster_port])))} "
           f"on node {name}.", "")
    assert run(node, "await_startup") == (0, "", "")
    code, out, _ = run(node, "check_port_connectivity", "--formatter", "json")
    doc = json.loads(out)
    assert code == 0 and doc["result"] == "ok" and doc["node"] == name
    assert {(x["port"], x["protocol"]) for x in doc["listeners"]} == {(node.port, "amqp"), (node.cluster_port, "clustering")}
    assert json.loads(run(node, "check_local_alarms", "--formatter", "json")[1]) == {"result": "ok"}
    assert warrenctl_process(node, "ping").returncode == 0  # the command itself


def test_a_local_alarm_fails_check_local_alarms_with_69(node):
    name = f"data@{HOST}"
    assert run(node, "set_vm_memory_high_watermark", "0")[0] == 0
    try:
        until(lambda: run(node, "check_local_alarms")[0] == 69, "the memory alarm in force")
        assert run(node, "check_local_alarms") == (69, "", f"Error:\nMemory alarm on node {name}")
        code, out, _ = run(node, "check_local_alarms", "--formatter", "json")
        assert code == 69 and json.loads(out) == {"result": "error", "local": [f"Memory alarm on node {name}"],
                                                  "message": f"Node {name} reported local alarms"}
        assert run(node, "check_running")[0] == 0  # an alarm does not make the node stop running
    finally:
        assert run(node, "set_vm_memory_high_watermark", "0.4")[0] == 0
    until(lambda: run(node, "check_local_alarms")[0] == 0, "the alarm cleared")


def test_await_startup_waits_for_a_booting_node_and_every_check_fails_with_69_once_it_stopped(tmp_path, monkeypatch):
    booting = start_node(tmp_path / "data", wait=False)
    try:
        assert run(booting, "await_startup", "--timeout", "120")[0] == 0  # returns once it serves
        assert run(booting, "check_running")[0] == 0
        wait_serving(booting)
    finally:
        booting.stop()
    for check in ("ping", "check_running", "check_local_alarms", "check_port_connectivity"):
        code, _, err = run(booting, check)
        assert code == 69 and err.startswith("Error: unable to reach the node"), (check, err)
    monkeypatch.setattr(ctl_health, "appear_s", 0.2)
    assert run(booting, "await_startup") == (69, "", f"Error:\nno warren node is running in {booting.data_dir}")


def test_usage_errors_exit_64(node):
    assert run(node, "ping", "extra")[0] == 64
