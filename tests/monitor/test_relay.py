"""The alarm relay (actors/monitor/relay.py): the exact effects for each input. One node's alarm
reaches its connection hosts and the other nodes' relays; another node's alarm is taken, never
passed on; a node coming up learns this node's alarms, a node going down takes its own away."""
from __future__ import annotations

from actors.messages.alarms import Conserve, ResourceAlarm, WatchAlarms
from actors.messages.cluster import NodesUp
from actors.messages.runtime import Undelivered
from actors.monitor.relay import AlarmRelay
from effects import Log, Send

BANNER = ("\n\n**********************************************************\n"
          "*** Publishers will be blocked until this alarm clears ***\n"
          "**********************************************************\n")
CONN0, CONN1 = "conn0/alarm_watcher", "conn1/alarm_watcher"


def relay(node: str = "n1") -> AlarmRelay:
    return AlarmRelay(node, relay_of=lambda other: f"{other}:node/alarms")


def watched(*watchers: str) -> AlarmRelay:
    r = relay()
    for w in watchers:
        assert r.receive(w, WatchAlarms()) == []
    return r


def test_a_watcher_is_told_nothing_while_nothing_is_short():
    assert relay().receive(CONN0, WatchAlarms()) == []


def test_a_local_alarm_is_logged_and_every_watcher_conserves():
    r = watched(CONN0, CONN1)
    assert r.receive("node/resource_monitor", ResourceAlarm("n1", "memory", True)) == [
        Log(f"memory resource limit alarm set on node n1.{BANNER}", "warning"),
        Send(CONN0, Conserve("memory", True)), Send(CONN1, Conserve("memory", True))]
    assert r.receive("node/resource_monitor", ResourceAlarm("n1", "memory", False)) == [
        Log("memory resource limit alarm cleared on node n1", "warning"),
        Log("memory resource limit alarm cleared across the cluster", "warning"),
        Send(CONN0, Conserve("memory", False)), Send(CONN1, Conserve("memory", False))]


def test_a_watcher_that_comes_late_or_again_is_told_what_is_short_now():
    r = watched(CONN0)
    r.receive("m", ResourceAlarm("n1", "memory", True))
    r.receive("m", ResourceAlarm("n2", "disk", True))
    for watcher in (CONN1, CONN0):
        assert r.receive(watcher, WatchAlarms()) == [Send(watcher, Conserve("disk", True)),
                                                     Send(watcher, Conserve("memory", True))]
    assert list(r.watchers) == [CONN0, CONN1]  # a restarted host is not counted twice


def test_a_second_node_short_of_the_same_resource_changes_nothing_for_watchers():
    r = watched(CONN0)
    r.receive("m", ResourceAlarm("n1", "memory", True))
    assert r.receive("n2:node/alarms", ResourceAlarm("n2", "memory", True)) == [
        Log(f"memory resource limit alarm set on node n2.{BANNER}", "warning")]
    assert r.receive("m", ResourceAlarm("n1", "memory", False)) == [
        Log("memory resource limit alarm cleared on node n1", "warning")]


def test_an_alarm_repeated_is_taken_once():
    r = watched(CONN0)
    r.receive("m", ResourceAlarm("n1", "disk", True))
    assert r.receive("m", ResourceAlarm("n1", "disk", True)) == []
    assert r.receive("m", ResourceAlarm("n2", "disk", False)) == []  # never set there


def test_own_alarms_go_to_the_peers_up_and_theirs_are_not_passed_on():
    r = watched(CONN0)
    assert r.receive("cluster", NodesUp(["n1", "n2", "n3"], [])) == []
    assert r.receive("m", ResourceAlarm("n1", "disk", True))[-2:] == [
        Send("n2:node/alarms", ResourceAlarm("n1", "disk", True)),
        Send("n3:node/alarms", ResourceAlarm("n1", "disk", True))]
    out = r.receive("n2:node/alarms", ResourceAlarm("n2", "memory", True))
    assert not any(type(e) is Send and type(e.msg) is ResourceAlarm for e in out)
    assert out[-1] == Send(CONN0, Conserve("memory", True))


def test_a_node_coming_up_learns_this_nodes_alarms_and_only_those():
    r = watched()
    r.receive("m", ResourceAlarm("n1", "memory", True))
    r.receive("m", ResourceAlarm("n1", "disk", True))
    r.receive("n3:node/alarms", ResourceAlarm("n3", "memory", True))
    assert r.receive("cluster", NodesUp(["n1", "n2"], [])) == [
        Send("n2:node/alarms", ResourceAlarm("n1", "disk", True)),
        Send("n2:node/alarms", ResourceAlarm("n1", "memory", True))]
    assert r.receive("cluster", NodesUp(["n1", "n2"], [])) == []  # already up: nothing again


def test_a_node_going_down_takes_its_alarms_and_is_told_again_when_back():
    r = watched(CONN0)
    r.receive("cluster", NodesUp(["n1", "n2"], []))
    r.receive("n2:node/alarms", ResourceAlarm("n2", "disk", True))
    r.receive("m", ResourceAlarm("n1", "memory", True))
    assert r.receive("cluster", NodesUp(["n1"], ["n2"])) == [
        Log("disk resource limit alarm cleared for dead node n2", "warning"),
        Log("disk resource limit alarm cleared across the cluster", "warning"),
        Send(CONN0, Conserve("disk", False))]
    assert r.receive("cluster", NodesUp(["n1", "n2"], [])) == [
        Send("n2:node/alarms", ResourceAlarm("n1", "memory", True))]


def test_undelivered_conserve_is_dropped_quietly_and_strangers_are_logged():
    r = watched(CONN0)
    assert r.receive(CONN0, Undelivered(Conserve("memory", True))) == []
    assert r.receive(CONN0, Conserve("memory", True)) == [
        Log("alarms.unexpected_message", "warning", (("kind", "Conserve"),))]
