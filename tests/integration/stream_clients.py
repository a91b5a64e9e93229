"""What the stream tests do with pika: read a stream from "first", acking as they go."""
from __future__ import annotations

import pika

from tests.waiting import until

STREAM = {"x-queue-type": "stream"}


def read_first(url: str, name: str, n: int, prefetch: int = 100) -> list[tuple[int, bytes]]:
    """The first `n` messages of the stream `name` read from "first" through `url`, with their
    x-stream-offset headers."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=prefetch)
    got: list[tuple[int, bytes]] = []

    def on(c, method, props, body):
        got.append((props.headers["x-stream-offset"], body))
        c.basic_ack(method.delivery_tag)
    ch.basic_consume(name, on, arguments={"x-stream-offset": "first"})
    until(lambda: conn.process_data_events(0.02) or len(got) >= n, f"{n} messages from first")
    conn.close()
    return got
