"""The stream log (persist/stream/) against a model: a list of (offset, entry, timestamp).

A rule-based machine appends batches, syncs, reads with several cursors, applies retention and
reopens the directory (a clean restart, and one with a torn tail: bytes of a last chunk that never
completed, which recovery must cut). After every step the log's offsets, what each cursor reads
and the index lookups agree with the model. Table cases pin the chunk format's refusals.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from persist.classic.message import Message
from persist.stream import chunk
from persist.stream.chunk import Entry
from persist.stream.log import StreamLog

entries_st = st.lists(st.builds(Entry, st.sampled_from(["", "x"]), st.text(max_size=3),
                                st.binary(max_size=8), st.binary(max_size=40)), min_size=1, max_size=5)


def test_chunk_round_trip_and_refusals():
    es = [Entry("ex", "rk", b"\x00\x3c", b"body"), Entry("", "q", b"", b"")]
    data = chunk.encode(7, 1234, es)
    header = chunk.read_header(data)
    assert header == chunk.ChunkHeader(len(data) - chunk.HEADER_BYTES, header.crc, 7, 1234, 2)
    payload = data[chunk.HEADER_BYTES:]
    assert chunk.check(header, payload) and chunk.decode(header, payload) == es
    assert not chunk.check(header, payload[:-1])  # torn
    assert not chunk.check(header, payload[:-1] + b"\xff")  # flipped
    assert chunk.read_header(b"XXXX" + data[4:]) is None  # not a chunk
    assert chunk.read_header(data[:5]) is None  # short


class StreamLogMachine(RuleBasedStateMachine):
    @initialize(segment_bytes=st.sampled_from([1, 150, 400, 1 << 20]))
    def start(self, segment_bytes):
        self.dir = Path(tempfile.mkdtemp(prefix="stream-log-"))
        self.segment_bytes = segment_bytes
        self.log = StreamLog.open(self.dir, segment_bytes)
        self.model: list[tuple[int, Entry, int]] = []  # every entry still in the log
        self.first = 0
        self.durable = 0
        self.now = 1000
        self.cursors: dict[int, object] = {}
        self.chunks: list[int] = []  # each append's first offset: the chunks' starts

    def teardown(self):
        for c in self.cursors.values():
            c.close()
        self.log.delete()

    @rule(es=entries_st, dt=st.integers(0, 50))
    def append(self, es, dt):
        self.now += dt
        first = self.log.append(es, self.now)
        assert first == self.first + len(self.model)
        self.model += [(first + i, e, self.now) for i, e in enumerate(es)]
        self.chunks.append(first)

    @rule()
    def sync(self):
        assert self.log.sync() == self.first + len(self.model)
        self.durable = self.log.committed

    @rule(at=st.integers(-2, 40), name=st.integers(0, 2))
    def open_cursor(self, at, name):
        old = self.cursors.pop(name, None)
        if old is not None:
            old.close()
        self.cursors[name] = self.log.reader(at)

    @rule(name=st.integers(0, 2), n=st.integers(1, 7))
    def read(self, name, n):
        cursor = self.cursors.get(name)
        if cursor is None:
            return
        start = max(cursor.next_offset, self.first)
        got = cursor.read(n)
        want = [Message(o, False, *e) for o, e, _ in self.model if start <= o < self.log.committed][:n]
        assert got == want

    @rule(max_bytes=st.one_of(st.none(), st.integers(0, 2000)), max_age=st.one_of(st.none(), st.integers(1, 200)))
    def retain(self, max_bytes, max_age):
        self.log.retain(max_bytes, max_age, self.now)
        first = self.log.first_offset
        assert first >= self.first
        if max_bytes is not None and len(self.log.segments) > 1:
            assert self.log.bytes <= max_bytes or False, "over max_bytes with more than one segment"
        if max_age is not None and len(self.log.segments) > 1:
            assert self.log.segments[0].last_ts >= self.now - max_age
        self.model = [m for m in self.model if m[0] >= first]
        self.first = first

    def _stop(self) -> None:
        """Close the readers and the log after a sync: what it committed is what must come back."""
        for c in self.cursors.values():
            c.close()
        self.cursors = {}
        self.log.sync()
        self.durable = self.log.committed
        self.log.close()

    @precondition(lambda self: True)
    @rule(torn=st.binary(min_size=0, max_size=30))
    def restart(self, torn):
        """Reopen from disk: what was synced survives; an unsynced tail may be lost (it was written
        to the OS here, so it survives too unless torn bytes follow it)."""
        self._stop()
        if torn and self.log.segments:
            with open(self.dir / f"{self.log.segments[-1].stem}.segment", "ab") as f:
                f.write(chunk.encode(self.durable, self.now, [Entry("", "", b"", torn)])[:-1])
        self.log = StreamLog.open(self.dir, self.segment_bytes)
        assert self.log.next_offset == self.durable

    @rule(keep=st.integers(0, 40), zeros=st.integers(0, 3), hole=st.booleans())
    def restart_with_a_damaged_index(self, keep, zeros, hole):
        """The last segment's index is not synced with it: a crash may leave it short, with zero
        rows at its end, or with zeros in place of a row in between (a page not written back).
        Recovery rebuilds it from the segment: nothing synced is lost, the index finds it all."""
        self._stop()
        if self.log.segments:
            path = self.dir / f"{self.log.segments[-1].stem}.index"
            rows = path.read_bytes()
            n = len(rows) // 24
            keep = min(keep, n)
            if hole and keep < n:
                damaged = rows[:keep * 24] + bytes(24) + rows[(keep + 1) * 24:]
            else:
                damaged = rows[:keep * 24] + bytes(24 * zeros)
            path.write_bytes(damaged)
        self.log = StreamLog.open(self.dir, self.segment_bytes)
        assert self.log.next_offset == self.durable

    @invariant()
    def shape(self):
        if not hasattr(self, "log"):
            return
        assert self.log.first_offset == self.first
        assert self.log.next_offset == self.first + len(self.model)
        for probe in range(self.first, self.log.committed, 3):
            found = self.log.chunk_at(probe)
            assert found is not None and found[2] == max(c for c in self.chunks if c <= probe)  # its chunk
        if self.model and self.log.committed == self.log.next_offset:
            ts = self.model[len(self.model) // 2][2]
            first_at = min(o for o, _, t in self.model if t >= ts)
            # the chunk holding the first entry stamped >= ts starts at or before it
            assert self.log.offset_at_time(ts) <= first_at


StreamLogMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_stream_log = StreamLogMachine.TestCase


def test_memory_holds_summaries_only(tmp_path):
    """2,000 chunks of 143 bytes in 150-byte segments: two chunks a segment, found by the index."""
    log = StreamLog.open(tmp_path, 150)
    for i in range(2000):
        log.append([Entry("", "q", b"", b"x" * 100)], i)
    log.sync()
    assert len(log.segments) == 1000 and log.segments[750].base == 1500
    reader = log.reader(1500)
    assert [m.msg_id for m in reader.read(3)] == [1500, 1501, 1502]
    assert log.offset_at_time(1700) == 1700
    reader.close()
    log.close()
    assert os.path.exists(tmp_path / f"{1998:020d}.index")


def test_a_replica_appends_its_leaders_chunks_and_cuts_back_to_a_chunk_boundary(tmp_path):
    """read_chunks hands out whole encoded chunks, append_chunk writes them as they are (same
    offsets, same bytes), truncate cuts both files at a chunk boundary across segments, durably."""
    leader, replica = StreamLog.open(tmp_path / "a", 300), StreamLog.open(tmp_path / "b", 300)
    for i in range(10):
        leader.append([Entry("", "q", b"", b"%d" % i * 50), Entry("", "q", b"", b"y")], i)
    chunks = leader.read_chunks(0, 1 << 20)
    assert len(chunks) == 10 and leader.read_chunks(4, 1) == chunks[2:3]  # at least one, then while under
    assert leader.read_chunks(4, len(chunks[2]) + len(chunks[3])) == chunks[2:4]
    for data in chunks:
        replica.append_chunk(data)
    replica.sync()
    assert replica.next_offset == 20 and len(replica.segments) > 1
    assert replica.truncate(14) == 14 and replica.committed == 14
    replica.append_chunk(chunks[7])
    replica.close()
    reopened = StreamLog.open(tmp_path / "b", 300)
    reader = reopened.reader(0)
    assert [m.body for m in reader.read(100)] == [e.body for i in range(8) for e in chunk_entries(chunks[i])]
    reader.close()
    assert reopened.truncate(0) == 0 and reopened.segments == []
    reopened.close()
    leader.close()


def chunk_entries(data: bytes) -> list[Entry]:
    header = chunk.read_header(data)
    return chunk.decode(header, data[chunk.HEADER_BYTES:])


def test_a_reader_keeps_the_decoded_chunks_it_has_not_read(tmp_path):
    """Past the decoded budget, a chunk stays while an open reader has not read it (a consumer
    waiting at a replicated stream's commit, or one catching up from the file), up to the hold
    limit; a closed reader holds nothing."""
    log = StreamLog.open(tmp_path, 1 << 20)
    log.recent_bytes_max, log.recent_hold_bytes_max = 300, 1000  # chunks of 143 bytes: 2, at most 6
    reader = log.reader(0)
    for i in range(5):
        log.append([Entry("", "q", b"", b"x" * 100)], i)
    assert log.recent_chunk(0) == (0, [Message(0, False, "", "q", b"", b"x" * 100)]) and log.recent_bytes == 5 * 143
    log.sync()
    assert [m.msg_id for m in reader.read(3)] == [0, 1, 2]
    log.append([Entry("", "q", b"", b"x" * 100)], 5)
    assert log.recent_chunk(2) is None and log.recent_chunk(3) is not None  # what it read goes
    for i in range(6, 9):  # it reads no more: held while under the limit
        log.append([Entry("", "q", b"", b"x" * 100)], i)
    assert log.recent_bytes == 6 * 143 and log.recent_chunk(3) is not None
    for i in range(9, 11):  # over the limit: the oldest goes all the same
        log.append([Entry("", "q", b"", b"x" * 100)], i)
    assert log.recent_bytes == 6 * 143 and log.recent_chunk(4) is None and log.recent_chunk(5) is not None
    log.sync()
    assert [m.msg_id for m in reader.read(4)] == [3, 4, 5, 6]  # from the file, then from RAM
    log.append([Entry("", "q", b"", b"x" * 100)], 11)
    assert log.recent_chunk(6) is None and log.recent_chunk(7) is not None
    at_tail = log.reader(12)
    reader.close()
    log.append([Entry("", "q", b"", b"x" * 100)], 12)  # a closed reader holds nothing
    assert log.recent_bytes == 2 * 143
    for i in range(13, 16):  # the one at the tail holds what it lacks
        log.append([Entry("", "q", b"", b"x" * 100)], i)
    assert log.recent_bytes == 4 * 143 and log.recent_chunk(12) is not None
    at_tail.close()
    log.append([Entry("", "q", b"", b"x" * 100)], 16)
    assert log.recent_bytes == 2 * 143
    log.close()


def test_recovery_rebuilds_a_damaged_index_of_the_last_segment(tmp_path):
    """Only the segment is synced with each sync, so a crash may leave its index short, with zero
    rows at its end, or with zeros in place of a row in between: recovery keeps the rows that are
    their chunks' and indexes the rest again from the segment."""
    log = StreamLog.open(tmp_path, 1 << 20)
    for i in range(10):
        log.append([Entry("", "q", b"", b"%d" % i * 20), Entry("", "q", b"", b"y")], 1000 + i)
    log.sync()
    log.close()
    index = tmp_path / f"{0:020d}.index"
    rows = index.read_bytes()
    for damaged in (rows[:24 * 4], rows[:24 * 4] + bytes(24 * 3), rows[:24 * 4] + bytes(24) + rows[24 * 5:], b""):
        index.write_bytes(damaged)
        log = StreamLog.open(tmp_path, 1 << 20)
        assert log.next_offset == 20 and index.read_bytes() == rows
        assert [log.chunk_at(o)[2] for o in range(20)] == [o - o % 2 for o in range(20)]
        assert log.offset_at_time(1005) == 10
        log.close()
