"""The run configuration, parsed from PerfTest-like command-line options."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Config:
    uri: str = "amqp://guest:guest@127.0.0.1:5672/%2F"
    producers: int = 1
    consumers: int = 1
    size: int = 1024
    persistent: bool = False
    confirm: int = 0
    prefetch: int = 0
    auto_ack: bool = False
    multi_ack: int = 1
    queue: str = ""
    queue_args: dict = field(default_factory=dict)
    consumer_args: dict = field(default_factory=dict)
    durable: bool = False
    rate: float = 0.0
    rates: tuple[tuple[float, float], ...] = ()  # (msg/s, seconds) phases; the last one lasts
    time_s: float = 10.0
    json_path: str | None = None
    predeclared: bool = False
    exchange: str = ""
    routing_key: str = ""
    mandatory: bool = False
    warmup_s: float = 2.0
    drain_s: float = 5.0
    heartbeat_s: int = 60

    def to_dict(self) -> dict:
        return asdict(self)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.perf",
        description="PerfTest-like load generator for any AMQP 0-9-1 broker. Producers and "
                    "consumers run as separate processes; latency is publish->consume, from a "
                    "CLOCK_REALTIME timestamp (time.time_ns) in the first 8 body bytes.")
    a = p.add_argument
    a("--uri", default=Config.uri, help="amqp://user:pass@host:port/vhost")
    a("--producers", "-x", type=int, default=1)
    a("--consumers", "-y", type=int, default=1)
    a("--size", "-s", type=int, default=1024, help="body bytes (>= 8 to measure latency)")
    a("--persistent", action="store_true", help="delivery_mode=2")
    a("--confirm", "-c", type=int, default=0,
      help="publisher confirms, max outstanding per producer (0 = no confirms)")
    a("--prefetch", "-q", type=int, default=0, help="basic.qos prefetch count per consumer")
    a("--auto-ack", "-a", action="store_true", help="consume with no_ack=true")
    a("--multi-ack", "-A", type=int, default=1, help="ack every N messages with multiple=true")
    a("--queue", "-u", default="", help="queue name (default: server-named, deleted at the end)")
    a("--queue-args", default="{}", help='JSON table, e.g. \'{"x-queue-type":"quorum"}\'')
    a("--consumer-args", default="{}",
      help='JSON table for basic.consume, e.g. \'{"x-stream-offset":"first"}\'')
    a("--durable", action="store_true", help="declare the queue (and exchange) durable")
    a("--rate", "-r", type=float, default=0.0, help="msg/s per producer (0 = flat out)")
    a("--rates", default="",
      help="phases of the rate, e.g. '1000x8,0x10,1000x10': 1,000 msg/s for 8 s, then flat out for "
           "10 s, then 1,000 msg/s until the end (overrides --rate)")
    a("--time", "-z", type=float, default=10.0, help="seconds to run (0 = until Ctrl-C)")
    a("--json", default=None, help="write per-second samples and the summary to this file")
    a("--predeclared", action="store_true", help="declare nothing; exchange and queue exist")
    a("--exchange", "-e", default="", help="exchange to publish to (default: the default exchange)")
    a("--routing-key", "-k", default="", help="routing key (default: the queue name)")
    a("--mandatory", action="store_true", help="publish with mandatory=true (count returns)")
    a("--warmup", type=float, default=2.0, help="seconds left out of the summary")
    a("--drain", type=float, default=5.0,
      help="after producers stop, wait up to this long without progress for consumers to catch up")
    a("--heartbeat", type=int, default=60, help="heartbeat seconds requested (0 = off)")
    return p


def parse_args(argv: list[str] | None = None) -> Config:
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        queue_args = json.loads(ns.queue_args)
    except json.JSONDecodeError as exc:
        parser.error(f"--queue-args is not JSON: {exc}")
    if not isinstance(queue_args, dict):
        parser.error("--queue-args must be a JSON object")
    try:
        consumer_args = json.loads(ns.consumer_args)
    except json.JSONDecodeError as exc:
        parser.error(f"--consumer-args is not JSON: {exc}")
    if not isinstance(consumer_args, dict):
        parser.error("--consumer-args must be a JSON object")
    for name in ("producers", "consumers", "size", "confirm", "prefetch"):
        if getattr(ns, name) < 0:
            parser.error(f"--{name} must be >= 0")
    if ns.multi_ack < 1:
        parser.error("--multi-ack must be >= 1")
    if ns.prefetch and not ns.auto_ack and ns.multi_ack > ns.prefetch:
        parser.error("--multi-ack above --prefetch would stall: the broker stops delivering "
                     "before the consumer acks")
    if ns.predeclared and not ns.queue and ns.consumers:
        parser.error("--predeclared needs --queue for the consumers")
    try:
        rates = tuple((float(r), float(t)) for r, t in (phase.split("x") for phase in ns.rates.split(",") if phase))
    except ValueError:
        parser.error("--rates is RATExSECONDS,RATExSECONDS,...")
    return Config(uri=ns.uri, producers=ns.producers, consumers=ns.consumers, size=ns.size,
                  persistent=ns.persistent, confirm=ns.confirm, prefetch=ns.prefetch,
                  auto_ack=ns.auto_ack, multi_ack=ns.multi_ack, queue=ns.queue,
                  queue_args=queue_args, consumer_args=consumer_args, durable=ns.durable, rate=ns.rate, rates=rates, time_s=ns.time,
                  json_path=ns.json, predeclared=ns.predeclared, exchange=ns.exchange,
                  routing_key=ns.routing_key, mandatory=ns.mandatory, warmup_s=ns.warmup,
                  drain_s=ns.drain, heartbeat_s=ns.heartbeat)
