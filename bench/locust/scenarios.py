"""The scenarios: locust User classes that drive a broker through bench.locust.amqp.

Every user declares the topology it needs before it publishes (declares are idempotent), so no
publish is unroutable because another user has not started yet. Queue names start with the
`--queue-prefix` option (default "locust.").

- steady:       publishers (confirms) and consumers (manual acks) on one classic queue.
- fanout:       one publisher into a fanout exchange bound to --fanout-queues queues; the consumers
                share all of them (each publish is consumed once per queue).
- rpc:          one server on a request queue; the other users make calls over direct reply-to.
- small_queues: each user declares --small-queues exclusive queues (reported as `declare`), then
                publishes to them in turn and consumes them all.
- long_queue:   the first user tops a queue up to --long-queue-backlog messages; publishers and
                consumers then run on it (consume latency = time spent behind the backlog).
- quorum:       persistent messages to a quorum queue (x-queue-type=quorum) and a durable classic
                queue in turn; events are named `quorum` and `classic`.
"""
from __future__ import annotations

import itertools
from typing import Any

from gevent.lock import Semaphore
from locust import User, constant, task

from bench.locust.amqp import AmqpClient

pump_s = 0.2  # a consumer's task: let deliveries in for this long, then give locust a turn


class AmqpUser(User):
    abstract = True
    wait_time = constant(0)

    def on_start(self) -> None:
        self.client = AmqpClient(self.host, self.environment.events.request.fire)
        self.setup()

    def on_stop(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - a user stopped mid-operation leaves its connection as it is
                pass

    def setup(self) -> None:
        """Declare what the user needs; runs after the connection opened."""

    def option(self, name: str) -> Any:
        return getattr(self.environment.parsed_options, name)

    def queue(self, suffix: str) -> str:
        return f"{self.option('queue_prefix')}{suffix}"

    @property
    def body(self) -> bytes:
        return b"x" * self.option("body_size")


class Pumping(AmqpUser):
    """A consumer: its task lets deliveries in (each reported as `consume`)."""
    abstract = True

    @task
    def consume(self) -> None:
        self.client.pump(pump_s)


# ---------------------------------------------------------------- steady
class SteadyPublisher(AmqpUser):
    def setup(self) -> None:
        self.client.declare(self.queue("steady"))
        self.client.confirm()

    @task
    def publish(self) -> None:
        self.client.publish("steady", "", self.queue("steady"), self.body)


class SteadyConsumer(Pumping):
    def setup(self) -> None:
        self.client.declare(self.queue("steady"))
        self.client.consume(self.queue("steady"), "steady", self.option("prefetch"))


# ---------------------------------------------------------------- fanout
class FanoutUser(AmqpUser):
    abstract = True

    def setup(self) -> None:
        exchange = self.queue("fanout")
        self.client.channel.exchange_declare(exchange, "fanout")
        self.queues = [self.queue(f"fanout.{i}") for i in range(self.option("fanout_queues"))]
        for q in self.queues:
            self.client.declare(q)
            self.client.channel.queue_bind(q, exchange)


class FanoutPublisher(FanoutUser):
    fixed_count = 1

    def setup(self) -> None:
        super().setup()
        self.client.confirm()

    @task
    def publish(self) -> None:
        self.client.publish("fanout", self.queue("fanout"), "", self.body)


class FanoutConsumer(FanoutUser, Pumping):
    def setup(self) -> None:
        super().setup()
        for q in self.queues:
            self.client.consume(q, "fanout", self.option("prefetch"))


# ---------------------------------------------------------------- rpc
class RpcServer(AmqpUser):
    fixed_count = 1

    def setup(self) -> None:
        self.client.declare(self.queue("rpc"))
        self.client.serve(self.queue("rpc"), "rpc", self.option("prefetch"))

    @task
    def serve(self) -> None:
        # one task for as long as clients run: a stopping server finishes its task first, so the
        # calls of clients that are stopping too still get their replies
        self.client.pump(pump_s)
        while RpcClient.running:
            self.client.pump(pump_s)


class RpcClient(AmqpUser):
    running = 0

    def setup(self) -> None:
        RpcClient.running += 1
        self.counted = True
        self.client.declare(self.queue("rpc"))
        self.client.rpc_ready()

    def on_stop(self) -> None:
        if getattr(self, "counted", False):
            RpcClient.running -= 1
            self.counted = False
        super().on_stop()

    @task
    def call(self) -> None:
        self.client.rpc("rpc", self.queue("rpc"), self.body, self.option("rpc_timeout"))


# ---------------------------------------------------------------- many small queues
class SmallQueuesUser(AmqpUser):
    _ids = itertools.count()

    def setup(self) -> None:
        me = next(SmallQueuesUser._ids)
        self.queues = [self.queue(f"small.{me}.{i}") for i in range(self.option("small_queues"))]
        for q in self.queues:
            self.client.declare(q, "small_queues", exclusive=True)
        self.client.confirm()
        for q in self.queues:
            self.client.consume(q, "small_queues", self.option("prefetch"))
        self.turn = itertools.cycle(self.queues)

    @task
    def publish_and_consume(self) -> None:
        self.client.publish("small_queues", "", next(self.turn), self.body)
        self.client.pump(0)


# ---------------------------------------------------------------- a long queue
class LongQueueUser(AmqpUser):
    abstract = True
    _filling = Semaphore()
    _filled = False

    def setup(self) -> None:
        with LongQueueUser._filling:  # the first user tops the queue up; the others wait for it
            depth = self.client.channel.queue_declare(self.queue("long")).method.message_count
            missing = self.option("long_queue_backlog") - depth
            if missing > 0 and not LongQueueUser._filled:
                self.client.fill("long_queue", self.queue("long"), self.body, missing)
            LongQueueUser._filled = True


class LongQueuePublisher(LongQueueUser):
    def setup(self) -> None:
        super().setup()
        self.client.confirm()

    @task
    def publish(self) -> None:
        self.client.publish("long_queue", "", self.queue("long"), self.body)


class LongQueueConsumer(LongQueueUser, Pumping):
    def setup(self) -> None:
        super().setup()
        self.client.consume(self.queue("long"), "long_queue", self.option("prefetch"))


# ---------------------------------------------------------------- quorum and classic, durable
class QuorumMixUser(AmqpUser):
    abstract = True

    def setup(self) -> None:
        self.client.declare(self.queue("quorum"), durable=True, arguments={"x-queue-type": "quorum"})
        self.client.declare(self.queue("classic"), durable=True)


class QuorumMixPublisher(QuorumMixUser):
    def setup(self) -> None:
        super().setup()
        self.client.confirm()
        self.turn = itertools.cycle(["quorum", "classic"])

    @task
    def publish(self) -> None:
        kind = next(self.turn)
        self.client.publish(kind, "", self.queue(kind), self.body, persistent=True)


class QuorumMixConsumer(QuorumMixUser, Pumping):
    def setup(self) -> None:
        super().setup()
        for kind in ("quorum", "classic"):
            self.client.consume(self.queue(kind), kind, self.option("prefetch"))


SCENARIOS: dict[str, list[type[User]]] = {
    "steady": [SteadyPublisher, SteadyConsumer],
    "fanout": [FanoutPublisher, FanoutConsumer],
    "rpc": [RpcServer, RpcClient],
    "small_queues": [SmallQueuesUser],
    "long_queue": [LongQueuePublisher, LongQueueConsumer],
    "quorum": [QuorumMixPublisher, QuorumMixConsumer],
}
