"""Typed validation of queue arguments on creation: RabbitMQ 3.10's texts (from the oracle)."""
import pytest

from metadata import Registry

P = "PRECONDITION_FAILED - "


def inv(key, reason, name="qa"):
    return f"{P}invalid arg '{key}' for queue '{name}' in vhost '/': {reason}"


CASES = [
    ({"x-message-ttl": -1}, {}, inv("x-message-ttl", "{value_negative,-1}")),
    ({"x-message-ttl": "10"}, {}, inv("x-message-ttl", '"expected integer, got longstr"')),
    ({"x-message-ttl": 2**40}, {}, inv("x-message-ttl", "{value_too_large,1099511627776}")),
    ({"x-message-ttl": True}, {}, inv("x-message-ttl", '"expected integer, got bool"')),
    ({"x-expires": 0}, {}, inv("x-expires", "{value_zero,0}")),
    ({"x-expires": -1}, {}, inv("x-expires", "{value_negative,-1}")),
    ({"x-expires": "10"}, {}, inv("x-expires", '"expected integer, got longstr"')),
    ({"x-expires": 2**40}, {}, inv("x-expires", "{value_too_large,1099511627776}")),
    ({"x-max-length": -1}, {}, inv("x-max-length", "{value_negative,-1}")),
    ({"x-max-length": "a"}, {}, inv("x-max-length", '"expected integer, got longstr"')),
    ({"x-max-length-bytes": -1}, {}, inv("x-max-length-bytes", "{value_negative,-1}")),
    ({"x-max-length-bytes": "a"}, {}, inv("x-max-length-bytes", '"expected integer, got longstr"')),
    ({"x-max-priority": -1}, {}, inv("x-max-priority", "{value_negative,-1}")),
    ({"x-max-priority": 256}, {}, inv("x-max-priority", "{max_value_exceeded,256}")),
    ({"x-max-priority": "a"}, {}, inv("x-max-priority", '"expected integer, got longstr"')),
    ({"x-overflow": "bogus"}, {}, inv("x-overflow", "invalid_overflow")),
    ({"x-overflow": 1}, {}, inv("x-overflow", "{unacceptable_type,signedint}")),
    ({"x-dead-letter-exchange": 1}, {}, f"{P}invalid type 'signedint' for arg 'x-dead-letter-exchange' in queue 'qa' in vhost '/'"),
    ({"x-dead-letter-routing-key": "rk"}, {}, inv("x-dead-letter-routing-key", "routing_key_but_no_dlx_defined")),
    ({"x-dead-letter-routing-key": 1}, {}, inv("x-dead-letter-routing-key", "{unacceptable_type,signedint}")),
    ({"x-dead-letter-exchange": "a", "x-dead-letter-routing-key": 1}, {}, inv("x-dead-letter-routing-key", "{unacceptable_type,signedint}")),
    ({"x-queue-mode": "bogus"}, {}, inv("x-queue-mode", "\"unsupported queue mode 'bogus'\"")),
    ({"x-queue-mode": 1}, {}, inv("x-queue-mode", "{unacceptable_type,signedint}")),
    ({"x-queue-type": "bogus"}, {}, inv("x-queue-type", "\"unsupported queue type 'bogus'\"")),
    ({"x-queue-type": 1}, {}, inv("x-queue-type", "{unacceptable_type,signedint}")),
    ({"x-single-active-consumer": 1}, {}, inv("x-single-active-consumer", "{unacceptable_type,signedint}")),
    ({"x-single-active-consumer": "true"}, {}, inv("x-single-active-consumer", "{unacceptable_type,longstr}")),
    ({"x-queue-version": 3}, {}, inv("x-queue-version", "\"unsupported queue version '3'\"")),
    ({"x-queue-version": "a"}, {}, inv("x-queue-version", '"expected integer, got longstr"')),
    ({"x-max-in-memory-length": -1}, {}, f"{P}invalid arg 'x-max-in-memory-length' for queue 'qa' in vhost '/' of queue type rabbit_classic_queue"),
    ({"x-max-age": "1D"}, {}, f"{P}invalid arg 'x-max-age' for queue 'qa' in vhost '/' of queue type rabbit_classic_queue"),
    ({"x-max-age": "1D", "x-max-length": -1}, {}, inv("x-max-length", "{value_negative,-1}")),
    ({"x-queue-type": "quorum"}, {}, f"{P}invalid property 'non-durable' for queue 'qa' in vhost '/'"),
    ({"x-queue-type": "stream"}, {}, f"{P}invalid property 'non-durable' for queue 'qa' in vhost '/'"),
    ({"x-queue-type": "quorum"}, {"durable": True, "exclusive": True}, f"{P}invalid property 'exclusive-owner' for queue 'qa' in vhost '/'"),
    ({"x-queue-type": "quorum"}, {"durable": True, "auto_delete": True, "exclusive": True}, f"{P}invalid property 'auto-delete' for queue 'qa' in vhost '/'"),
    ({"x-queue-type": "quorum"}, {"exclusive": True}, f"{P}invalid property 'exclusive-owner' for queue 'qa' in vhost '/'"),
    ({"x-queue-type": "quorum", "x-max-priority": -1}, {}, f"{P}invalid arg 'x-max-priority' for queue 'qa' in vhost '/' of queue type rabbit_quorum_queue"),
    ({"x-queue-type": "quorum", "x-queue-mode": "lazy"}, {"durable": True}, f"{P}invalid arg 'x-queue-mode' for queue 'qa' in vhost '/' of queue type rabbit_quorum_queue"),
    ({"x-queue-type": "quorum", "x-expires": -1, "x-max-priority": 5}, {"durable": True}, inv("x-expires", "{value_negative,-1}")),
    ({"x-queue-type": "quorum", "x-max-length": -1}, {"durable": True}, inv("x-max-length", "{value_negative,-1}")),
    ({"x-queue-type": "stream", "x-max-priority": 1}, {"durable": True}, f"{P}invalid arg 'x-max-priority' for queue 'qa' in vhost '/' of queue type rabbit_stream_queue"),
    # first failure in RabbitMQ's declare_args order, whatever the table order
    ({"x-queue-version": "a", "x-max-length": -1, "x-expires": -1, "x-message-ttl": -1}, {}, inv("x-expires", "{value_negative,-1}")),
    ({"x-single-active-consumer": 1, "x-queue-version": "a", "x-queue-mode": 1}, {}, inv("x-queue-mode", "{unacceptable_type,signedint}")),
    ({"x-single-active-consumer": 1, "x-queue-version": "a"}, {}, inv("x-queue-version", '"expected integer, got longstr"')),
    ({"x-max-length": -1, "x-message-ttl": -1}, {}, inv("x-message-ttl", "{value_negative,-1}")),
]


@pytest.mark.parametrize("args, flags, text", CASES, ids=[str(c[0]) for c in CASES])
def test_invalid_arguments(args, flags, text):
    error, changes = Registry().declare_queue("/", "qa", arguments=args, owner="c", **flags)
    assert (error.text, changes) == (text, [])


@pytest.mark.parametrize("args, flags", [
    ({"x-message-ttl": 0}, {}), ({"x-expires": 1}, {}), ({"x-max-length": 0}, {}), ({"x-max-length": 2**40}, {}),
    ({"x-max-priority": 0}, {}), ({"x-max-priority": 255}, {}),
    ({"x-overflow": "drop-head"}, {}), ({"x-overflow": "reject-publish"}, {}), ({"x-overflow": "reject-publish-dlx"}, {}),
    ({"x-dead-letter-exchange": ""}, {}), ({"x-queue-mode": "lazy"}, {}), ({"x-queue-mode": "default"}, {}),
    ({"x-queue-type": "classic"}, {}), ({"x-single-active-consumer": True}, {}), ({"x-queue-version": 2}, {}),
    ({"x-foo": "anything", "bar": 1}, {}),
    ({"x-queue-type": "quorum"}, {"durable": True}),
    ({"x-queue-type": "quorum", "x-overflow": "reject-publish-dlx"}, {"durable": True}),
])
def test_valid_arguments(args, flags):
    q, changes = Registry().declare_queue("/", "qa", arguments=args, **flags)
    assert q.created and q.arguments == args and len(changes) == 1


def test_streams_are_created():
    q, changes = Registry().declare_queue("/", "qa", durable=True,
                                          arguments={"x-queue-type": "stream", "x-max-age": "7D"})
    assert q.created and len(changes) == 1


@pytest.mark.parametrize("age, text", [
    ("7X", inv("x-max-age", "invalid_max_age")), ("0s", inv("x-max-age", "invalid_max_age")),
    (7, inv("x-max-age", "{unacceptable_type,signedint}")), ("abc", "INTERNAL_ERROR"), ("-1s", "INTERNAL_ERROR"),
])
def test_stream_max_age_refusals(age, text):
    """RabbitMQ's check_max_age crashes without digits (541, on the connection): so does warren."""
    error, _ = Registry().declare_queue("/", "qa", durable=True, arguments={"x-queue-type": "stream", "x-max-age": age})
    assert error.text == text


@pytest.mark.parametrize("key, v1, v2, shown", [
    ("x-expires", 10, 20, ("'20'", "'10'")), ("x-max-length", 1, 2, ("'2'", "'1'")),
    ("x-max-length-bytes", 1, 2, ("'2'", "'1'")), ("x-max-priority", 1, 2, ("'2'", "'1'")),
    ("x-overflow", "drop-head", "reject-publish", ("'reject-publish'", "'drop-head'")),
    ("x-dead-letter-exchange", "a", "b", ("'b'", "'a'")), ("x-queue-mode", "lazy", "default", ("'default'", "'lazy'")),
    ("x-queue-version", 1, 2, ("'2'", "'1'")), ("x-single-active-consumer", True, False, ("'false'", "'true'")),
    ("x-queue-master-locator", "min-masters", "random", ("'random'", "'min-masters'")),
])
def test_queue_argument_equivalence(key, v1, v2, shown):
    r = Registry()
    r.declare_queue("/", "eq", arguments={key: v1})
    error, _ = r.declare_queue("/", "eq", arguments={key: v2})
    assert error.text == f"{P}inequivalent arg '{key}' for queue 'eq' in vhost '/': received {shown[0]} but current is {shown[1]}"


def test_unknown_arguments_are_not_compared():
    r = Registry()
    r.declare_queue("/", "eq", arguments={"x-foo": "a"})
    assert r.declare_queue("/", "eq", arguments={"x-foo": "b"})[0].name == "eq"


def test_the_texts_name_the_type_the_value_arrived_as():
    from metadata.arguments import validate_new_queue
    from wire.codec import ByteArray, Timestamp
    from wire.field_types import Float32, Int64

    def reason(value):
        error = validate_new_queue("q", "/", {"x-message-ttl": value}, durable=True, exclusive=False, auto_delete=False)
        return None if error is None else error.detail.rsplit(": ", 1)[1]
    assert reason(Timestamp(5)) == '"expected integer, got timestamp"'
    assert reason(Float32(1.5)) == '"expected integer, got float"'
    assert reason(ByteArray(b"1")) == '"expected integer, got binary"'
    assert reason(Int64(-1)) == "{value_negative,-1}"
    assert reason(2**27 * 1000) is None  # Celery's celery_delayed_27: RabbitMQ 3.10 takes it
    assert reason(315_360_000_001) == "{value_too_large,315360000001}"
