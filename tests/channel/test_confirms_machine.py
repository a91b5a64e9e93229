"""ConfirmTracker against a tiny model: every seq is reported exactly once, as an ack unless some
queue refused it or vanished abnormally, and a multiple ack never covers a nack not yet sent."""
from __future__ import annotations

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from actors.channel.confirms import ConfirmTracker

QUEUES = ("a", "b", "c")


class ConfirmMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tracker = ConfirmTracker()
        self.routes: dict[int, set[str]] = {}       # seq -> queues still to answer
        self.sent_to: dict[str, list[int]] = {q: [] for q in QUEUES}
        self.bad: set[int] = set()
        self.reported: dict[int, bool] = {}          # seq -> acked?

    @rule(queues=st.sets(st.sampled_from(QUEUES)))
    def publish(self, queues):
        seq = self.tracker.publish(sorted(queues))
        self.routes[seq] = set(queues)
        for q in queues:
            self.sent_to[q].append(seq)

    def _answer(self, q: str, seqs: list[int], bad: bool) -> None:
        for seq in seqs:
            self.routes[seq].discard(q)
            if bad:
                self.bad.add(seq)
        self.sent_to[q] = [s for s in self.sent_to[q] if s not in seqs]

    @precondition(lambda self: any(self.sent_to.values()))
    @rule(data=st.data())
    def confirm(self, data):
        q = data.draw(st.sampled_from([q for q in QUEUES if self.sent_to[q]]))
        upto = data.draw(st.sampled_from(self.sent_to[q]))
        self.tracker.confirmed(q, upto)
        self._answer(q, [s for s in self.sent_to[q] if s <= upto], bad=False)

    @precondition(lambda self: any(self.sent_to.values()))
    @rule(data=st.data())
    def refuse(self, data):
        q = data.draw(st.sampled_from([q for q in QUEUES if self.sent_to[q]]))
        seqs = data.draw(st.lists(st.sampled_from(self.sent_to[q]), min_size=1, unique=True))
        self.tracker.refused(q, seqs)
        self._answer(q, seqs, bad=True)

    @rule(q=st.sampled_from(QUEUES), abnormal=st.booleans())
    def queue_gone(self, q, abnormal):
        self.tracker.queue_gone(q, abnormal=abnormal)
        self._answer(q, list(self.sent_to[q]), bad=abnormal)

    @rule()
    def take(self):
        outstanding_nacks = {s for s, left in self.routes.items() if not left and s in self.bad
                             and s not in self.reported}
        for ack, tag, multiple in self.tracker.take():
            if multiple:
                assert ack, "nacks are never coalesced"
                covered = [s for s in self.routes if s <= tag and s not in self.reported]
                assert not (set(covered) & outstanding_nacks), "a multiple ack covers an unsent nack"
                for s in covered:
                    assert not self.routes[s], f"seq {s} acked before every queue answered"
                    self.reported[s] = True
            else:
                assert tag not in self.reported, f"seq {tag} reported twice"
                assert not self.routes[tag]
                self.reported[tag] = ack
                outstanding_nacks.discard(tag)

    @invariant()
    def reports_are_right(self):
        for seq, acked in self.reported.items():
            assert acked == (seq not in self.bad), f"seq {seq}: acked={acked}, refused={seq in self.bad}"
        assert len(self.tracker) == sum(1 for left in self.routes.values() if left)

    def teardown(self):
        self.take()
        assert set(self.reported) == {s for s, left in self.routes.items() if not left}


ConfirmMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
TestConfirmTracker = ConfirmMachine.TestCase
