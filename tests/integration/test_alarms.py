"""Memory and disk alarms on a real node, seen by real clients (issue 14, 1-3): warrenctl sets the
limits at run time as rabbitmqctl does; a connection that publishes while an alarm is in force is
blocked (connection.blocked with RabbitMQ's reason to a client that announced the capability, pika's
callbacks fire), one that has not published stays usable and shows `blocking`; consumers keep
receiving and acking; everything unblocks when the alarm clears; a blocked connection is not closed
for missed heartbeats; the node logs what RabbitMQ logs; paging follows the new limit."""
from __future__ import annotations

import pytest

from scripts.local_cluster import HOST
from tests.integration.admin_support import ok, warrenctl
from tests.integration.alarm_support import Watched, states, status
from tests.integration.nodes import module_node, start_node
from tests.integration.raw_client import RawClient
from tests.waiting import until
from wire import methods as m
from wire.frames import method_frame
from wire.inbound import Command, Heartbeat

pytestmark = pytest.mark.integration
NO_LIMIT = "1000000000000000000"  # 1 EB: beyond any machine's RAM
NODE = f"data@{HOST}"  # every node of these tests runs in a data dir named "data"


node = module_node("alarms")


@pytest.fixture(autouse=True)
def default_limits(node):
    yield
    ok(node, "set_vm_memory_high_watermark", "0.4")
    ok(node, "set_disk_free_limit", "50MB")
    until(lambda: status(node)["alarms"] == [], "the alarms to clear")


def test_a_memory_alarm_blocks_publishers_only_and_clears(node):
    publisher, consumer = Watched(node), Watched(node)
    try:
        publisher.ch.queue_declare("alarm.q")
        for i in range(3):
            publisher.ch.basic_publish("", "alarm.q", f"before {i}".encode())
        assert ok(node, "set_vm_memory_high_watermark", "0").startswith(f"Setting memory threshold on {NODE} to 0 ...")
        until(lambda: set(states(node).values()) == {"blocking"}, "every connection to show blocking")
        publisher.ch.basic_publish("", "alarm.q", b"during")
        publisher.wait_for([("blocked", "low on memory")], "connection.blocked")
        until(lambda: sorted(states(node).values()) == ["blocked", "blocking"], "the publisher to show blocked")
        shown = ok(node, "list_connections", "name", "state").splitlines()
        assert shown[0] == "name\tstate"
        assert sorted(line.split("\t")[1] for line in shown[1:]) == ["blocked", "blocking"]

        got = []  # the consumer connection receives and acks while the alarm is in force
        consumer.ch.basic_consume("alarm.q", lambda ch, d, p, body: (got.append(body),
                                                                      ch.basic_ack(d.delivery_tag)))
        until(lambda: consumer.conn.process_data_events(0) or len(got) >= 3, "the consumer to get the backlog")
        assert got[:3] == [b"before 0", b"before 1", b"before 2"] and consumer.events == []

        ok(node, "set_vm_memory_high_watermark", "0.4")
        publisher.wait_for([("blocked", "low on memory"), ("unblocked",)], "connection.unblocked")
        until(lambda: set(states(node).values()) == {"running"}, "every connection to run again")
        publisher.ch.basic_publish("", "alarm.q", b"after")
        until(lambda: consumer.conn.process_data_events(0) or len(got) == 5, "a publish after the alarm")
        # the publish that blocked is taken, during the alarm when it was read whole, else after it
        assert got[3:] == [b"during", b"after"]
    finally:
        publisher.close()
        consumer.close()
    log = node.log()
    assert "vm_memory_high_watermark set. Memory used:" in log and " allowed:0" in log
    assert f"memory resource limit alarm set on node {NODE}." in log
    assert "*** Publishers will be blocked until this alarm clears ***" in log
    assert f"memory resource limit alarm cleared on node {NODE}" in log
    assert "memory resource limit alarm cleared across the cluster" in log


def test_a_disk_alarm_blocks_with_its_reason_and_a_connection_opened_during_it_starts_blocking(node):
    assert ok(node, "set_disk_free_limit", NO_LIMIT).startswith(
        f"Setting disk free limit on {NODE} to {NO_LIMIT} bytes ...")
    until(lambda: status(node)["alarms"] == [[NODE, "disk"]], "the disk alarm")
    late = Watched(node)
    try:
        assert set(states(node).values()) == {"blocking"}
        late.ch.queue_declare("alarm.disk")  # a connection that has not published stays usable
        late.ch.basic_publish("", "alarm.disk", b"x")
        late.wait_for([("blocked", "low on disk")], "connection.blocked")
        ok(node, "set_vm_memory_high_watermark", "absolute", "0")
        ok(node, "set_disk_free_limit", "mem_relative", "0.0")
        until(lambda: status(node)["alarms"] == [[NODE, "memory"]], "the memory alarm alone")
        assert late.events == [("blocked", "low on disk")]  # a change of reason while blocked: nothing
        ok(node, "set_vm_memory_high_watermark", "0.4")
        late.wait_for([("blocked", "low on disk"), ("unblocked",)], "connection.unblocked")
    finally:
        late.close()
    assert "Free disk space is insufficient. Free bytes:" in node.log()
    assert f"Limit: {NO_LIMIT}" in node.log()


def test_both_alarms_name_both_resources(node):
    client = RawClient(node.port, capabilities={"connection.blocked": True})
    try:
        ok(node, "set_vm_memory_high_watermark", "0")
        ok(node, "set_disk_free_limit", NO_LIMIT)
        until(lambda: len(status(node)["alarms"]) == 2, "both alarms")
        client.publish("nowhere", b"x")
        assert client.expect(m.ConnectionBlocked).method.reason == "low on disk & memory"
    finally:
        client.close()


def test_a_client_without_the_capability_is_blocked_without_a_word(node):
    silent = RawClient(node.port, capabilities={})
    try:
        ok(node, "set_vm_memory_high_watermark", "0")
        until(lambda: status(node)["alarms"], "the memory alarm")
        silent.publish("nowhere", b"x")
        until(lambda: "blocked" in states(node).values(), "the connection to be blocked")
        ok(node, "set_vm_memory_high_watermark", "0.4")
        until(lambda: set(states(node).values()) == {"running"}, "the connection to run again")
        silent.send(method_frame(1, m.ChannelClose(reply_code=200, reply_text="", class_id=0, method_id=0)))
        silent.expect(m.ChannelCloseOk)  # the first frame since the alarm: no blocked, no unblocked
    finally:
        silent.close()


def test_heartbeats_do_not_close_a_blocked_connection(node):
    """With heartbeat 1 s a silent client is closed after 2 s: blocked, ours stays open while the
    broker sends 8 heartbeats (4 s) and we send nothing (the broker would not read it anyway)."""
    ok(node, "set_vm_memory_high_watermark", "0")
    until(lambda: status(node)["alarms"], "the memory alarm")
    client = RawClient(node.port, heartbeat=1, capabilities={"connection.blocked": True})
    try:
        client.publish("nowhere", b"x")  # at once: silent and unblocked for 2 s, it would be closed
        client.expect(m.ConnectionBlocked)
        heartbeats = 0
        while heartbeats < 8:
            events = client.read()  # raises ConnectionError if the broker closes the socket
            heartbeats += sum(isinstance(e, Heartbeat) for e in events)
            assert not any(isinstance(e, Command) for e in events), events
        ok(node, "set_vm_memory_high_watermark", "0.4")
        client.expect(m.ConnectionUnblocked)
    finally:
        client.close()


def test_warrenctl_refuses_what_rabbitmqctl_refuses(node):
    cases = [(("set_vm_memory_high_watermark",), 64, "not enough arguments."),
             (("set_vm_memory_high_watermark", "absolute"), 64, "not enough arguments."),
             (("set_vm_memory_high_watermark", "0.4", "extra"), 64, "too many arguments."),
             (("set_vm_memory_high_watermark", "1.5"), 65,
              "Bad argument: The threshold should be a fraction between 0.0 and 1.0"),
             (("set_vm_memory_high_watermark", "absolute", "1.5GB"), 65,
              "Bad argument: The threshold should be an integer."),
             (("set_vm_memory_high_watermark", "absolute", "2XB"), 65, "Bad argument: Invalid units."),
             (("set_disk_free_limit", "abc"), 65, "Bad argument."),
             (("set_disk_free_limit", "mem_relative", "-1"), 65, "Bad argument."),
             (("set_disk_free_limit",), 64, "not enough arguments.")]
    for args, code, text in cases:
        r = warrenctl(node, *args)
        assert (r.returncode, r.stderr) == (code, f"Error: {text}\n"), args
    assert ok(node, "set_disk_free_limit", "mem_relative", "1.0") == (
        f"Setting disk free limit on {NODE} to 1.0 times the total RAM ...\n")
    assert ok(node, "set_vm_memory_high_watermark", "absolute", "2GB") == (
        f"Setting memory threshold on {NODE} to 2GB bytes ...\n")
    assert status(node)["memory"]["limit"] == 2_000_000_000


def paging(node) -> bool:
    """Whether the queue host's last word on paging was that it started."""
    said = [line for line in node.log().splitlines() if "paging_started" in line or "paging_stopped" in line]
    return bool(said) and "paging_started" in said[-1]


def test_paging_starts_at_the_paging_ratio_of_the_limit_set_at_run_time(node):
    """1.5 times the node's memory as the limit: no alarm, and paging (at half of it, 0.75 times
    the memory: a margin for the node's memory to shrink meanwhile, as it did once) starts at once."""
    # the alarms of the tests before (a limit of 0) made the queue host page; it stops once a round
    # of its housekeeping sees the default limit again, and only a start after that is logged
    until(lambda: not paging(node), "paging from the earlier alarms to stop")
    used = status(node)["memory"]["used"]
    limit = int(used * 1.5)
    seen = len(node.log())
    ok(node, "set_vm_memory_high_watermark", "absolute", str(limit))
    line = until(lambda: next((line for line in node.log()[seen:].splitlines() if "paging_started" in line), None),
                 "paging to start")
    assert f"threshold={limit // 2} " in line
    assert status(node)["alarms"] == []


def test_an_alarm_from_the_configuration_holds_from_the_start(tmp_path):
    conf = tmp_path / "warren.conf"
    conf.write_text("vm_memory_high_watermark.relative = 0.0\ndisk_free_limit.absolute = 1GB\n"
                    "disk_free_limit.relative = 1.0\n")
    n = start_node(tmp_path / "data", "--config", str(conf))
    try:
        until(lambda: status(n)["alarms"] == [[NODE, "memory"]], "the memory alarm")
        client = RawClient(n.port, capabilities={"connection.blocked": True})
        client.publish("nowhere", b"x")
        assert client.expect(m.ConnectionBlocked).method.reason == "low on memory"
        client.close()
        log = n.log()
        assert "Memory high watermark set to 0 MiB (0 bytes) of" in log
        assert "Disk free limit set to 1000MB" in log
        assert ("Both disk_free_limit.absolute and disk_free_limit.relative are configured. "
                "disk_free_limit.absolute has precedence") in log
    finally:
        n.stop()
