"""The supervisor's restart policy (actors/runtime/restarts.py): the exact effects for each input,
as ra_server_SUITE checks its core's. The gate, restarts with backoff, the intensity, stops."""
from __future__ import annotations

from actors.runtime.restarts import Intensity, Policy, Supervision
from effects import AllStopped, GiveUp, KillHost, Log, NodeServes, OpenListeners, SpawnHost, StopHost

POLICY = Policy(intensity=3, period_ms=10_000, backoff_ms=(0, 100, 400), stop_timeout_ms=5_000)


def kinds(effects: list) -> list:
    """The effects without their Log lines (checked where they matter)."""
    return [e for e in effects if not isinstance(e, Log)]


def logged(effects: list) -> list[tuple[str, dict]]:
    return [(e.event, dict(e.fields)) for e in effects if isinstance(e, Log)]


def node(*hosts: tuple[str, bool]) -> Supervision:
    return Supervision(hosts or (("node", False), ("quorum", False), ("conn0", True), ("conn1", True)), POLICY)


def serving(s: Supervision) -> Supervision:
    """Every host forked, started and open (pids 100, 101, ...)."""
    s.start(0)
    for i, name in enumerate(s.hosts):
        s.forked(name, 100 + i, 0)
    for i, name in enumerate(s.hosts):
        s.started(name, 100 + i, None, 0)
    for i, name in enumerate(s.hosts):
        s.opened(name, 100 + i, None, 0)
    assert s.served and s.not_serving() == []
    return s


def test_start_spawns_every_host_in_order():
    assert node().start(0) == [SpawnHost("node"), SpawnHost("quorum"), SpawnHost("conn0"), SpawnHost("conn1")]


def test_listeners_open_only_once_every_host_has_started_then_the_node_serves():
    s = node()
    s.start(0)
    for i, name in enumerate(s.hosts):
        assert s.forked(name, 100 + i, 0) == []
    assert s.started("conn0", 102, None, 0) == []          # held: the node host has not started
    assert s.started("node", 100, None, 0) == []
    assert s.started("conn1", 103, None, 0) == []
    assert kinds(s.started("quorum", 101, None, 0)) == [OpenListeners("conn0", 102), OpenListeners("conn1", 103)]
    assert s.opened("conn0", 102, None, 0) == []
    out = s.opened("conn1", 103, None, 0)
    assert kinds(out) == [NodeServes()] and logged(out)[0][0] == "supervisor.node_serving"
    assert s.opened("conn1", 103, None, 0) == []          # said once


def test_a_host_without_listeners_may_be_the_last_to_start():
    s = node()
    s.start(0)
    for i, name in enumerate(s.hosts):
        s.forked(name, 100 + i, 0)
    s.started("conn0", 102, None, 0)
    s.started("conn1", 103, None, 0)
    s.started("node", 100, None, 0)
    assert kinds(s.started("quorum", 101, None, 0)) == [OpenListeners("conn0", 102), OpenListeners("conn1", 103)]


def test_a_node_of_hosts_without_listeners_serves_when_all_started():
    s = node(("a", False), ("b", False))
    s.start(0)
    s.forked("a", 1, 0)
    s.forked("b", 2, 0)
    assert s.started("a", 1, None, 0) == []
    assert kinds(s.started("b", 2, None, 0)) == [NodeServes()]


def test_an_exit_restarts_at_once_then_with_backoff_and_a_listening_host_opens_once_started():
    s = serving(node())
    out = s.exited("conn0", 102, "killed by SIGKILL", 1000)
    assert kinds(out) == [SpawnHost("conn0")]
    assert logged(out) == [("supervisor.host_exited", {"host": "conn0", "cause": "killed by SIGKILL",
                                                        "restarts": 1, "restart_in_ms": 0})]
    assert s.forked("conn0", 200, 1000) == []
    assert s.started("conn0", 200, None, 1100) == [OpenListeners("conn0", 200)]  # the node served already
    assert s.opened("conn0", 200, None, 1100) == []
    assert kinds(s.exited("conn0", 200, "exited with status 1", 2000)) == []  # the 2nd: 100 ms backoff
    assert s.tick(2099) == []
    assert s.tick(2100) == [SpawnHost("conn0")]
    assert s.hosts["conn0"].restarts == 2


def test_hosts_killed_together_are_each_restarted():
    s = serving(node())
    assert kinds(s.exited("conn0", 102, "exited", 0)) == [SpawnHost("conn0")]
    assert kinds(s.exited("conn1", 103, "exited", 0)) == [SpawnHost("conn1")]
    assert {name for name, _ in s.processes()} == {"node", "quorum"}


def test_an_answer_from_a_replaced_process_is_ignored():
    s = serving(node())
    s.exited("quorum", 101, "exited", 0)
    s.forked("quorum", 300, 0)
    assert s.started("quorum", 101, "late news from the dead one", 0) == []
    assert s.exited("quorum", 101, "exited", 0) == []
    assert s.hosts["quorum"].pid == 300 and s.hosts["quorum"].restarts == 1


def test_a_start_error_kills_the_host_and_its_exit_restarts_it_with_the_error_as_cause():
    s = node(("a", False))
    s.start(0)
    s.forked("a", 1, 0)
    out = s.started("a", 1, "CookieError: cookie file ~/.warren.cookie is empty", 0)
    assert kinds(out) == [KillHost("a", 1)]
    assert logged(out)[0] == ("supervisor.host_start_failed",
                              {"host": "a", "pid": 1, "error": "CookieError: cookie file ~/.warren.cookie is empty"})
    out = s.exited("a", 1, "killed by SIGKILL", 10)
    assert kinds(out) == [SpawnHost("a")] and logged(out)[0][1]["cause"] == "killed by SIGKILL"
    assert s.hosts["a"].cause == "CookieError: cookie file ~/.warren.cookie is empty"


def test_a_listener_that_fails_to_open_is_a_failure_too():
    s = node(("conn0", True))
    s.start(0)
    s.forked("conn0", 1, 0)
    assert kinds(s.started("conn0", 1, None, 0)) == [OpenListeners("conn0", 1)]
    assert kinds(s.opened("conn0", 1, "OSError: [Errno 98] Address already in use", 0)) == [KillHost("conn0", 1)]


def test_past_the_intensity_the_node_gives_up_naming_the_host_and_the_last_cause():
    s = node(("a", False), ("b", False))
    s.start(0)
    s.forked("b", 50, 0)

    def fails(pid: int, now: int) -> list:
        s.forked("a", pid, now)
        assert kinds(s.started("a", pid, "ValueError: bad certificate", now)) == [KillHost("a", pid)]
        return s.exited("a", pid, "killed by SIGKILL", now)
    assert kinds(fails(1, 0)) == [SpawnHost("a")]      # three restarts within the period: allowed,
    assert kinds(fails(2, 0)) == [] and s.tick(100) == [SpawnHost("a")]  # each after its backoff
    assert kinds(fails(3, 100)) == [] and s.tick(500) == [SpawnHost("a")]
    out = fails(4, 500)
    reason = "host a exited 4 times within 10 s; the last time: ValueError: bad certificate"
    assert kinds(out) == [GiveUp("a", reason)] and logged(out)[0] == ("supervisor.giving_up", {"host": "a", "reason": reason})
    assert s.failed == GiveUp("a", reason)
    assert s.exited("b", 50, "exited", 600) == [] and s.tick(60_000) == []  # nothing restarts any more


def test_restarts_older_than_the_period_no_longer_count():
    i = Intensity(2, 1000, (0, 50))
    assert [i.restart(t) for t in (0, 10)] == [0, 50]
    assert i.restart(20) is None
    j = Intensity(2, 1000, (0, 50))  # the period is the last 1000 ms: (now - 1000, now]
    assert [j.restart(t) for t in (0, 500, 1500, 1600, 1700)] == [0, 50, 0, 50, None]


def test_a_process_that_never_appeared_is_an_exit():
    s = node(("a", False))
    s.start(0)
    out = s.forked("a", 0, 0)
    assert kinds(out) == [SpawnHost("a")] and logged(out)[0][1]["cause"] == "its process did not appear"


def test_a_stop_stops_every_host_kills_the_late_ones_at_the_deadline_and_says_when_none_is_left():
    s = serving(node())
    assert s.stop(1000) == [StopHost("node", 100), StopHost("quorum", 101), StopHost("conn0", 102), StopHost("conn1", 103)]
    assert s.exited("node", 100, "exited with status 0", 1500) == []
    assert s.exited("conn0", 102, "exited with status 0", 1500) == []
    assert s.tick(5999) == []
    out = s.tick(6000)
    assert kinds(out) == [KillHost("quorum", 101), KillHost("conn1", 103)]
    assert [e for e, _ in logged(out)] == ["supervisor.host_killed", "supervisor.host_killed"]
    assert s.tick(6200) == []  # killed once
    assert s.exited("quorum", 101, "killed by SIGKILL", 6100) == []
    assert s.exited("conn1", 103, "killed by SIGKILL", 6100) == [AllStopped()]
    assert s.stop(7000) == []


def test_a_stop_during_a_restart_waits_for_the_spawning_host_and_does_not_restart_the_rest():
    s = serving(node(("a", False), ("b", False)))
    s.exited("a", 100, "exited", 0)  # respawned at once: spawning, no pid yet
    assert s.stop(10) == [StopHost("b", 101)]
    assert s.forked("a", 300, 10) == [StopHost("a", 300)]
    assert s.exited("b", 101, "exited with status 0", 20) == []
    assert s.exited("a", 300, "exited with status 0", 20) == [AllStopped()]


def test_a_stop_while_a_host_waits_out_its_backoff_says_at_once():
    s = node(("a", False))
    s.start(0)
    s.forked("a", 0, 0)  # no process appeared: respawned at once
    assert kinds(s.forked("a", 0, 0)) == []  # again: now it waits 100 ms
    assert s.stop(50) == [AllStopped()]
    assert s.tick(200) == []
