"""A channel's access decisions as rabbit_channel 3.10 makes them: its permission caches (what
an open channel keeps being allowed after permissions change, and when it forgets: hibernation),
topic permissions on publish and bind, the impersonator tag, and a server-named queue checked
under the name it gets. Behaviour from the oracle (tests/access/test_oracle_cases.py)."""
from __future__ import annotations

import random

from actors.channel.core import ChannelCore
from actors.channel.hibernation import Hibernation
from actors.channel.permissions import cache_entries_max
from actors.messages.node import DeclareQueue
from effects import Send, Write
from metadata.commands import SetTopicPermissions, SetVhostLimits
from wire import methods as m

from tests.channel.helpers import PermRegistry, close_frame, cmd, declare, make, publish

TPS = 4  # the channel's ticks per second


def registry() -> PermRegistry:
    reg = PermRegistry()
    for x in [f"x{i}" for i in range(cache_entries_max + 1)]:
        reg.declare_exchange("/", x, "fanout")
    declare(reg, "q")
    return reg


def refused_publish(out: list, exchange: str) -> bool:
    text = f"ACCESS_REFUSED - access to exchange '{exchange}' in vhost '/' refused for user 'guest'"
    return out == [Write([close_frame(403, text, 60, 40)])]


def published_then_withdrawn() -> ChannelCore:
    """A channel that published to x0, allowed (so its cache remembers that), after which the
    user's write permission is withdrawn."""
    reg = registry()
    core = make(reg)
    core.command(publish("x0", "k"))
    core.flush()
    reg.permissions[("guest", "/")] = {"write": "^nothing$"}
    return core


def test_an_allowed_publish_stays_allowed_after_the_permission_is_withdrawn():
    core = published_then_withdrawn()
    core.command(publish("x0", "k"))
    assert not any(isinstance(e, Write) for e in core.flush())  # remembered: as RabbitMQ's cache
    core.command(publish("x1", "k"))
    assert refused_publish(core.flush(), "x1")  # not remembered: checked now


def test_the_cache_holds_the_12_newest_allowed_checks():
    reg = registry()
    core = make(reg)
    for i in range(cache_entries_max + 1):  # x0 is pushed out by the 13th
        core.command(publish(f"x{i}", "k"))
    core.flush()
    checks = reg.permission_checks
    core.command(publish(f"x{cache_entries_max}", "k"))
    assert reg.permission_checks == checks
    core.command(publish("x0", "k"))
    assert reg.permission_checks == checks + 1


def test_an_idle_channel_hibernates_and_forgets_what_it_was_allowed():
    core = published_then_withdrawn()
    for _ in range(TPS // 2):  # half a second idle: awake (the oracle allows after 0.5 s)
        core.tick()
    core.command(publish("x0", "k"))
    assert not any(isinstance(e, Write) for e in core.flush())
    for _ in range(3 * TPS):  # three seconds idle: asleep (the oracle refuses after 3 s)
        core.tick()
    core.command(publish("x0", "k"))
    assert refused_publish(core.flush(), "x0")


def test_hibernation_backs_off_as_gen_server2_does():
    h = Hibernation(TPS, random.Random(3))
    assert not h.asleep_now(4) and h.asleep_now(5)  # more than 1000 ms of 250 ms ticks
    assert not h.asleep_now(5)  # once per sleep
    h.woke(6)  # a short nap: the timeout grows to base + uniform(1..base), base 1000
    grown = h.timeout_ms
    assert 1001 <= grown <= 2000
    due = 6 + grown // 250 + 1
    assert not h.asleep_now(due - 1) and h.asleep_now(due)
    h.woke(due + 1000)  # slept 250 s: the gap is long, so the base halves (never below 1000)
    base = max(1000, grown // 2)
    assert base < h.timeout_ms <= 2 * base


def topic_registry() -> PermRegistry:
    reg = registry()
    reg.add_user("guest", "")
    reg.apply_command(SetTopicPermissions("guest", "/", "amq.topic", "^{username}\\.", "^{vhost}"))
    return reg


def test_publishing_to_a_topic_exchange_checks_the_write_topic_permission():
    core = make(topic_registry())
    core.command(publish("amq.topic", "guest.x"))
    assert not any(isinstance(e, Write) for e in core.flush())
    core.command(publish("amq.topic", "alice.x"))
    text = ("ACCESS_REFUSED - access to topic 'alice.x' in exchange 'amq.topic' in vhost '/' "
            "refused for user 'guest'")
    assert core.flush() == [Write([close_frame(403, text, 60, 40)])]


def test_binding_from_a_topic_exchange_checks_the_read_topic_permission_for_queues_and_exchanges():
    text = ("ACCESS_REFUSED - access to topic 'zz' in exchange 'amq.topic' in vhost '/' "
            "refused for user 'guest'")
    for method in (m.QueueBind(queue="q", exchange="amq.topic", routing_key="zz"),
                   m.QueueUnbind(queue="q", exchange="amq.topic", routing_key="zz"),
                   m.ExchangeBind(destination="x0", source="amq.topic", routing_key="zz")):
        core = make(topic_registry())
        core.command(cmd(method))
        assert core.flush() == [Write([close_frame(403, text, method.CLASS_ID, method.METHOD_ID)])]
    core = make(topic_registry())
    core.command(cmd(m.QueueBind(queue="q", exchange="amq.topic", routing_key="/.zz")))
    assert [type(e) for e in core.flush()] == [Send]  # on to the node


def test_a_user_id_of_another_user_needs_the_impersonator_tag():
    core = make(registry())
    core.command(publish("x0", "k", user_id="alice"))
    assert core.flush()[0].chunks[0].find(b"user_id property set to 'alice'") > 0
    core = make(registry(), impersonator=True)
    core.command(publish("x0", "k", user_id="alice"))
    assert not any(isinstance(e, Write) for e in core.flush())


def test_a_server_named_queue_is_checked_and_declared_under_the_name_it_gets():
    reg = registry()
    reg.permissions[("guest", "/")] = {"configure": "^amq\\.gen-"}
    core = make(reg)
    core.command(cmd(m.QueueDeclare(queue="")))
    [send] = core.flush()
    assert isinstance(send.msg, DeclareQueue) and send.msg.queue == ""
    assert send.msg.server_name.startswith("amq.gen-") and len(send.msg.server_name) == 30
    reg.permissions[("guest", "/")] = {"configure": "^mine"}
    core = make(reg)
    core.command(cmd(m.QueueDeclare(queue="")))
    [out] = core.flush()
    assert b"access to queue 'amq.gen-" in out.chunks[0]


def test_max_queues_is_checked_before_the_dead_letter_exchange_permission():
    reg = registry()
    reg.apply_command(SetVhostLimits("/", {"max-queues": 1}))  # "q" is there already
    reg.permissions[("guest", "/")] = {"write": "^nothing$"}
    core = make(reg)
    core.command(cmd(m.QueueDeclare(queue="q2", arguments={"x-dead-letter-exchange": "x0"})))
    text = "PRECONDITION_FAILED - cannot declare queue 'q2': queue limit in vhost '/' (1) is reached"
    assert core.flush() == [Write([close_frame(406, text, 50, 10)])]
    core = make(reg)
    core.command(cmd(m.QueueDeclare(queue="q")))  # an existing queue is not counted again
    assert [type(e) for e in core.flush()] == [Send]
