"""Every field type RabbitMQ 3.10 accepts, side by side: the same client code against warren and
against RabbitMQ (the oracle, scripts/rabbitmq_oracle), compared answer for answer.

For each client (warren's raw codec sending every type tag and malformed tables as octets,
py-amqp, pika, aio-pika/pamqp, amqplib for Node and amqp091-go, skipped with the reason when
node/npm or Go with Debian's amqp091-go are missing) and
each case: a queue declared with {"k": value} (any type is taken and kept), one with
{"x-message-ttl": value} (its type is checked: RabbitMQ's texts name the type), and a message
with the headers {"k": value} dead-lettered once, which makes the broker re-encode its headers
with x-death: read back as octets (typed values) and by the client itself.

One difference is expected and kept (README, "Differences"): where RabbitMQ's reader crashes on
a table it cannot parse (an unknown type tag, a value cut short inside a table) and drops the
socket, warren sends `501 FRAME_ERROR - cannot decode <<...>>` first; both close the connection.
"""
from __future__ import annotations

import pytest

from tests.integration import field_clients as fc
from tests.integration.oracle import start_oracle

pytestmark = pytest.mark.integration


def same_answer(warren: list, rabbit: list) -> bool:
    """Equal, or the one kept difference: RabbitMQ dropped the socket where warren closed with 501."""
    if warren == rabbit:
        return True
    return (rabbit == ["dropped"] and warren[:2] == ["connection", 501]
            and warren[2].startswith("FRAME_ERROR - cannot decode <<"))


@pytest.fixture(scope="module")
def brokers(node, tmp_path_factory):
    oracle = start_oracle(tmp_path_factory.mktemp("oracle"))
    yield {"warren": node, "rabbitmq": oracle}
    oracle.stop()


PYTHON_CLIENTS = {"amqp": fc.run_pyamqp, "pika": fc.run_pika, "aiopika": fc.run_aiopika}


def _compare(answers: dict, names: list[str]) -> list[str]:
    return [f"{name}: warren {w} / rabbitmq {r}"
            for name in names for w, r in zip(answers["warren"][name], answers["rabbitmq"][name])
            if not same_answer(w, r)]


def test_every_type_tag_and_malformed_table_as_octets(brokers):
    answers, dead = {}, {}
    for broker, target in brokers.items():
        fc.prepare(target.url, "raw")
        answers[broker] = fc.run_raw(target.port, fc.RAW_VALUES)
        published = sum(a[2] == ["ok"] for a in answers[broker].values())
        dead[broker] = fc.raw_headers(target.port, "raw", published)
    assert _compare(answers, list(fc.RAW_VALUES)) == []
    # every one of RabbitMQ's 18 tags (L twice) was taken; the others closed the connection
    taken = [name for name, a in answers["rabbitmq"].items() if a[0] == ["ok"]]
    assert taken == list(fc.RAW_VALUES)[:list(fc.RAW_VALUES).index("U")]
    assert dead["warren"] == dead["rabbitmq"] and len(dead["warren"]) == len(taken)


@pytest.mark.parametrize("client", sorted(PYTHON_CLIENTS))
def test_python_clients_get_the_same_answers(brokers, client):
    answers, own, dead = {}, {}, {}
    cases = fc.python_cases()
    for broker, target in brokers.items():
        fc.prepare(target.url, client)
        answers[broker], own[broker] = PYTHON_CLIENTS[client](target.url, cases)
        dead[broker] = fc.raw_headers(target.port, client, fc.published(answers[broker]))
    assert _compare(answers, list(cases)) == []
    assert len(dead["warren"]) == fc.published(answers["warren"]) > 10
    assert dead["warren"] == dead["rabbitmq"]  # the re-encoded octets, as typed values
    assert own["warren"] == own["rabbitmq"]  # and what the client makes of them



@pytest.mark.parametrize("client", ["amqplib", "amqp091"])
def test_node_and_go_clients_get_the_same_answers(brokers, client, tmp_path):
    program = fc.node_client() if client == "amqplib" else fc.go_client(tmp_path)
    if isinstance(program, str):
        pytest.skip(program)
    command, env = program
    answers, own, dead = {}, {}, {}
    for broker, target in brokers.items():
        fc.prepare(target.url, client)
        answers[broker], own[broker] = fc.run_external(command, env, target.url)
        dead[broker] = fc.raw_headers(target.port, client, len(answers[broker]))
    assert _compare(answers, sorted(answers["rabbitmq"])) == []
    assert len(dead["warren"]) == len(answers["warren"]) > 10
    assert dead["warren"] == dead["rabbitmq"]
    assert own["warren"] == own["rabbitmq"]
