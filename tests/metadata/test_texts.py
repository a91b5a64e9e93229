"""Every error the registry returns, with the text RabbitMQ 3.10 sent for the same operation
(copied from the oracle's answers to pika)."""
import random
from dataclasses import replace

import pytest

from metadata import Registry
from wire.errors import AmqpError

VH = "/"
A, B = "conn-a", "conn-b"
LOCKED = ("RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'exq' in vhost '/'. It could be "
          "originally declared on another connection or the exclusive property value does not match that of "
          "the original declaration.")


@pytest.fixture
def reg():
    r = Registry(random.Random(7))
    r.declare_exchange(VH, "x", "direct")
    r.declare_exchange(VH, "x2", "direct", arguments={"alternate-exchange": "ae"})
    r.declare_exchange(VH, "hx", "headers")
    r.declare_queue(VH, "q")
    r.declare_queue(VH, "ql", arguments={"x-message-ttl": 5})
    r.declare_queue(VH, "exq", exclusive=True, owner=A)
    r.bind_queue(VH, "exq", "x", "k2", None, A)
    r.bind_queue(VH, "q", "x", "k", None, None)
    return r


def err(result):
    value = result[0] if isinstance(result, tuple) else result
    assert isinstance(value, AmqpError), value
    if isinstance(result, tuple):
        assert result[1] == []  # a refused command changes nothing
    return value


CASES = [
    # exchange.declare equivalence
    (lambda r: r.declare_exchange(VH, "x", "direct", durable=True), 406, "PRECONDITION_FAILED - inequivalent arg 'durable' for exchange 'x' in vhost '/': received 'true' but current is 'false'"),
    (lambda r: r.declare_exchange(VH, "x", "fanout"), 406, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but current is 'direct'"),
    (lambda r: r.declare_exchange(VH, "x", "direct", auto_delete=True), 406, "PRECONDITION_FAILED - inequivalent arg 'auto_delete' for exchange 'x' in vhost '/': received 'true' but current is 'false'"),
    (lambda r: r.declare_exchange(VH, "x", "direct", internal=True), 406, "PRECONDITION_FAILED - inequivalent arg 'internal' for exchange 'x' in vhost '/': received 'true' but current is 'false'"),
    (lambda r: r.declare_exchange(VH, "x", "direct", arguments={"alternate-exchange": "ae"}), 406, "PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange 'x' in vhost '/': received the value 'ae' of type 'longstr' but current is none"),
    (lambda r: r.declare_exchange(VH, "x2", "direct"), 406, "PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange 'x2' in vhost '/': received none but current is the value 'ae' of type 'longstr'"),
    (lambda r: r.declare_exchange(VH, "x2", "direct", arguments={"alternate-exchange": "ae2"}), 406, "PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange 'x2' in vhost '/': received 'ae2' but current is 'ae'"),
    (lambda r: r.declare_exchange(VH, "amq.direct", "direct"), 406, "PRECONDITION_FAILED - inequivalent arg 'durable' for exchange 'amq.direct' in vhost '/': received 'false' but current is 'true'"),
    (lambda r: r.declare_exchange(VH, "nope", "direct", passive=True), 404, "NOT_FOUND - no exchange 'nope' in vhost '/'"),
    (lambda r: r.declare_exchange(VH, "amq.x", "direct", passive=True), 404, "NOT_FOUND - no exchange 'amq.x' in vhost '/'"),
    (lambda r: r.declare_exchange(VH, "amq.x", "direct"), 403, "ACCESS_REFUSED - exchange name 'amq.x' contains reserved prefix 'amq.*'"),
    (lambda r: r.declare_exchange(VH, "", "direct", durable=True), 403, "ACCESS_REFUSED - operation not permitted on the default exchange"),
    (lambda r: r.declare_exchange(VH, "", "direct", passive=True), 403, "ACCESS_REFUSED - operation not permitted on the default exchange"),
    (lambda r: r.declare_exchange(VH, "y", "bogus"), 503, "COMMAND_INVALID - unknown exchange type 'bogus'"),
    (lambda r: r.declare_exchange(VH, "", "bogus"), 503, "COMMAND_INVALID - unknown exchange type 'bogus'"),
    (lambda r: r.declare_exchange(VH, "y", "x-delayed-message"), 503, "COMMAND_INVALID - unknown exchange type 'x-delayed-message'"),
    (lambda r: r.declare_exchange(VH, "aeint", "direct", arguments={"alternate-exchange": 1}), 406, "PRECONDITION_FAILED - invalid type 'signedint' for arg 'alternate-exchange' in exchange 'aeint' in vhost '/'"),
    # exchange.delete
    (lambda r: r.delete_exchange(VH, "amq.direct"), 403, "ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' not allowed"),
    (lambda r: r.delete_exchange(VH, "amq.nope"), 403, "ACCESS_REFUSED - deletion of system exchange 'amq.nope' in vhost '/' not allowed"),
    (lambda r: r.delete_exchange(VH, ""), 403, "ACCESS_REFUSED - operation not permitted on the default exchange"),
    (lambda r: r.delete_exchange(VH, "x", if_unused=True), 406, "PRECONDITION_FAILED - exchange 'x' in vhost '/' in use"),
    # bindings
    (lambda r: r.bind_queue(VH, "nq", "x", "k", None, None), 404, "NOT_FOUND - no queue 'nq' in vhost '/'"),
    (lambda r: r.bind_queue(VH, "q", "nx", "k", None, None), 404, "NOT_FOUND - no exchange 'nx' in vhost '/'"),
    (lambda r: r.bind_queue(VH, "nq", "nx", "k", None, None), 404, "NOT_FOUND - no exchange 'nx' in vhost '/'"),
    (lambda r: r.bind_queue(VH, "q", "", "q", None, None), 403, "ACCESS_REFUSED - operation not permitted on the default exchange"),
    (lambda r: r.unbind_queue(VH, "q", "", "q", None, None), 403, "ACCESS_REFUSED - operation not permitted on the default exchange"),
    (lambda r: r.bind_exchange(VH, "x", "nx", "k", None), 404, "NOT_FOUND - no exchange 'nx' in vhost '/'"),
    (lambda r: r.bind_exchange(VH, "nx", "x", "k", None), 404, "NOT_FOUND - no exchange 'nx' in vhost '/'"),
    (lambda r: r.bind_exchange(VH, "x", "", "k", None), 403, "ACCESS_REFUSED - operation not permitted on the default exchange"),
    (lambda r: r.bind_exchange(VH, "", "x", "k", None), 403, "ACCESS_REFUSED - operation not permitted on the default exchange"),
    (lambda r: r.bind_queue(VH, "q", "hx", "", {"x-match": "bogus"}, None), 406, 'PRECONDITION_FAILED - Invalid x-match field value <<"bogus">>; expected all, any, all-with-x, or any-with-x'),
    (lambda r: r.bind_queue(VH, "q", "hx", "", {"x-match": 1}, None), 406, "PRECONDITION_FAILED - Invalid x-match field type signedint (value 1); expected longstr"),
    (lambda r: r.bind_queue(VH, "nq", "hx", "", {"x-match": "bogus"}, None), 404, "NOT_FOUND - no queue 'nq' in vhost '/'"),
    # queue.declare
    (lambda r: r.declare_queue(VH, "amq.q"), 403, "ACCESS_REFUSED - queue name 'amq.q' contains reserved prefix 'amq.*'"),
    (lambda r: r.declare_queue(VH, "amq.gen-abc"), 403, "ACCESS_REFUSED - queue name 'amq.gen-abc' contains reserved prefix 'amq.*'"),
    (lambda r: r.declare_queue(VH, "amq.q", passive=True), 404, "NOT_FOUND - no queue 'amq.q' in vhost '/'"),
    (lambda r: r.declare_queue(VH, "nq", passive=True), 404, "NOT_FOUND - no queue 'nq' in vhost '/'"),
    (lambda r: r.declare_queue(VH, "q", durable=True), 406, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q' in vhost '/': received 'true' but current is 'false'"),
    (lambda r: r.declare_queue(VH, "q", auto_delete=True), 406, "PRECONDITION_FAILED - inequivalent arg 'auto_delete' for queue 'q' in vhost '/': received 'true' but current is 'false'"),
    (lambda r: r.declare_queue(VH, "q", arguments={"x-message-ttl": 100}), 406, "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received the value '100' of type 'signedint' but current is none"),
    (lambda r: r.declare_queue(VH, "ql", arguments={"x-message-ttl": 2**33}), 406, "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'ql' in vhost '/': received '8589934592' but current is '5'"),
    (lambda r: r.declare_queue(VH, "ql", arguments={"x-message-ttl": "5"}), 406, "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'ql' in vhost '/': received '5' but current is '5'"),
    (lambda r: r.declare_queue(VH, "ql"), 406, "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'ql' in vhost '/': received none but current is the value '5' of type 'signedint'"),
    (lambda r: r.declare_queue(VH, "q", durable=True, arguments={"x-queue-type": "quorum"}), 406, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q' in vhost '/': received 'true' but current is 'false'"),
    (lambda r: r.declare_queue(VH, "q", arguments={"x-queue-type": "quorum"}), 406, "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received the value 'quorum' of type 'longstr' but current is none"),
    # exclusive queues
    (lambda r: r.declare_queue(VH, "q", exclusive=True, owner=A), 405, LOCKED.replace("'exq'", "'q'")),
    (lambda r: r.declare_queue(VH, "exq", exclusive=True, owner=B), 405, LOCKED),
    (lambda r: r.declare_queue(VH, "exq", owner=A), 405, LOCKED),
    (lambda r: r.declare_queue(VH, "exq", passive=True, owner=B), 405, LOCKED),
    (lambda r: r.bind_queue(VH, "exq", "x", "k", None, B), 405, LOCKED),
    (lambda r: r.unbind_queue(VH, "exq", "x", "k2", None, B), 405, LOCKED),
    (lambda r: r.check_queue_access(VH, "exq", B), 405, LOCKED),
    (lambda r: r.delete_queue(VH, "exq", B), 405, LOCKED),
    (lambda r: r.bind_queue(VH, "exq", "nox", "k", None, B), 404, "NOT_FOUND - no exchange 'nox' in vhost '/'"),
    (lambda r: r.check_queue_access(VH, "nosuchq", A), 404, "NOT_FOUND - no queue 'nosuchq' in vhost '/'"),
    # publishing
    (lambda r: r.exchange_for_publish(VH, "nx"), 404, "NOT_FOUND - no exchange 'nx' in vhost '/'"),
    (lambda r: r.exchange_for_publish(VH, "amq.rabbitmq.trace"), 403, "ACCESS_REFUSED - cannot publish to internal exchange 'amq.rabbitmq.trace' in vhost '/'"),
    (lambda r: (r.declare_exchange(VH, "ix", "direct", internal=True), r.exchange_for_publish(VH, "ix"))[1], 403, "ACCESS_REFUSED - cannot publish to internal exchange 'ix' in vhost '/'"),
]


@pytest.mark.parametrize("op, code, text", CASES, ids=[t[2][:60] for t in CASES])
def test_error_text_matches_rabbitmq(reg, op, code, text):
    e = err(op(reg))
    assert (e.code, e.text) == (code, text)


def test_unknown_exchange_type_closes_the_connection(reg):
    assert err(reg.declare_exchange(VH, "y", "bogus")).hard


@pytest.mark.parametrize("op", [
    lambda r: r.delete_exchange(VH, "nope"),
    lambda r: r.unbind_queue(VH, "q", "x", "zzz", None, None),
    lambda r: r.unbind_queue(VH, "nq", "x", "zzz", None, None),
    lambda r: r.unbind_queue(VH, "q", "nx", "zzz", None, None),
    lambda r: r.unbind_exchange(VH, "x", "amq.direct", "k", None),
    lambda r: r.unbind_exchange(VH, "x", "nx", "k", None),
    lambda r: r.unbind_queue(VH, "exq", "x", "k9", None, B),
    lambda r: r.delete_queue(VH, "nosuchq", None),
])
def test_rabbitmq_answers_ok_with_no_change(reg, op):
    assert op(reg) == (None, [])


def test_redeclare_equivalent_is_ok(reg):
    assert reg.declare_exchange(VH, "amq.direct", "direct", durable=True) == (None, [])
    assert reg.declare_exchange(VH, "amq.direct", "bogus", passive=True) == (None, [])
    assert reg.declare_exchange(VH, "x", "direct", arguments={"foo": "bar"}) == (None, [])
    q, changes = reg.declare_queue(VH, "q", arguments={"foo": 100, "x-queue-type": "classic"})
    assert (q.name, q.created, changes) == ("q", False, [])


def test_cr_lf_are_stripped_from_names(reg):
    q, _ = reg.declare_queue(VH, "a\r\nb")
    assert q.name == "ab"
    assert reg.declare_exchange(VH, "e\nf", "direct")[0] is None
    assert reg.declare_exchange(VH, "ef", "direct", passive=True) == (None, [])


def test_server_named_queue(reg):
    q, changes = reg.declare_queue(VH, "")
    assert q.name.startswith("amq.gen-") and len(q.name) == 30 and q.created
    assert err(reg.declare_queue(VH, q.name)).text == f"ACCESS_REFUSED - queue name '{q.name}' contains reserved prefix 'amq.*'"
    assert reg.declare_queue(VH, q.name, passive=True)[0] == replace(q, created=False)
