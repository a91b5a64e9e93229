"""QuorumMember: one node's member of a quorum queue, a thin shell around RaftCore, its RaftDriver
and the queue's front (actors/quorum/front.py).

Inputs and what they become:
    a peer's Raft message (raft/messages.py)  -> core.step(message)
    a node's ChangeQueueMembers / TransferQueueLeader -> core.add_member / remove_member /
                                                 transfer_leadership (actors/quorum/member_changes.py)
    a channel's or the node's message         -> front.handle; what it asks is proposed at the
                                                 end of the turn, with everything else of the turn
    tick() from the host's ticker             -> core.tick(); an idle drained queue snapshots; then
                                                 `sleepy()` tells the host whether it may stop
                                                 ticking it until an input arrives
    peers_down(leader) from the host          -> core.peer_down: a peer's node is down
    written(upto) from the WalActor           -> driver.written(upto): commits, applies, replies
    a machine timer (effects.Timer) firing    -> front.timer: the leader proposes a Tick
    end of the loop turn                      -> the turn's proposals as one batch, then
                                                 core.replicate() (append_per_turn)
Every input that did something ends the same way (`_end_input`): the front's end-of-run work (a
new leader's announcement, deferred resyncs), its proposals, the release cursor
(actors/quorum/release.py: stash the applied state, write a snapshot once nothing below it is
live), then everything the front produced goes out in order, confirms last, through one
Interpreter. An idle tick or a heartbeat that changed nothing skips it (`_busy`): a node holds
hundreds of members, and most of them are idle most of the time.

The Raft effects go to raft/driver.py, which keeps the ordering rules (hard state synced before
the sends after it, snapshots only of what the WAL has written); this actor is its ports, where
Raft's effects (raft/effects.py) become the broker's: a reply goes to the front as `committed`,
NotLeader as `not_leader`, LeaderChanged as `leader_changed`, machine effects as
`machine_effect`, a version switch and a halted machine (raft/versions.py) to the log,
after_flush/kick to the WalActor.

Sleep: a member whose Raft core is quiet (raft/quiescence.py: an idle group sends nothing) and
which waits for nothing that needs a tick (a membership change, a probe of channels holding its
deliveries, a snapshot an idle tick would take) asks for no ticks; its next input wakes it
(`on_wake`), so the host ticks only the members that have work (as Ra hibernates idle members).

Flow: after every input a leader records what its commit waits on (flow/commit_wait.py: its WAL
write, followers' acks), which `warrenctl flow` shows (actors/quorum/flow_links.py).

Pacing: the member grants its publishers' credit itself (`manual_credit`), as a classic queue does
(actors/queue/shell.py, flow/intake.py): after every input it counts what it took in (publishes)
and delivered, and holds the credit while the queue (ready messages and entries not yet applied)
is longer than the pace's backlog and its consumers keep up, at most `hold_max_ms` at a time.
Without it a publisher with confirms outruns a consumer that could keep up (a confirm needs only
a majority's write, a delivery the consumer's round trip), and latency becomes the backlog: 3 s
at p50 on three nodes. A member that does not lead delivers nothing, so it never holds.

Time: the wall clock in milliseconds stamps every command (the machine decides TTLs from it);
timers are the event loop's (ActorEffects, 1 ms ticks).
"""
from __future__ import annotations

import time
from typing import Any, Callable

import structlog

from actors.messages.calls import Reply
from actors.messages.channel_queue import Deliver, Publish
from actors.messages.quorum import ChangeQueueMembers, NotQueueLeader, TransferQueueLeader
from actors.quorum.front import DeadLetterHanded, DeadLettered, DeadLetterWorkerStopped, QueueFront
from actors.quorum.member_changes import MemberChanges, is_change
from actors.quorum.queries import stats
from actors.quorum.release import QueueView, ReleaseCursor
from actors.raft.wal import WalActor
from actors.runtime.address import Address
from actors.runtime.clock import monotonic_ms, now_ms
from actors.runtime.effects import ActorEffects
from actors.runtime.held_credit import HeldCredit
from flow.commit_wait import CommitWait, commit_waits_on
from flow.intake import IntakePace
from effects import Send
from effects.interpreter import Interpreter
from raft import messages as peer
from raft.core import RaftCore
from raft.driver import RaftDriver
from raft.roles import LEADER

log = structlog.get_logger("warren.quorum.member")

PEER_MESSAGES = (peer.PreVote, peer.PreVoteReply, peer.RequestVote, peer.RequestVoteReply,
                 peer.AppendEntries, peer.AppendReply, peer.Heartbeat, peer.HeartbeatReply,
                 peer.InstallSnapshot, peer.InstallSnapshotReply, peer.TimeoutNow)


class QuorumMember:
    def __init__(self, runtime: Any, me: Address, core: RaftCore, wal: WalActor, front: QueueFront,
                 wal_key: str, *, dead_letter: Callable[[Any], None] | None = None,
                 on_leader: Callable[[str | None], None] = lambda leader: None) -> None:
        self.runtime = runtime
        self.me = me
        self.core = core
        self.wal = wal
        self.front = front
        self.wal_key = wal_key
        self.dead_letter = dead_letter
        # the host hears of a leader that serves: another member that took the lead, or this one
        # once it has applied an entry of its term (a new queue's first leader, host.py)
        self.on_leader = on_leader
        self._serving_unannounced = False
        self.asleep = False  # the host does not tick it until an input wakes it
        self.on_wake: Callable[[QuorumMember], None] = lambda member: None
        self.on_input: Callable[[], None] = lambda: None  # the host hears of every input (its stats rows)
        self._tick_applied = -1  # the applied index the last tick saw
        self.release = ReleaseCursor(core.snapshot_index)
        self.commit_wait = CommitWait(monotonic_ms())
        self.recovered = core.log.last_index_term()[0]
        self.leader_since: float | None = None
        self.stopped = False
        self._applied_seen = -1
        self.commit_latency_ms = 0  # ra's commit_latency (rabbitmq_raft_entry_commit_latency_seconds)
        self._command_ms_seen = core.state.now_ms
        self._addresses: dict[str, Address] = {}
        self._turn_scheduled = False
        self._per_turn = core.settings.append_per_turn
        self.changes = MemberChanges()
        self.manual_credit = True  # the runtime leaves the publishers' grants to `_pace_intake`
        self._pace = IntakePace()
        self._taken = 0  # publishes taken in since the last `_pace_intake`
        self._credit = HeldCredit(runtime, me, self._hold_ended)
        self._actor_effects = ActorEffects(runtime, me, on_timer=self._timer)
        self._out = Interpreter({**self._actor_effects.handlers(), Send: self._send_out,
                                 DeadLettered: self._dead_lettered, DeadLetterHanded: self._dead_lettered,
                                 DeadLetterWorkerStopped: self._dead_lettered})
        wal.register(wal_key, self.written, core.log.written_index())
        self.driver = RaftDriver(core, self)

    # -- inputs --------------------------------------------------------------------------------
    def _awaken(self) -> None:
        self.on_input()
        if self.asleep:
            self.asleep = False
            self.on_wake(self)

    def receive(self, sender: Address, msg: Any) -> None:
        self._awaken()
        # the clock of what this input applies: a commit that a follower's ack brings times the
        # machine's timers from it (a new leader's x-expires, armed when it has caught up)
        self.front.now_ms = now_ms()
        if isinstance(msg, PEER_MESSAGES):
            self.run(self.core.step(msg))
            if self._busy():
                self._end_input()
            else:
                self.wal.kick()  # a follower's appended entries: written in this turn's flush
            return
        if type(msg) in (ChangeQueueMembers, TransferQueueLeader):
            self._membership(str(sender), msg)
            return
        # channels' messages of one loop turn become ONE proposal batch, proposed at the turn's
        # end (before the WAL writes the turn), so a burst of publishes and acks costs one log
        # append, one WAL record run and one AppendEntries per follower
        self.front.handle(str(sender), msg)
        if type(msg) is Publish:
            self._taken += len(msg.messages)
        if not self._turn_scheduled:
            self._turn_scheduled = True
            self.wal.at_turn_end(self._end_turn)

    def tick(self) -> None:
        """Cheap when idle (a node holds hundreds of members): the core's tick, and the end of
        input only when something happened."""
        core = self.core
        effects = core.tick()
        front = self.front
        front.now_ms = now_ms()
        if self.changes.pending:
            self._membership_tick()
        if effects:
            self.run(effects)
        front.probe()
        if not core.snapshot_pending and core.applied > self.release.snapshot_index:
            snapshot = self.release.on_tick(self._view(), core.capture_snapshot)
            if snapshot is not None:
                self.run(core.write_snapshot(*snapshot))
        if self._busy():
            self._end_input()

    def sleepy(self) -> bool:
        """After a tick: whether this member needs no more ticks until an input (see the module
        docstring). A tick that saw something newly applied is not the last: the release
        cursor's idle tick comes after it."""
        core = self.core
        idle, self._tick_applied = core.applied == self._tick_applied, core.applied
        return (idle and core.quiet and not core.snapshot_pending and not self.changes.pending
                and not self.front.needs_ticks())

    def peers_down(self, leader: bool) -> None:
        """A node holding a peer of this member went down (`leader`: its leader's)."""
        self._awaken()
        self.run(self.core.peer_down(leader))
        self._end_input()

    def campaign_now(self) -> None:
        """Stand for election at once (a new queue's first member: host.py)."""
        self._awaken()
        self.run(self.core.campaign_now())
        self._end_input()

    def written(self, upto: int) -> None:
        self._awaken()
        self.front.now_ms = now_ms()
        self.driver.written(upto)
        self._end_input()

    def _timer(self, name: str) -> None:
        if self.stopped:
            return
        self._awaken()
        self.front.now_ms = now_ms()
        self.front.timer(name)
        self._end_input()

    def _membership(self, sender: str, msg: ChangeQueueMembers | TransferQueueLeader) -> None:
        core = self.core
        if core.role != LEADER:
            leader = core.leader_id if core.leader_id != core.id else None
            self.send(sender, NotQueueLeader(leader, core.term, msg))
            return
        if type(msg) is TransferQueueLeader:
            self.run(core.transfer_leadership(msg.member))
            self.send(sender, Reply(msg.rid))
        else:
            change = core.add_member if msg.add else core.remove_member
            self.run(change(msg.member, self.changes.ask(sender, msg, now_ms())))
        self._end_input()

    def _membership_tick(self) -> None:
        for corr, msg in self.changes.retries():
            self.run((self.core.add_member if msg.add else self.core.remove_member)(msg.member, corr))
        self._answer_changes(self.changes.expire(now_ms()))

    def _answer_changes(self, out: list[tuple[str, Any]]) -> None:
        for to, msg in out:
            self.send(to, msg)

    def channels_gone(self, prefix: str, dead: bool = False) -> None:
        """The host heard that channels under `prefix` are gone (actors/messages/quorum.py); `dead`:
        for good (QuorumFront.channels_dead)."""
        self._awaken()
        self.front.now_ms = now_ms()
        if dead:
            self.front.channels_dead(prefix)
        else:
            self.front.channels_gone(prefix)
        self._end_input()

    def dead_letters_settled(self, msg_ids: list[int]) -> None:
        """Every target queue confirmed these at-least-once dead-lettered messages (the worker)."""
        if self.stopped:
            return
        self._awaken()
        self.front.now_ms = now_ms()
        self.front.dead_letters_settled(msg_ids)
        self._end_input()

    def channels_back(self, prefix: str) -> None:
        """The host saw the node of the channels under `prefix` again."""
        self._awaken()
        self.front.now_ms = now_ms()
        self.front.channels_back(prefix)
        self._end_input()

    def stop(self) -> None:
        """The member is being deleted: no timer or turn may touch it again."""
        self.stopped = True
        self._actor_effects.cancel_all()
        self._credit.release()
        self.wal.unregister(self.wal_key)

    # -- the end of every input ------------------------------------------------------------------
    def _busy(self) -> bool:
        """Whether an input left work for its end: applied entries (the release cursor), the
        front's output or proposals, or followers due an AppendEntries this turn."""
        core = self.core
        return core.append_due or core.applied != self._applied_seen or self.front.pending()

    def _end_input(self) -> None:
        self._finish_input()
        if not self._turn_scheduled:
            self._turn_scheduled = True
            self.wal.at_turn_end(self._end_turn)  # also kicks the WAL's flush for this turn

    def _end_turn(self) -> None:
        """The start of the WAL's flush for this loop turn, before it writes."""
        self._turn_scheduled = False
        if self.stopped:
            return
        self._finish_input()
        if self._per_turn:
            self.run(self.core.replicate())

    def _finish_input(self) -> None:
        front = self.front
        if self._serving_unannounced and front.view.caught_up():
            self._serving_unannounced = False
            self.on_leader(self.core.id)
        if self.core.applied != self._applied_seen:
            self._measure_commit_latency()
        self._applied_seen = self.core.applied
        front.after_run()
        proposals = front.take_proposals()
        if proposals:
            self.run(self.core.propose_batch(proposals))
        core = self.core
        if core.snapshot_index > self.release.snapshot_index:  # installed a leader's snapshot
            self.release.restored(core.snapshot_index)
        if not core.snapshot_pending:
            snapshot = self.release.after_apply(self._view(), core.capture_snapshot)
            if snapshot is not None:
                self.run(core.write_snapshot(*snapshot))
        out = front.flush()
        self._out(out)
        self._observe_commit_wait()
        self._pace_intake(sum(len(e.msg.messages) for e in out if type(e) is Send and type(e.msg) is Deliver))

    def _pace_intake(self, delivered: int) -> None:
        """Hold the publishers' credit while the queue is long and its consumers keep up, else
        let it go (flow/intake.py)."""
        pace, now, core = self._pace, monotonic_ms(), self.core
        pace.count(now, self._taken, delivered)
        self._taken = 0
        # what is proposed is not in the ready queue until it is applied: count it as there
        backlog = core.state.ready.count + core.log.last_index_term()[0] - core.applied
        if pace.hold(now, backlog):
            self._credit.hold(pace.hold_max_ms)
        else:
            self._credit.release()

    def _hold_ended(self) -> None:
        if not self.stopped:
            self._pace_intake(0)

    def _observe_commit_wait(self) -> None:
        core = self.core
        waiting: frozenset[str] = frozenset()
        if core.role == LEADER:
            last = core.log.last_index_term()[0]
            if core.commit < last:
                waiting = commit_waits_on(last, core.log.written_index(), core.config.voters,
                                          {m: pr.match for m, pr in core.progress.items()})
        self.commit_wait.observe(waiting, monotonic_ms())

    def _measure_commit_latency(self) -> None:
        """As ra: the wall-clock time from a command's proposal (the ms it carries) until it is
        applied here, taken when a command newer than the last one measured has been applied
        (entries without a time, such as a new leader's no-op, leave it as it was)."""
        command_ms = self.core.state.now_ms
        if command_ms != self._command_ms_seen:
            self._command_ms_seen = command_ms
            self.commit_latency_ms = max(0, now_ms() - command_ms)

    def _view(self) -> QueueView:
        state = self.core.state
        ready = state.ready.count
        return QueueView(self.core.applied, not ready and not state.tracked, state.released_upto,
                         ready + state.unacked + len(state.dlx))

    # -- effects: this actor is the driver's ports -----------------------------------------------
    def run(self, effects: list) -> None:
        self.driver.run(effects)

    def send(self, to: str, msg: Any) -> None:
        self.runtime.send(self._address(to), msg, sender=self.me)

    def reply(self, corr: Any, reply: Any) -> None:
        if is_change(corr):
            self._answer_changes(self.changes.committed(corr))
        else:
            self.front.committed(corr, reply)

    def not_leader(self, corr: Any, leader: str | None) -> None:
        if is_change(corr):
            self._answer_changes(self.changes.not_leader(corr, leader, self.core.term))
        else:
            self.front.not_leader(corr, leader)

    def change_refused(self, corr: Any, reason: str) -> None:
        if is_change(corr):
            self._answer_changes(self.changes.refused(corr, reason))
        else:
            log.warning("quorum.member_change_refused", member=self.core.id, reason=reason)

    def leader_changed(self, leader: str | None) -> None:
        if leader == self.core.id:
            self.leader_since = time.monotonic()
        log.info("quorum.leader_changed", member=self.core.id, leader=leader, term=self.core.term)
        self.front.leader_changed(leader)
        self._serving_unannounced = leader == self.core.id
        if leader is not None and leader != self.core.id:
            self.on_leader(leader)

    def machine_effect(self, effect: Any) -> None:
        self.front.machine_effect(effect)

    def version_switched(self, index: int, old: int, new: int) -> None:
        config = self.core.state.config
        log.info("quorum.machine_version_switched", member=self.core.id, vhost=config.vhost, queue=config.name,
                 index=index, old=old, new=new)

    def machine_halted(self, index: int, reason: str) -> None:
        config = self.core.state.config
        log.error("quorum.machine_halted", member=self.core.id, vhost=config.vhost, queue=config.name,
                  index=index, reason=reason,
                  action="this member applies nothing more; upgrade this node and restart it")

    def after_flush(self, callback: Callable[[], None]) -> None:
        self.wal.after_flush(callback)

    def kick(self) -> None:
        self.wal.kick()

    def _send_out(self, e: Send) -> None:
        to = e.to if isinstance(e.to, Address) else self._address(e.to)
        self.runtime.send(to, e.msg, sender=self.me, credit=e.credit)

    def _dead_lettered(self, e: DeadLettered | DeadLetterHanded | DeadLetterWorkerStopped) -> None:
        if self.dead_letter is not None:
            self.dead_letter(e)
        elif type(e) is not DeadLetterWorkerStopped:
            log.warning("quorum.dead_letter_not_wired", member=self.core.id, kind=type(e).__name__)

    def _address(self, text: str) -> Address:
        address = self._addresses.get(text)
        if address is None:
            address = self._addresses[text] = Address.parse(text)
        return address

    def status(self) -> dict:
        core = self.core
        last, _ = core.log.last_index_term()
        config = core.state.config
        return {"id": core.id, "vhost": config.vhost, "queue": config.name, "role": core.role,
                "term": core.term, "leader": core.leader_id, "commit": core.commit,
                "applied": core.applied, "last": last, "first": core.log.first_index(),
                "written": core.log.written_index(), "snapshot_index": core.snapshot_index,
                "recovered": self.recovered, "leader_since": self.leader_since,
                "quiet": core.quiet, "asleep": self.asleep, "machine_version": core.machine_version,
                "machine_versions": [index for index, _ in core.versions[1:]], "halted": core.halted,
                "members": sorted(core.config.voters), "learners": sorted(core.config.learners),
                "match": {m: pr.match for m, pr in core.progress.items()} if core.role == LEADER else {},
                **stats(core.state)}
