"""The credit ledger: exact grants, deferral while blocked, and a state machine against a model."""
from __future__ import annotations

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from flow.credit import CreditLedger
from flow.state import FlowState


def test_sender_blocks_when_credit_reaches_zero_and_unblocks_on_grant() -> None:
    ledger = CreditLedger(initial=4, more_after=2)
    assert [ledger.sent("q") for _ in range(4)] == [False, False, False, True]
    assert ledger.blocked() and ledger.blocked_links() == ["q"]
    assert ledger.bumped("q", 2) is True
    assert not ledger.blocked() and ledger.credit("q") == 2


def test_bumped_reports_unblocked_only_when_every_link_has_credit() -> None:
    ledger = CreditLedger(initial=2, more_after=1)
    ledger.sent("a", 2)
    ledger.sent("b", 3)
    assert ledger.bumped("a", 1) is False  # still blocked on b
    assert ledger.bumped("b", 1) is False  # b at 0: still blocked
    assert ledger.bumped("b", 1) is True
    assert ledger.bumped("b", 1) is False  # was not blocked


def test_receiver_grants_in_units_of_more_after() -> None:
    ledger = CreditLedger(initial=400, more_after=200)
    assert ledger.processed("ch", 199) == []
    assert ledger.processed("ch", 1) == [("ch", 200)]
    assert ledger.processed("ch", 450) == [("ch", 400)]
    assert ledger.owed() == [("ch", 50)]


def test_grants_are_deferred_while_blocked_and_released_on_unblock() -> None:
    queue = CreditLedger(initial=400, more_after=200)
    queue.sent("store", 400)
    assert queue.processed("ch", 200) == []
    assert queue.processed("ch2", 400) == []
    assert queue.release_deferred() == []  # still blocked
    assert queue.bumped("store", 200) is True
    assert sorted(queue.release_deferred()) == [("ch", 200), ("ch2", 400)]
    assert queue.release_deferred() == []


def test_forget_drops_both_directions() -> None:
    ledger = CreditLedger(initial=2, more_after=1)
    ledger.sent("peer", 2)
    ledger.processed("peer", 1)
    ledger.forget("peer")
    assert not ledger.blocked() and ledger.owed() == [] and ledger.credit("peer") == 2


def test_blocking_propagates_up_a_chain_and_releases_down_it() -> None:
    """reader -> channel -> queue -> store: the store stops granting, the reader ends up blocked;
    when the store grants again, the deferred grants travel back up and the reader reads again."""
    chain = [CreditLedger(initial=4, more_after=2) for _ in range(3)]  # reader, channel, queue
    inbox = [0, 0, 0, 0]  # messages waiting at channel, queue, store (index i+1 gets from i)

    def credit_arrives(i: int, n: int) -> None:
        if chain[i].bumped("down", n):
            for _link, m in chain[i].release_deferred():
                if i > 0:
                    credit_arrives(i - 1, m)

    def step() -> None:
        for i in (2, 1):  # channel and queue forward what they have while they have credit
            while inbox[i] and not chain[i].blocked():
                inbox[i] -= 1
                chain[i].sent("down")
                inbox[i + 1] += 1
                for _link, n in chain[i].processed("up"):
                    credit_arrives(i - 1, n)

    for _ in range(30):  # the reader reads while it may; the store never processes
        if not chain[0].blocked():
            chain[0].sent("down")
            inbox[1] += 1
        step()
    assert [ledger.blocked() for ledger in chain] == [True, True, True]
    assert inbox[3] == 4  # the store holds exactly the queue's initial credit

    inbox[3] = 0
    credit_arrives(2, 4)  # the store processed everything and granted
    step()
    assert not chain[0].blocked()


batch_max = 5


class CreditLink(RuleBasedStateMachine):
    """One link sender -> receiver, the receiver itself sometimes blocked downstream.

    Model: `inflight` messages not yet processed, `grants` in flight back. The sender respects
    `blocked()` between batches of at most `batch_max` (the documented overshoot)."""

    def __init__(self) -> None:
        super().__init__()
        self.more_after = 3
        self.sender = CreditLedger(initial=7, more_after=self.more_after)
        self.receiver = CreditLedger(initial=7, more_after=self.more_after)
        self.inflight = 0
        self.grants: list[int] = []
        self.sent_total = self.processed_total = self.granted_total = self.delivered_total = 0

    @precondition(lambda self: not self.sender.blocked())
    @rule(n=st.integers(1, batch_max))
    def send(self, n: int) -> None:
        self.sender.sent("rx", n)
        self.inflight += n
        self.sent_total += n

    @precondition(lambda self: self.inflight > 0)
    @rule(data=st.data())
    def process(self, data) -> None:
        n = data.draw(st.integers(1, self.inflight))
        self.inflight -= n
        self.processed_total += n
        self._grant(self.receiver.processed("tx", n))

    @precondition(lambda self: bool(self.grants))
    @rule()
    def deliver_grant(self) -> None:
        n = self.grants.pop(0)
        self.delivered_total += n
        self.sender.bumped("rx", n)

    @rule()
    def receiver_blocked_downstream(self) -> None:
        self.receiver.sent("store", self.receiver.credit("store"))

    @precondition(lambda self: self.receiver.blocked())
    @rule()
    def receiver_unblocked(self) -> None:
        assert self.receiver.bumped("store", 7) is True
        self._grant(self.receiver.release_deferred())

    def _grant(self, grants) -> None:
        for link, n in grants:
            assert link == "tx" and n % self.more_after == 0
            assert not self.receiver.blocked()
            self.grants.append(n)
            self.granted_total += n

    @invariant()
    def credit_is_conserved(self) -> None:
        assert self.sender.credit("rx") == 7 - self.sent_total + self.delivered_total
        owed = dict(self.receiver.owed()).get("tx", 0)
        assert self.processed_total == self.granted_total + owed

    @invariant()
    def overshoot_is_at_most_one_batch(self) -> None:
        assert self.sender.credit("rx") > -batch_max

    def teardown(self) -> None:
        """Liveness: once the receiver is unblocked and everything is processed and delivered,
        all but a partial unit is granted back and the sender is not blocked."""
        if self.receiver.blocked():
            self.receiver_unblocked()
        if self.inflight:
            self.processed_total += self.inflight
            self._grant(self.receiver.processed("tx", self.inflight))
            self.inflight = 0
        while self.grants:
            self.deliver_grant()
        self.credit_is_conserved()
        assert self.sender.credit("rx") > 7 - self.more_after
        assert not self.sender.blocked()


TestCreditLink = CreditLink.TestCase
TestCreditLink.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)


def test_flow_state_running_flow_blocked() -> None:
    s = FlowState(ticks_per_second=1000)
    assert s.state(0) == "running"
    s = s.observe(True, 10)
    assert s.state(10) == "flow" and s.changed_at == 10
    s = s.observe(False, 500)
    assert s.state(1499) == "flow"  # blocked within the last second
    assert s.state(1500) == "running"
    s = s.alarm(True, 1600)
    assert s.state(1600) == "blocked"
    assert s.as_dict(1700)["state"] == "blocked" and s.as_dict(1700)["last_blocked_at"] == 500
