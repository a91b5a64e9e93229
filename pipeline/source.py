"""The `amqp` data source: a queue as a stream, and DataFrames (batch or streaming) into an exchange.

Stream reader. Spark 4 runs a Python stream reader in one long-lived process on the driver for the
whole query; that is where the AMQP consumer lives (pipeline.consumer), started on first use. Its
deliveries go into the ledger (pipeline.ledger), and a planned micro-batch carries its rows to the
executors inside its input partitions. Acknowledgement follows Spark's commit:
- MicroBatchExecution runs one batch at a time: it plans batch N+1 (latestOffset(start=end of N))
  only after batch N ran and its commit-log entry was written, so `latestOffset(start)` settles
  every delivery up to `start`, and so does `commit(end)` (which Spark calls later, when it writes
  the offsets of the next batch that has data). Async progress tracking
  (asyncProgressTrackingEnabled) breaks the first rule and must stay off with this source.
- Spark 4 ends the reader's process when a query stops or fails, without calling stop(): so every
  ack is written to the socket before latestOffset/commit return, and the broker requeues whatever
  was not acked when the connection drops; a restarted query reads it again, with `redelivered`
  set (at-least-once).
Trigger.AvailableNow reads the queue's ready count when the query starts and ends once that many
messages went through (or none came for `availableNowIdleSeconds`). A stream queue (option
streamOffset, where its consumer starts) is read from that offset; under AvailableNow until
nothing came for `availableNowIdleSeconds`, since a stream keeps every message and reports no
ready count. Its acks only give credit back, so a restarted query starts at streamOffset again
(the rows carry each message's x-stream-offset header, to pick up from).

Writers publish every row of a task with confirms (pipeline.publisher); a nack, a mandatory
return or a lost connection fails the task, which Spark may retry (at-least-once).
"""
from __future__ import annotations

import threading
import uuid
from typing import Any, Iterator, Sequence

import pika
from pyspark.sql.datasource import (DataSource, DataSourceStreamReader, DataSourceStreamWriter, DataSourceWriter,
                                    InputPartition, WriterCommitMessage)
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import BinaryType, StringType, StructType

from pipeline.consumer import QueueConsumer
from pipeline.ledger import Ledger, Offset
from pipeline.options import SinkOptions, SourceOptions
from pipeline.publisher import publish_all
from pipeline.rows import SCHEMA_DDL, delivery_row, outgoing


STREAM_UNBOUNDED = 1 << 62  # Trigger.AvailableNow's target on a stream: end when nothing more comes


class AmqpDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "amqp"

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema: StructType) -> "AmqpStreamReader":
        return AmqpStreamReader(SourceOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> "AmqpWriter":
        return AmqpWriter(SinkOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> "AmqpStreamWriter":
        return AmqpStreamWriter(SinkOptions.parse(self.options), schema)


class RowsPartition(InputPartition):
    """A slice of a micro-batch: its rows travel to the executor inside the partition."""

    def __init__(self, rows: list[tuple]) -> None:
        super().__init__(len(rows))
        self.rows = rows


def split(rows: list[tuple], parts_max: int) -> list[list[tuple]]:
    parts = max(1, min(parts_max, len(rows)))
    size = -(-len(rows) // parts)
    return [rows[i:i + size] for i in range(0, len(rows), size)]


class _Live:
    """What exists only in the driver's reader process: the consumer and the ledger under one lock.
    (Spark also builds the reader in planning workers and pickles it to executors for `read`, so
    none of this is made in __init__.)"""

    def __init__(self, options: SourceOptions) -> None:
        self.changed = threading.Condition()
        self.ledger = Ledger(uuid.uuid4().hex)
        self.target: int | None = None  # Trigger.AvailableNow: the seq that ends the run
        self.started = False
        offset = options.stream_offset
        self.consumer = QueueConsumer(options.url, options.queue, options.prefetch, self._deliver,
                                      None if offset is None else {"x-stream-offset": offset})

    def _deliver(self, method: Any, props: pika.BasicProperties, body: bytes) -> None:
        row = delivery_row(method, props, body)
        with self.changed:
            self.ledger.receive(method.delivery_tag, row)
            self.changed.notify_all()


class AmqpStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._live: _Live | None = None

    def __getstate__(self) -> dict:
        return {"options": self.options, "_live": None}

    def _state(self) -> _Live:
        if self._live is None:
            self._live = _Live(self.options)
        return self._live

    def _consuming(self) -> _Live:
        live = self._state()
        if not live.started:
            live.started = True
            live.consumer.start()
        live.consumer.check()
        return live

    def initialOffset(self) -> dict:
        return self._state().ledger.initial().to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.options.batch_max)

    def prepareForTriggerAvailableNow(self) -> None:
        live = self._state()
        # a stream keeps what it delivered and reports no ready count: read until it goes quiet
        ready = STREAM_UNBOUNDED if self.options.stream_offset is not None else queue_depth(
            self.options.url, self.options.queue)
        with live.changed:  # the consumer starts after the count, so what it gets first is what was counted
            live.target = live.ledger.received + ready
        self._consuming()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        live = self._consuming()
        begin = Offset.from_json(start)
        self._settle(begin)  # the batch that ended at `start` is committed: see the module doc
        rows_max = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        with live.changed:
            if live.target is not None:
                rows_max = self._await_target(live, begin, rows_max)
            end = live.ledger.latest(begin, rows_max)
        return start if end == begin else end.to_json()

    def _await_target(self, live: _Live, begin: Offset, rows_max: int | None) -> int:
        """Trigger.AvailableNow (called holding the lock): wait for the rest of what the queue held
        when the run started, up to `rows_max`; the size of the next batch at most."""
        planned = live.ledger.planned(begin)
        left = max(0, live.target - planned)
        cap = left if rows_max is None else min(rows_max, left)
        while live.ledger.received < planned + cap:
            before = live.ledger.received
            live.changed.wait(self.options.idle_s)
            if live.ledger.received == before:
                break  # the queue announced more than came: another consumer took it
        return cap

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        live = self._consuming()
        with live.changed:
            rows = live.ledger.rows(Offset.from_json(start), Offset.from_json(end))
        return [RowsPartition(part) for part in split(rows, self.options.partitions)] if rows else []

    def read(self, partition: RowsPartition) -> Iterator[tuple]:
        return iter(partition.rows)

    def commit(self, end: dict) -> None:
        self._settle(Offset.from_json(end))

    def _settle(self, end: Offset) -> None:
        live = self._consuming()
        with live.changed:
            tag = live.ledger.commit(end)
        if tag is not None:
            live.consumer.ack(tag)

    def stop(self) -> None:
        if self._live is not None:
            self._live.consumer.stop()


def queue_depth(url: str, queue: str) -> int:
    """The queue's ready messages now (a passive queue.declare on a connection of its own)."""
    with pika.BlockingConnection(pika.URLParameters(url)) as connection:
        return connection.channel().queue_declare(queue, passive=True).method.message_count


# ---------------------------------------------------------------- writers
class Published(WriterCommitMessage):
    def __init__(self, count: int) -> None:
        self.count = count


def check_columns(schema: StructType) -> None:
    fields = {f.name: f.dataType for f in schema.fields}
    if "body" not in fields:
        raise ValueError(f"the amqp sink needs a 'body' column (string or binary); columns: {sorted(fields)}")
    if not isinstance(fields["body"], (StringType, BinaryType)):
        raise ValueError(f"column 'body' must be string or binary, not {fields['body'].simpleString()}")
    if "routing_key" in fields and not isinstance(fields["routing_key"], StringType):
        raise ValueError("column 'routing_key' must be a string")


class _Publishing:
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_columns(schema)
        self.options = options

    def write(self, iterator: Iterator[Any]) -> Published:
        o = self.options
        messages = (outgoing(row.asDict(), o.routing_key) for row in iterator)
        return Published(publish_all(o.url, o.exchange, messages, mandatory=o.mandatory,
                                     window_max=o.window_max, confirm_timeout_s=o.confirm_timeout_s))


class AmqpWriter(_Publishing, DataSourceWriter):
    pass


class AmqpStreamWriter(_Publishing, DataSourceStreamWriter):
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every row was confirmed by the broker before its task ended: nothing is left to do."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Published messages cannot be taken back; the retried batch publishes again."""
