"""locust load scenarios over AMQP 0-9-1. The broker is locust's --host, an amqp:// URL (vhost in the
path, %2F for "/"):

    locust -f bench/locust/locustfile.py --headless -u 4 -r 4 -t 20s \\
        --host amqp://guest:guest@127.0.0.1:5672/%2F --scenario steady --csv OUT

--scenario picks one of steady, fanout, rpc, small_queues, long_queue, quorum (bench.locust.scenarios
says what each does); fanout and rpc run one publisher/server and need -u 2 or more. Operations show
in locust's statistics as request types publish, consume, rpc, serve, declare and fill
(bench.locust.amqp). Users are given --stop-timeout 10 unless told otherwise, so that a stopping user
finishes its publish or delivery and closes its connection cleanly: the counts then add up
(published = consumed + left in the queue).
"""
from __future__ import annotations

import logging

from locust import events

from bench.locust.scenarios import SCENARIOS
from bench.locust.scenarios import (FanoutConsumer, FanoutPublisher, LongQueueConsumer,  # noqa: F401 - locust
                                    LongQueuePublisher, QuorumMixConsumer, QuorumMixPublisher,  # finds users here
                                    RpcClient, RpcServer, SmallQueuesUser, SteadyConsumer, SteadyPublisher)

stop_timeout_default_s = 10


@events.init_command_line_parser.add_listener
def _options(parser) -> None:
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="steady", include_in_web_ui=True,
                       help="which scenario's users to run (default steady)")
    parser.add_argument("--queue-prefix", default="locust.", help="prefix of every queue and exchange name")
    parser.add_argument("--body-size", type=int, default=1024, help="message body bytes (default 1024)")
    parser.add_argument("--prefetch", type=int, default=100, help="consumers' basic.qos prefetch")
    parser.add_argument("--fanout-queues", type=int, default=10, help="queues bound to the fanout exchange")
    parser.add_argument("--small-queues", type=int, default=50, help="queues per user in small_queues")
    parser.add_argument("--long-queue-backlog", type=int, default=20_000,
                       help="messages in the long queue before long_queue runs")
    parser.add_argument("--rpc-timeout", type=float, default=10.0, help="seconds an RPC call waits for its reply")


@events.init.add_listener
def _pick_scenario(environment, **_kwargs) -> None:
    options = environment.parsed_options
    if options is None:
        return
    logging.getLogger("pika").setLevel(logging.WARNING)  # it logs every connection's steps at INFO
    environment.user_classes[:] = SCENARIOS[options.scenario]
    if not options.stop_timeout:
        environment.stop_timeout = stop_timeout_default_s
