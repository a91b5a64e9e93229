"""The pure parts of bench.perf: histogram, confirm tracker, pacing, stats, framing, options."""

import json

import pytest
from hypothesis import given, settings, strategies as st
from pika import frame, spec

from bench.perf import framing, pacing
from bench.perf.config import parse_args
from bench.perf.connection import parse_uri
from bench.perf.histogram import SUB_BUCKET_COUNT, Histogram, bucket_index, bucket_value
from bench.perf.stats import Aggregator, format_sample, format_summary
from bench.perf.table import table
from bench.perf.workers import Producer

FAST = settings(max_examples=150, deadline=None)


# -- histogram ------------------------------------------------------------------------------
@FAST
@given(st.integers(min_value=0, max_value=10**9))
def test_bucket_value_is_within_relative_error(value):
    got = bucket_value(bucket_index(value))
    if value < SUB_BUCKET_COUNT:
        assert got == value
    else:
        assert abs(got - value) <= value / (2 * SUB_BUCKET_COUNT)


@FAST
@given(st.lists(st.integers(min_value=0, max_value=10**7), min_size=1, max_size=300),
       st.sampled_from([0.0, 0.5, 0.95, 0.99, 1.0]))
def test_percentile_matches_exact_rank_within_bucket_error(values, q):
    hist = Histogram()
    for v in values:
        hist.record(v)
    exact = sorted(values)[max(1, round(q * len(values))) - 1]
    assert abs(hist.percentile(q) - exact) <= exact / SUB_BUCKET_COUNT + 1


def test_histogram_take_and_merge_keep_counts():
    a = Histogram()
    for v in (1, 2, 3, 1000, 2000):
        a.record(v)
    delta = a.take()
    assert a.count == 0 and a.percentile(0.5) is None
    b = Histogram()
    b.merge(delta)
    b.merge(delta)
    assert b.count == 10 and b.percentile(0.0) == 1


def test_negative_latency_counts_as_zero():
    hist = Histogram()
    hist.record(-50)
    assert hist.percentile(1.0) == 0


# -- pacing ---------------------------------------------------------------------------------
def test_pacing_due_and_wait():
    assert pacing.due(1000, 500_000_000, 0, 10_000) == 500
    assert pacing.due(1000, 500_000_000, 499, 10_000) == 1
    assert pacing.due(1000, 500_000_000, 600, 10_000) == 0
    assert pacing.due(1000, 10 * 10**9, 0, 256) == 256
    assert pacing.wait_ns(1000, 500_000_000, 500) == 1_000_000
    assert pacing.wait_ns(1000, 500_000_000, 100) == 0


def test_pacing_phases_and_the_option_that_sets_them():
    phases = parse_args(["--rates", "1000x8,0x2.5,500x1"]).rates
    assert phases == ((1000.0, 8.0), (0.0, 2.5), (500.0, 1.0))
    assert pacing.phase_at(phases, 0) == (1000.0, 0)
    assert pacing.phase_at(phases, 8 * 10**9) == (0.0, 8 * 10**9)
    assert pacing.phase_at(phases, 10_499_999_999) == (0.0, 8 * 10**9)
    assert pacing.phase_at(phases, 60 * 10**9) == (500.0, 10_500_000_000)  # the last one lasts
    assert parse_args([]).rates == ()
    with pytest.raises(SystemExit):
        parse_args(["--rates", "fast"])


# -- stats ----------------------------------------------------------------------------------
def counters(published, consumed, confirmed=0):
    return {"published": published, "confirmed": confirmed, "consumed": consumed}


def test_aggregator_rates_and_warmup_window():
    agg = Aggregator(warmup_s=2.0)
    slow, fast = Histogram(), Histogram()
    slow.record(900_000)                   # 900 ms, only during warm-up
    for _ in range(10):
        fast.record(1000)
    agg.update("p", counters(100, 0), {})
    agg.update("c", counters(0, 90), slow.take())
    assert agg.sample(1.0)["published_rate"] == 100.0
    agg.update("p", counters(300, 0), {})
    agg.update("c", counters(0, 280), {})
    agg.sample(2.0)
    agg.update("p", counters(700, 0), {})
    agg.update("c", counters(0, 680), fast.take())
    third = agg.sample(4.0)
    assert third["published_rate"] == 200.0 and third["consumed_rate"] == 200.0
    agg.update("c", counters(0, 700), {})  # drain after the last sample
    s = agg.summary()
    assert s["published"] == 700 and s["consumed"] == 700
    assert s["published_rate"] == 200.0 and s["measured_s"] == 2.0 and s["warmup_excluded"]
    assert s["latency_ms"]["p99"] == pytest.approx(1.0, rel=0.01) and s["latency_samples"] == 10
    assert "p50/p95/p99" in format_sample(third) and "700" in format_summary(s)


def test_aggregator_short_run_falls_back_to_whole_run():
    agg = Aggregator(warmup_s=2.0)
    h = Histogram()
    h.record(5000)
    agg.update("c", counters(50, 50), h.take())
    agg.sample(1.0)
    s = agg.summary()
    assert not s["warmup_excluded"] and s["latency_ms"]["p50"] == pytest.approx(5.0, rel=0.01) and s["published_rate"] == 50


def test_confirm_latency_is_summarised_beside_consume_latency_and_printed_only_when_measured():
    agg = Aggregator(warmup_s=0)
    consumed, confirmed = Histogram(), Histogram()
    consumed.record(2000)
    confirmed.record(30_000, 99)
    confirmed.record(90_000)
    agg.update("p", counters(100, 0, confirmed=100), {}, confirmed.take())
    agg.update("c", counters(0, 100), consumed.take())
    second = agg.sample(1.0)
    s = agg.summary()
    assert second["confirm_latency_ms"]["p50"] == pytest.approx(30.0, rel=0.01)
    assert s["confirm_latency_samples"] == 100 and s["confirm_latency_ms"]["max"] == pytest.approx(90.0, rel=0.01)
    assert s["latency_ms"]["p50"] == pytest.approx(2.0, rel=0.01) and "confirm latency" in format_summary(s)
    quiet = Aggregator(warmup_s=0)
    quiet.update("c", counters(0, 1), {})
    quiet.sample(1.0)
    assert "confirm latency" not in format_summary(quiet.summary())


def test_a_producer_times_each_burst_from_its_send_to_the_confirm_that_settles_its_last_message():
    producer = Producer(parse_args(["--confirm", "100"]), "p", None, "", "q")
    for sent_ns, n in ((1_000_000, 3), (2_000_000, 2)):  # messages 1-3, then 4-5
        producer.bursts.append((producer.tracker.published + 1, producer.tracker.published + n, sent_ns))
        producer.tracker.publish(n)
    producer.tracker.settle(5, multiple=False)  # ahead of 1-4: nothing is timed yet
    producer._settled_bursts(9_000_000)
    assert producer.confirm_hist.count == 0
    producer.tracker.settle(3, multiple=True)
    producer._settled_bursts(11_000_000)
    assert producer.confirm_hist.count == 3 and producer.confirm_hist.percentile(1.0) == bucket_value(bucket_index(10_000))
    producer.tracker.settle(4, multiple=False)
    producer._settled_bursts(12_000_000)
    assert producer.confirm_hist.count == 5 and len(producer.bursts) == 0


# -- framing --------------------------------------------------------------------------------
@pytest.mark.parametrize("size,frame_max", [(0, 4096), (5, 4096), (8, 4096), (1024, 4096),
                                            (10_000, 4096), (4088, 4096)])
def test_publish_template_decodes_with_pika(size, frame_max):
    tpl = framing.publish_template(1, "ex", "rk", size, frame_max, persistent=True, mandatory=True)
    data = tpl.frames(123456789)
    frames = []
    while data:
        used, f = frame.decode_frame(data)
        assert used, "incomplete frame"
        frames.append(f)
        data = data[used:]
    publish, header, bodies = frames[0], frames[1], frames[2:]
    assert isinstance(publish.method, spec.Basic.Publish)
    assert (publish.method.exchange, publish.method.routing_key, publish.method.mandatory) == \
        ("ex", "rk", True)
    assert header.body_size == size and header.properties.delivery_mode == 2
    body = b"".join(b.fragment for b in bodies)
    assert len(body) == size
    assert all(len(b.fragment) <= frame_max - 8 for b in bodies)
    if size >= 8:
        assert framing.body_timestamp(body) == 123456789


@FAST
@given(st.lists(st.integers(min_value=1, max_value=64), max_size=40))
def test_splitter_yields_the_same_frames_for_any_chunking(cuts):
    stream = b"".join([
        frame.Method(1, spec.Basic.Deliver("ctag", 7, False, "", "q")).marshal(),
        frame.Header(1, 3, spec.BasicProperties()).marshal(),
        frame.Body(1, b"abc").marshal(),
        frame.Heartbeat().marshal(),
    ])
    splitter = framing.FrameSplitter()
    got, at = [], 0
    for cut in cuts:
        got += splitter.feed(stream[at:at + cut])
        at += cut
    got += splitter.feed(stream[at:])
    assert [(t, c) for t, c, _ in got] == [(1, 1), (2, 1), (3, 1), (8, 0)]
    assert framing.decode_method(got[0][2]).delivery_tag == 7
    assert framing.body_size(got[1][2]) == 3 and got[2][2] == b"abc"


def test_splitter_rejects_a_bad_frame_end():
    bad = bytearray(frame.Heartbeat().marshal())
    bad[-1] = 0
    with pytest.raises(framing.FrameError):
        framing.FrameSplitter().feed(bytes(bad))


# -- options and URIs -----------------------------------------------------------------------
def test_parse_uri():
    u = parse_uri("amqp://bob:s%40cret@example:5673/my%2Fvhost")
    assert (u.host, u.port, u.user, u.password, u.vhost) == ("example", 5673, "bob", "s@cret",
                                                            "my/vhost")
    assert parse_uri("amqp://guest:guest@127.0.0.1:5672/%2F").vhost == "/"
    assert parse_uri("amqp://localhost").vhost == "/"
    with pytest.raises(ValueError):
        parse_uri("amqps://localhost")


def test_parse_args_options_and_errors(capsys):
    cfg = parse_args(["--producers", "2", "--confirm", "1000", "--queue-args",
                      '{"x-queue-type":"quorum"}', "--time", "3", "--multi-ack", "10",
                      "--prefetch", "300"])
    assert cfg.producers == 2 and cfg.confirm == 1000 and cfg.queue_args == {"x-queue-type": "quorum"}
    for bad in (["--queue-args", "[1]"], ["--multi-ack", "0"], ["--prefetch", "5", "--multi-ack", "6"],
                ["--predeclared"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_table_renders_one_row_per_result(tmp_path):
    summary = {"published_rate": 1000.4, "consumed_rate": 999.6,
               "latency_ms": {"p50": 1.234, "p99": None}}
    path = tmp_path / "rabbitmq-A.json"
    path.write_text(json.dumps({"summary": summary, "errors": []}))
    lines = table([path]).splitlines()
    assert lines[-1] == "| rabbitmq | A | 1000 | 1000 | 1.23 | - |"
