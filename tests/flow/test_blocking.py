"""What an alarm does (flow/blocking.py): the cluster's alarms in force with rabbit_alarm's log texts,
and one connection's throttle, step by step with the exact effects, as rabbit_reader's throttle does it;
then both as a property against a small model over any sequence of events."""
from __future__ import annotations

from hypothesis import given, strategies as st

from effects import ConserveResources, Log, PauseReading, ResumeReading, Write
from flow.blocking import ClusterAlarms, ConnectionThrottle
from wire.frames import method_frame
from wire.methods import ConnectionBlocked, ConnectionUnblocked

BANNER = ("\n\n**********************************************************\n"
          "*** Publishers will be blocked until this alarm clears ***\n"
          "**********************************************************\n")


def blocked_frame(reason: str) -> Write:
    return Write([method_frame(0, ConnectionBlocked(reason))])


UNBLOCKED = Write([method_frame(0, ConnectionUnblocked())])


def test_the_frames_are_connection_blocked_and_unblocked_on_channel_zero():
    reason = b"low on memory"
    assert blocked_frame("low on memory").chunks == [
        b"\x01\x00\x00" + (4 + 1 + len(reason)).to_bytes(4, "big") + b"\x00\x0a\x00\x3c"
        + bytes([len(reason)]) + reason + b"\xce"]
    assert UNBLOCKED.chunks == [b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x3d\xce"]


# -- the cluster's alarms ------------------------------------------------------------------------

def test_an_alarm_on_one_node_is_logged_and_conserves_the_resource_everywhere():
    alarms = ClusterAlarms()
    assert alarms.set("memory", "rabbit@node1") == [
        Log(f"memory resource limit alarm set on node rabbit@node1.{BANNER}", "warning"),
        ConserveResources("memory", True)]
    assert alarms.resources() == {"memory"}
    assert alarms.set("memory", "rabbit@node1") == []  # already in force


def test_a_second_node_short_of_the_same_resource_changes_nothing_for_connections():
    alarms = ClusterAlarms()
    alarms.set("memory", "n1")
    assert alarms.set("memory", "n2") == [Log(f"memory resource limit alarm set on node n2.{BANNER}", "warning")]
    assert alarms.clear("memory", "n1") == [Log("memory resource limit alarm cleared on node n1", "warning")]
    assert alarms.clear("memory", "n2") == [
        Log("memory resource limit alarm cleared on node n2", "warning"),
        Log("memory resource limit alarm cleared across the cluster", "warning"),
        ConserveResources("memory", False)]
    assert alarms.resources() == frozenset() and alarms.alarms() == []


def test_clearing_an_alarm_that_is_not_in_force_does_nothing():
    alarms = ClusterAlarms()
    alarms.set("disk", "n1")
    assert alarms.clear("disk", "n2") == [] and alarms.clear("memory", "n1") == []
    assert alarms.alarms() == [("n1", "disk")]


def test_a_node_that_goes_down_takes_its_alarms_with_it():
    alarms = ClusterAlarms()
    alarms.set("disk", "n2")
    alarms.set("memory", "n2")
    alarms.set("memory", "n1")
    assert alarms.node_down("n2") == [
        Log("disk resource limit alarm cleared for dead node n2", "warning"),
        Log("disk resource limit alarm cleared across the cluster", "warning"),
        ConserveResources("disk", False),
        Log("memory resource limit alarm cleared for dead node n2", "warning")]
    assert alarms.alarms() == [("n1", "memory")]
    assert alarms.node_down("n3") == []


# -- one connection ------------------------------------------------------------------------------

def test_without_an_alarm_a_publish_changes_nothing():
    t = ConnectionThrottle(announced=True)
    assert t.published() == [] and t.state() == "running"


def test_a_connection_that_has_not_published_is_blocking_and_still_read():
    t = ConnectionThrottle(announced=True)
    assert t.conserve("memory", True) == []
    assert t.state() == "blocking"
    assert t.conserve("memory", False) == []  # it was never blocked: nothing to undo
    assert t.state() == "running"


def test_a_publish_during_an_alarm_blocks_and_tells_a_client_that_announced_the_capability():
    t = ConnectionThrottle(announced=True)
    t.conserve("memory", True)
    assert t.published() == [PauseReading(), blocked_frame("low on memory")]
    assert t.state() == "blocked"
    assert t.published() == []  # frames read before the pause took effect: still handed on, nothing new
    assert t.conserve("memory", False) == [ResumeReading(), UNBLOCKED]
    assert t.state() == "running"


def test_a_client_without_the_capability_is_blocked_without_a_word():
    t = ConnectionThrottle.for_client(frozenset({"disk"}), {"publisher_confirms": True})
    assert t.state() == "blocking"
    assert t.published() == [PauseReading()]
    assert t.conserve("disk", False) == [ResumeReading()]


def test_the_capability_must_be_announced_as_true():
    assert ConnectionThrottle.for_client(frozenset(), {"connection.blocked": True}).announced
    assert not ConnectionThrottle.for_client(frozenset(), {"connection.blocked": False}).announced
    assert not ConnectionThrottle.for_client(frozenset(), {"connection.blocked": 1}).announced


def test_both_alarms_give_one_reason_and_the_connection_stays_blocked_until_both_clear():
    t = ConnectionThrottle(frozenset({"memory", "disk"}), announced=True)
    assert t.published() == [PauseReading(), blocked_frame("low on disk & memory")]
    assert t.conserve("disk", False) == []
    assert t.state() == "blocked"
    assert t.conserve("disk", True) == []  # a reason coming back while blocked: no second connection.blocked
    assert t.conserve("memory", False) == []
    assert t.conserve("disk", False) == [ResumeReading(), UNBLOCKED]


def test_after_an_alarm_clears_the_next_one_leaves_the_connection_blocking_until_it_publishes_again():
    t = ConnectionThrottle(announced=True)
    t.conserve("memory", True)
    t.published()
    t.conserve("memory", False)
    t.conserve("disk", True)
    assert t.state() == "blocking"
    assert t.published() == [PauseReading(), blocked_frame("low on disk")]


EVENTS = st.lists(st.one_of(st.just(("publish",)),
                            st.tuples(st.just("conserve"), st.sampled_from(["memory", "disk"]), st.booleans())),
                  max_size=40)


@given(EVENTS, st.booleans())
def test_a_connection_against_a_model(events, announced):
    """Blocked exactly from the first publish under some alarm until no alarm is left; pause and
    resume alternate, and so do connection.blocked and unblocked (only to a client that asked)."""
    t = ConnectionThrottle(announced=announced)
    short: set[str] = set()
    blocked = False
    pauses, frames = [], []
    for event in events:
        if event[0] == "publish":
            effects = t.published()
            blocked = blocked or bool(short)
        else:
            _, resource, on = event
            effects = t.conserve(resource, on)
            short = short | {resource} if on else short - {resource}
            blocked = blocked and bool(short)
        assert t.state() == ("blocked" if blocked else "blocking" if short else "running")
        pauses += [type(e) for e in effects if isinstance(e, (PauseReading, ResumeReading))]
        frames += [e for e in effects if isinstance(e, Write)]
    assert pauses == [(PauseReading, ResumeReading)[i % 2] for i in range(len(pauses))]
    assert len(frames) == (len(pauses) if announced else 0)
    assert all(f == UNBLOCKED for f in frames[1::2]) and all(f != UNBLOCKED for f in frames[::2])


@given(st.lists(st.tuples(st.sampled_from(["set", "clear", "down"]), st.sampled_from(["n1", "n2", "n3"]),
                          st.sampled_from(["memory", "disk"])), max_size=40))
def test_the_cluster_against_a_model(events):
    """Connections are told `on` exactly when a resource goes from no node short of it to some, and
    `off` when back; the set in force is the model's."""
    alarms = ClusterAlarms()
    model: set[tuple[str, str]] = set()
    told: dict[str, bool] = {}
    for kind, node, resource in events:
        before = {r for _, r in model}
        if kind == "set":
            effects = alarms.set(resource, node)
            model.add((node, resource))
        elif kind == "clear":
            effects = alarms.clear(resource, node)
            model.discard((node, resource))
        else:
            effects = alarms.node_down(node)
            model = {(n, r) for n, r in model if n != node}
        after = {r for _, r in model}
        conserve = sorted((e.resource, e.on) for e in effects if isinstance(e, ConserveResources))
        assert conserve == sorted([(r, True) for r in after - before] + [(r, False) for r in before - after])
        told.update(dict(conserve))
        assert alarms.alarms() == sorted(model)
    assert {r for r, on in told.items() if on} == {r for _, r in model}
