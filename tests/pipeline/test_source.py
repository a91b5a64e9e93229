"""The `amqp` source and sink in Spark local mode against a real warren node."""
from __future__ import annotations

import datetime as dt
import uuid

import pika
import pytest

from tests.waiting import until

pytestmark = pytest.mark.integration


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def channel(url: str):
    connection = pika.BlockingConnection(pika.URLParameters(url))
    return connection, connection.channel()


def publish(url: str, queue: str, n: int, **declare) -> None:
    connection, ch = channel(url)
    with connection:
        ch.queue_declare(queue, **declare)
        ch.confirm_delivery()
        for i in range(n):
            ch.basic_publish("", queue, f"body-{i}".encode(), pika.BasicProperties(
                message_id=str(i), content_type="text/plain", timestamp=1_700_000_000 + i,
                headers={"n": i, "kind": "test"}))


def queue_state(url: str, queue: str) -> tuple[int, int]:
    """(ready messages, consumers) as queue.declare passive reports them."""
    connection, ch = channel(url)
    with connection:
        ok = ch.queue_declare(queue, passive=True).method
        return ok.message_count, ok.consumer_count


def settled(url: str, queue: str) -> int:
    """The ready count once the stream's consumer is gone: its unacked messages are back by then."""
    until(lambda: queue_state(url, queue)[1] == 0, f"the consumer on {queue} to go")
    return queue_state(url, queue)[0]


def read_stream(spark, url: str, queue: str, **options):
    reader = spark.readStream.format("amqp").option("url", url).option("queue", queue)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def drain(spark, url: str, queue: str, checkpoint, **options):
    """Run a query over `queue` until it has read what the queue held; its rows and the query."""
    rows: list = []
    query = (read_stream(spark, url, queue, **options).writeStream
             .foreachBatch(lambda batch, _id: rows.extend(batch.collect()))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    return rows, query


def test_stream_reads_every_message_once_and_acks_after_commit(spark, node, tmp_path):
    queue = unique("src")
    publish(node.url, queue, 250)
    rows, query = drain(spark, node.url, queue, tmp_path / "ck", maxMessagesPerBatch=100)
    assert sorted(int(r.properties.message_id) for r in rows) == list(range(250))
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(batches) == 250 and max(batches) <= 100 and len(batches) >= 3
    first = min(rows, key=lambda r: int(r.properties.message_id))
    assert first.body == b"body-0" and first.routing_key == queue and first.exchange == ""
    assert first.redelivered is False
    assert first.properties.content_type == "text/plain"
    assert first.properties.headers == {"n": "0", "kind": "test"}
    stamp = first.properties.timestamp
    assert stamp.replace(tzinfo=stamp.tzinfo or dt.datetime.now().astimezone().tzinfo).timestamp() == 1_700_000_000
    assert settled(node.url, queue) == 0  # acked, not merely delivered: nothing came back


def test_a_query_that_fails_before_its_commit_gets_the_messages_again(spark, node, tmp_path):
    queue = unique("again")
    publish(node.url, queue, 40)

    def fail(_batch, _batch_id):
        raise RuntimeError("sink down")
    query = (read_stream(spark, node.url, queue).writeStream.foreachBatch(fail)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    with pytest.raises(Exception, match="sink down"):
        query.awaitTermination()
    assert settled(node.url, queue) == 40  # never acked: the broker took them back
    rows, _ = drain(spark, node.url, queue, tmp_path / "ck")  # restarted from its checkpoint
    assert sorted(int(r.properties.message_id) for r in rows) == list(range(40))
    assert all(r.redelivered for r in rows)
    assert settled(node.url, queue) == 0


def bound_queues(url: str, exchange: str, keys: list[str], **declare) -> None:
    connection, ch = channel(url)
    with connection:
        ch.exchange_declare(exchange, "direct")
        for key in keys:
            ch.queue_declare(f"{exchange}.{key}", **declare)
            ch.queue_bind(f"{exchange}.{key}", exchange, key)


def write(df, url: str, **options) -> None:
    writer = df.write.format("amqp").mode("append").option("url", url)
    for k, v in options.items():
        writer = writer.option(k, str(v))
    writer.save()


def test_writer_publishes_every_row_to_its_bound_queue(spark, node):
    exchange = unique("wx")
    bound_queues(node.url, exchange, ["a", "b"])
    rows = [(f"row-{i}", None if i % 3 == 0 else "b", {"src": "spark", "i": str(i)},
             (f"id-{i}", "text/plain")) for i in range(300)]
    df = spark.createDataFrame(rows, "body string, routing_key string, headers map<string,string>, "
                                     "properties struct<message_id: string, content_type: string>")
    write(df, node.url, exchange=exchange, routing_key="a")
    until(lambda: queue_state(node.url, f"{exchange}.a")[0] == 100, "100 rows routed by the option")
    until(lambda: queue_state(node.url, f"{exchange}.b")[0] == 200, "200 rows routed by their column")
    connection, ch = channel(node.url)
    with connection:
        got = [ch.basic_get(f"{exchange}.a", auto_ack=True) for _ in range(100)]
    assert {body for _m, _p, body in got} == {f"row-{i}".encode() for i in range(0, 300, 3)}
    for _method, props, body in got:
        i = body.decode().split("-")[1]
        assert props.message_id == f"id-{i}" and props.content_type == "text/plain"
        assert props.headers == {"src": "spark", "i": i}


def test_a_nacked_publish_fails_the_write(spark, node):
    queue = unique("full")
    connection, ch = channel(node.url)
    with connection:
        ch.queue_declare(queue, arguments={"x-max-length": 5, "x-overflow": "reject-publish"})
    df = spark.createDataFrame([(f"m{i}",) for i in range(20)], "body string").coalesce(1)
    with pytest.raises(Exception, match="nacked by the broker"):
        write(df, node.url, routing_key=queue)
    assert queue_state(node.url, queue)[0] == 5


def test_an_unroutable_mandatory_publish_fails_the_write(spark, node):
    df = spark.createDataFrame([("lost",)], "body string")
    with pytest.raises(Exception, match="312 NO_ROUTE"):
        write(df, node.url, exchange="amq.direct", routing_key=unique("nobody"))
    write(df, node.url, exchange="amq.direct", routing_key=unique("nobody"), mandatory="false")


def test_a_stream_from_one_queue_into_another(spark, node, tmp_path):
    src, dst = unique("pipe-in"), unique("pipe-out")
    publish(node.url, src, 120)
    connection, ch = channel(node.url)
    with connection:
        ch.queue_declare(dst)
    query = (read_stream(spark, node.url, src, maxMessagesPerBatch=50).select("body", "properties")
             .writeStream.format("amqp").option("url", node.url).option("routing_key", dst)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    query.awaitTermination()
    assert queue_state(node.url, dst)[0] == 120
    assert settled(node.url, src) == 0
    connection, ch = channel(node.url)
    with connection:
        _, props, body = ch.basic_get(dst, auto_ack=True)
    assert body.startswith(b"body-") and props.headers["kind"] == "test" and props.timestamp >= 1_700_000_000


def test_bad_options_are_reported_before_anything_runs(spark, node):
    with pytest.raises(Exception, match="needs option 'queue'"):
        spark.readStream.format("amqp").option("url", node.url).load().writeStream.format("memory") \
            .queryName("never").start().awaitTermination(30)
    with pytest.raises(Exception, match="needs a 'body' column"):
        write(spark.createDataFrame([(1,)], "n int"), node.url)


def test_a_running_query_reads_what_arrives_and_acks_each_batch_it_moved_past(spark, node, tmp_path):
    queue = unique("live")
    publish(node.url, queue, 0)
    batches: list[list] = []
    query = (read_stream(spark, node.url, queue).writeStream
             .foreachBatch(lambda batch, _id: batches.append(batch.collect()) if not batch.isEmpty() else None)
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        publish(node.url, queue, 25)
        until(lambda: sum(map(len, batches)) >= 25, "the first 25 messages in a batch")
        connection, ch = channel(node.url)
        with connection:
            ch.confirm_delivery()
            for i in range(25, 50):
                ch.basic_publish("", queue, f"body-{i}".encode(), pika.BasicProperties(message_id=str(i)))
        until(lambda: sum(map(len, batches)) >= 50, "all 50 messages")
    finally:
        query.stop()
    ids = [int(r.properties.message_id) for batch in batches for r in batch]
    assert sorted(ids) == list(range(50))
    # batches Spark moved past were acked; only the last one may still have been open at stop
    assert settled(node.url, queue) in (0, len(batches[-1]))


def test_a_stream_queue_is_read_from_the_offset_asked_for(spark, node, tmp_path):
    queue = unique("stream")
    publish(node.url, queue, 30, durable=True, arguments={"x-queue-type": "stream"})
    rows, _ = drain(spark, node.url, queue, tmp_path / "ck", streamOffset=10, availableNowIdleSeconds=1)
    assert sorted(int(r.properties.headers["x-stream-offset"]) for r in rows) == list(range(10, 30))
    assert sorted(int(r.properties.message_id) for r in rows) == list(range(10, 30))
