"""Settings resolution (rabbit_quorum_queue:gather_policy_config/2, 4.0), the command wire format,
and what the machine reads from a content header."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.quorum import commands as c
from actors.quorum.config import AT_LEAST_ONCE, AT_MOST_ONCE, QueueSettings, queue_config, resolve_settings
from actors.quorum.traits import traits
from metadata.commands import PutQueue
from metadata.registry import Registry
from tests.quorum.harness import H, header


@pytest.mark.parametrize("arguments, policy, expected", [
    ({}, {}, QueueSettings()),
    ({"x-delivery-limit": -1}, {}, QueueSettings(delivery_limit=None)),
    ({"x-delivery-limit": 5}, {"delivery-limit": 50}, QueueSettings(delivery_limit=5)),
    ({"x-delivery-limit": 5}, {"delivery-limit": -1}, QueueSettings(delivery_limit=5)),   # max(-1, 5)
    ({"x-delivery-limit": -1}, {"delivery-limit": 7}, QueueSettings(delivery_limit=7)),
    ({}, {"delivery-limit": 50}, QueueSettings(delivery_limit=50)),
    ({"x-max-length": 10}, {"max-length": 3}, QueueSettings(max_length=3)),
    ({"x-max-length-bytes": 10}, {}, QueueSettings(max_length_bytes=10)),
    ({"x-message-ttl": 100, "x-expires": 9000}, {"message-ttl": 500, "expires": 5000},
     QueueSettings(message_ttl_ms=100, expires_ms=5000)),
    ({"x-overflow": b"drop-head"}, {"overflow": "reject-publish"}, QueueSettings(overflow="reject-publish")),
    ({"x-overflow": "reject-publish-dlx"}, {}, QueueSettings()),  # not for quorum queues
    ({"x-dead-letter-exchange": b"a"}, {"dead-letter-exchange": "b", "dead-letter-routing-key": "k"},
     QueueSettings(dead_letter_exchange="a", dead_letter_routing_key="k")),
    # overflow: the policy's, whichever way round (3.10's quorum queues and 4.0's alike)
    ({"x-overflow": "reject-publish"}, {"overflow": "drop-head"}, QueueSettings(overflow="drop-head")),
    ({}, {"overflow": "reject-publish"}, QueueSettings(overflow="reject-publish")),
    ({"x-overflow": "reject-publish"}, {"overflow": "reject-publish-dlx"}, QueueSettings()),  # ignored: drop-head
    # the numeric limits: the lower, whichever side sets it
    ({"x-max-length": 3}, {"max-length": 10}, QueueSettings(max_length=3)),
    ({"x-max-length-bytes": 100}, {"max-length-bytes": 50}, QueueSettings(max_length_bytes=50)),
    ({"x-expires": 1000}, {"expires": 9000}, QueueSettings(expires_ms=1000)),  # 3.10's quorum: the policy's
    ({"x-message-ttl": 0}, {"message-ttl": 10}, QueueSettings(message_ttl_ms=0)),
    ({"x-delivery-limit": -1}, {"delivery-limit": -5}, QueueSettings(delivery_limit=None)),
    ({"x-delivery-limit": 0}, {"delivery-limit": 4}, QueueSettings(delivery_limit=0)),
    # dead-lettering: the argument's, key by key; the policy fills what the arguments leave out
    ({"x-dead-letter-routing-key": "a"}, {"dead-letter-routing-key": "b", "dead-letter-exchange": "dlx"},
     QueueSettings(dead_letter_exchange="dlx", dead_letter_routing_key="a")),
    ({"x-dead-letter-strategy": "at-most-once"}, {"dead-letter-strategy": "at-least-once"}, QueueSettings()),
    ({}, {"dead-letter-strategy": "at-least-once"}, QueueSettings(dead_letter_strategy=AT_LEAST_ONCE)),
])
def test_arguments_and_policy_resolve_as_rabbitmq(arguments, policy, expected):
    assert resolve_settings(arguments, policy) == expected


def test_the_node_tells_a_quorum_queue_its_policy_unresolved_so_the_policy_s_overflow_wins():
    """End to end through the pure parts: the registry's answer for a quorum queue (what the node
    sends as ApplyPolicy) resolved by the queue against its arguments (what the member proposes).
    A classic queue's overflow argument wins (rabbit_amqqueue_process); a quorum queue's does not."""
    r = Registry()
    r.set_policy("/", "p", "^q", {"overflow": "reject-publish", "max-length": 5, "message-ttl": 100})
    r.set_policy("/", "o", "^q", {"max-length": 4, "delivery-limit": -1}, operator=True)
    arguments = {"x-queue-type": "quorum", "x-overflow": "drop-head", "x-max-length": 10, "x-message-ttl": 500,
                 "x-delivery-limit": 7}
    r.apply_command(PutQueue("/", "q", True, False, False, arguments, home="quorum!q", members=("n1@box",)))
    _policy, _operator, told = r.queue_policy(r.queue("/", "q"))
    assert resolve_settings(arguments, told) == QueueSettings(max_length=4, overflow="reject-publish",
                                                              message_ttl_ms=100, delivery_limit=7)


@pytest.mark.parametrize("settings, handler", [
    (QueueSettings(), None),
    (QueueSettings(dead_letter_routing_key="k"), None),  # no exchange: no dead-lettering
    (QueueSettings(dead_letter_exchange="x"), AT_MOST_ONCE),
    (QueueSettings(dead_letter_exchange="x", dead_letter_strategy=AT_LEAST_ONCE), AT_MOST_ONCE),
    (QueueSettings(dead_letter_exchange="x", dead_letter_strategy=AT_LEAST_ONCE, overflow="reject-publish"),
     AT_LEAST_ONCE),
])
def test_dead_letter_handler(settings, handler):
    assert settings.dead_letter_handler == handler


def test_single_active_consumer_is_an_argument_only():
    assert queue_config("q", "/", {"x-single-active-consumer": True}, created_ms=7).single_active
    assert not queue_config("q", "/", {}, created_ms=7, policy={"single-active-consumer": True}).single_active


EVERY_COMMAND = [
    c.Enqueue(1, "ch", 3, "x", "rk", H, b"body"),
    c.Enqueue(1, None, 0, "", "rk", b"", b""),
    c.Checkout(2, "ch", "ctag", 10, True, 5, True),
    c.Credit(3, "ch", "ctag", 100),
    c.Cancel(4, "ch", "ctag"),
    c.Settle(5, "ch", "ctag", (1, 2, 3)),
    c.Return(6, "ch", "ctag", (4,)),
    c.Discard(7, "ch", "ctag", ()),
    c.Requeue(8, "ch", "ctag", 9, 10, "x", "rk", H, b"body"),
    c.ChannelDown(9, "ch"),
    c.Purge(10),
    c.Get(11, "ch", "get-1", False),
    c.UpdateSettings(12, QueueSettings(max_length=3, delivery_limit=None, dead_letter_exchange="d")),
    c.Tick(13),
    c.DeadLetterCheckout(14, "worker", 32),
    c.DeadLetterSettle(15, (0, 1)),
    c.ConsumersDown(16, "ch"),
]


@pytest.mark.parametrize("command", EVERY_COMMAND, ids=lambda x: type(x).__name__)
def test_every_command_round_trips(command):
    assert c.decode(c.encode(command)) == command


def test_published_reads_the_message_of_an_enqueue_or_a_requeue():
    assert c.published(c.encode(EVERY_COMMAND[0])) == ("x", "rk", H, b"body")
    assert c.published(c.encode(EVERY_COMMAND[8])) == ("x", "rk", H, b"body")
    with pytest.raises(ValueError):
        c.published(c.encode(c.Tick(1)))


@pytest.mark.parametrize("data", [b"", b"\xc1", b"\x91\x63", b"\x92\x00\x01", b"\x80"])
def test_decode_refuses_what_is_no_command(data):
    with pytest.raises(ValueError):
        c.decode(data)


@given(st.binary(max_size=40))
def test_decode_raises_only_value_error(data):
    try:
        c.decode(data)
    except ValueError:
        pass


@pytest.mark.parametrize("hdr, queue_ttl, expected", [
    (header(), None, (False, None)),
    (header(priority=4), None, (False, None)),
    (header(priority=5), None, (True, None)),
    (header(priority=255, expiration="20"), 50, (True, 20)),
    (header(expiration="20"), 10, (False, 10)),
    (header(expiration="-1"), None, (False, None)),
    (header(expiration="soon"), 30, (False, 30)),
    (header()[:12], 30, (False, 30)),  # truncated: as if no properties
])
def test_traits_read_priority_class_and_ttl(hdr, queue_ttl, expected):
    assert traits(hdr, queue_ttl) == expected
