"""Snapshots: taking them, compacting below them, and streaming them to a lagging follower
(Raft §7; Ra's live indexes).

Theory of operation. Every `snapshot_interval` applied entries the core captures the machine
state at the applied index, together with the configuration in force there, and asks the shell
to write it (WriteSnapshot). Once written (`snapshot_written`) the log is compacted below
min(snapshot index + 1, lowest live index at the snapshot), so entries the machine still refers
to survive. A follower whose next entry was compacted on the leader gets the snapshot in chunks
of `snapshot_chunk_bytes`, one chunk in flight, each acked with the next offset expected; after
the last chunk it writes the snapshot and only once it is durable restores its machine, moves
commit and applied to the snapshot index and acks the leader, which resumes with a probe.

Format (msgpack): [configuration, machine value, machine version]. The version is the one the
state was taken at (versions.py): a snapshot restores into that version, and a member whose code
does not run it halts instead of restoring it. A snapshot of two items was written before
versions existed: version 1.
"""
from __future__ import annotations

from typing import Any

import msgpack

from raft.config import ClusterConfig
from raft.effects import Effect, ToPeer, WriteSnapshot
from raft.machine import Machine, live_indexes
from raft.messages import InstallSnapshot, InstallSnapshotReply
from raft.progress import SNAPSHOT
from raft.versions import BASE_VERSION


def encode_snapshot(machine: Machine, config: ClusterConfig, state: Any, version: int) -> bytes:
    return msgpack.packb([config.encode(), machine.snapshot(state), version], use_bin_type=True)


def decode_snapshot(data: bytes) -> tuple[ClusterConfig, int, Any]:
    """(configuration, machine version, machine value): the caller restores the value only if its
    machine runs that version."""
    cfg, value, *version = msgpack.unpackb(data, raw=False, strict_map_key=False)
    return ClusterConfig.decode(cfg), version[0] if version else BASE_VERSION, value


class SnapshotMixin:
    def maybe_snapshot(self, out: list[Effect]) -> None:
        interval = self.settings.snapshot_interval
        if not interval or self.snapshot_pending or self.applied - self.snapshot_index < interval:
            return
        index, term = self.applied, self.log.term_at(self.applied)
        live = min(live_indexes(self.machine, self.state), default=index + 1)
        self.snapshot_pending = (index, term, live)
        out.append(WriteSnapshot(index, term, encode_snapshot(self.machine, self.config_at(index), self.state,
                                                              self.machine_version)))

    def capture_snapshot(self) -> tuple[int, int, bytes]:
        """(index, term, bytes) of a snapshot of the applied state as it is now, written by no one
        yet. A machine whose state refers to log entries below its applied index (a quorum queue's
        messages) may keep it until nothing below it is live any more and then `write_snapshot`
        it, so that a snapshot never stands for entries that are still needed (Ra's release
        cursor): the log is then compacted below it whole, and a follower that installs it needs
        nothing from below it."""
        index = self.applied
        term = self.log.term_at(index)
        assert term is not None, f"{self.id}: applied index {index} has no term"
        return index, term, encode_snapshot(self.machine, self.config_at(index), self.state, self.machine_version)

    def write_snapshot(self, index: int, term: int, data: bytes) -> list[Effect]:
        """Write a snapshot `capture_snapshot` took (index <= applied); nothing if one is being
        written or a newer one exists. Once written the log is compacted below index + 1."""
        if self.snapshot_pending or index <= self.snapshot_index or index > self.applied:
            return []
        self.snapshot_pending = (index, term, index + 1)
        return [WriteSnapshot(index, term, data)]

    def snapshot_written(self, index: int, term: int) -> list[Effect]:
        """The shell has durably stored the snapshot of a WriteSnapshot effect."""
        out: list[Effect] = []
        rx = self.snap_rx
        if rx is not None and rx[3] and (rx[0], rx[1]) == (index, term):
            self.snap_rx = None
            self.restore_snapshot(index, term, bytes(rx[2]), out)
        elif self.snapshot_pending and self.snapshot_pending[:2] == (index, term):
            live = self.snapshot_pending[2]
            self.snapshot_pending = None
            self.snapshot_index = max(self.snapshot_index, index)
            self.log.compact_below(min(index + 1, live))
        return out

    def restore_snapshot(self, index: int, term: int, data: bytes, out: list[Effect]) -> None:
        cfg, version, value = decode_snapshot(data)
        last, _ = self.log.last_index_term()
        later = [c for c in self.configs if c[0] > index] if last > index else []
        self.configs = [(index, cfg)] + later
        self.config_changed()
        self.versions = [(index, version)] + ([v for v in self.versions if v[0] > index] if last > index else [])
        self.commit = max(self.commit, index)
        self.snapshot_index = index
        if version > self.supported:  # kept and acked (the log is the leader's), never applied
            self.halt(index, f"the snapshot at index {index} holds machine version {version}; "
                             f"this member runs versions up to {self.supported}", out)
        else:
            self.state, self.machine_version = self.machine.restore(value), version
            self.applied = index
        self.snapshot_pending = None
        self.verified = max(self.verified, index)
        if self.leader_id is not None:
            out.append(ToPeer(self.leader_id,
                            InstallSnapshotReply(self.term, self.id, index, len(data), True)))

    # -- leader -------------------------------------------------------------------------------
    def start_snapshot(self, peer: str, out: list[Effect]) -> None:
        meta, data = self.log.snapshot_meta(), self.log.snapshot_data()
        assert meta is not None and data is not None, "entries compacted without a snapshot"
        self.progress[peer].become_snapshot(meta[0], meta[1], data)
        self.send_snapshot_chunk(peer, out)

    def send_snapshot_chunk(self, peer: str, out: list[Effect]) -> None:
        pr = self.progress[peer]
        end = pr.snap_offset + self.settings.snapshot_chunk_bytes
        chunk = pr.snap_data[pr.snap_offset:end]
        out.append(ToPeer(peer, InstallSnapshot(self.term, self.id, pr.snap_index, pr.snap_term,
                                              pr.snap_offset, chunk, end >= len(pr.snap_data))))

    def on_snapshot_reply(self, msg: InstallSnapshotReply, out: list[Effect]) -> None:
        pr = self.progress.get(msg.src)
        if pr is None:
            return
        pr.recent_active = True
        if pr.state != SNAPSHOT or msg.index != pr.snap_index:
            return
        if msg.done:
            pr.update(msg.index)
            pr.become_probe()
            self.send_append(msg.src, out, allow_empty=True)
            self.maybe_promote(out)  # a learner the snapshot caught up (an idle log sends it no more)
        else:
            pr.snap_offset = msg.offset  # the follower says which byte it expects next
            self.send_snapshot_chunk(msg.src, out)

    # -- follower -----------------------------------------------------------------------------
    def on_install_snapshot(self, msg: InstallSnapshot, out: list[Effect]) -> None:
        self.follow(msg.src, out)
        if msg.index <= self.commit:
            out.append(ToPeer(msg.src, InstallSnapshotReply(self.term, self.id, msg.index, 0, True)))
            return
        if msg.offset == 0:
            self.snap_rx = [msg.index, msg.snap_term, bytearray(), False]
        rx = self.snap_rx
        if rx is None or (rx[0], rx[1]) != (msg.index, msg.snap_term) or msg.offset != len(rx[2]):
            expected = len(rx[2]) if rx is not None and rx[0] == msg.index else 0
            out.append(ToPeer(msg.src, InstallSnapshotReply(self.term, self.id, msg.index,
                                                          expected, False)))
            return
        if rx[3]:
            return  # complete and being written; the ack follows snapshot_written
        rx[2] += msg.data
        if msg.done:
            rx[3] = True
            out.append(WriteSnapshot(msg.index, msg.snap_term, bytes(rx[2])))
        else:
            out.append(ToPeer(msg.src, InstallSnapshotReply(self.term, self.id, msg.index,
                                                          len(rx[2]), False)))
