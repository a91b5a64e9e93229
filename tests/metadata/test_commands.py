"""The registry's command set as a deterministic state machine: the same command log gives the same
results, change records and state on every copy (what issue 11 replicates through Raft), a refused
command changes nothing, and the proposer's choices (a server-named queue's name) travel in the
command."""
import random

from hypothesis import given, settings, strategies as st

from metadata import Registry
from metadata.admin_errors import AdminError
from metadata.changes import QueueCreated
from metadata.commands import (
    AddBinding, AddUser, AddVhost, ChangePassword, ClearPermissions, ClearPolicy, PutExchange, PutQueue, RemoveBinding,
    RemoveExchange, RemoveOwnedQueues, RemoveQueue, RemoveUser, RemoveVhost, SetPermissions, SetPolicy, SetUserTags,
)
from wire.errors import AmqpError

VHOSTS = st.sampled_from(["/", "v1"])
QUEUES = st.sampled_from(["q1", "q2", "amq.gen-x"])
EXCHANGES = st.sampled_from(["e1", "e2", "amq.topic", ""])
USERS = st.sampled_from(["bob", "amy"])
OWNERS = st.sampled_from([None, "c1", "c2"])
DESTINATIONS = st.sampled_from([("queue", "q1"), ("queue", "q2"), ("exchange", "e1")])
SOURCES = st.sampled_from(["e1", "e2", ""])
KEYS = st.sampled_from(["", "#"])

COMMANDS = st.one_of(
    st.builds(PutExchange, VHOSTS, EXCHANGES, st.sampled_from(["direct", "topic", "fanout", "bogus"]),
              auto_delete=st.booleans()),
    st.builds(RemoveExchange, VHOSTS, EXCHANGES, if_unused=st.booleans()),
    st.builds(PutQueue, VHOSTS, QUEUES, durable=st.booleans(), exclusive=st.booleans(), owner=OWNERS,
              server_named=st.booleans()),
    st.builds(RemoveQueue, VHOSTS, QUEUES, OWNERS),
    *(st.builds(lambda dest, source, key, owner, cls=cls: cls("/", *dest, source, key, owner=owner),
                DESTINATIONS, SOURCES, KEYS, OWNERS) for cls in (AddBinding, RemoveBinding)),
    st.builds(RemoveOwnedQueues, st.sampled_from(["c1", "c2"])),
    st.builds(AddVhost, VHOSTS), st.builds(RemoveVhost, VHOSTS),
    st.builds(AddUser, USERS, st.sampled_from(["h1", "h2"])), st.builds(RemoveUser, USERS),
    st.builds(ChangePassword, USERS, st.just("h3")), st.builds(SetUserTags, USERS, st.just(("monitoring",))),
    st.builds(SetPermissions, USERS, VHOSTS, st.sampled_from([".*", "("]), st.just(".*"), st.just("")),
    st.builds(ClearPermissions, USERS, VHOSTS),
    st.builds(SetPolicy, VHOSTS, st.just("p"), st.just("^q"), st.sampled_from([{"max-length": 1}, {"bogus": 1}])),
    st.builds(ClearPolicy, VHOSTS, st.just("p")),
)


# a start state where most commands have something to act on
SETUP = [AddVhost("v1"), PutExchange("/", "e1", "topic", auto_delete=True), PutExchange("/", "e2", "fanout"),
         PutQueue("/", "q1"), PutQueue("/", "q2", exclusive=True, owner="c1"), AddBinding("/", "queue", "q1", "e1", "#"),
         AddBinding("/", "queue", "q2", "e2", owner="c1"), AddBinding("/", "exchange", "e1", "e2"), AddUser("bob", "h0"),
         SetPermissions("bob", "v1", ".*", ".*", ".*"), SetPolicy("v1", "p", ".*", {"max-length": 2})]


@settings(max_examples=150, deadline=None)
@given(st.lists(COMMANDS, max_size=40))
def test_the_same_command_log_gives_the_same_results_and_records_on_every_copy(log):
    # the copies differ in what is not the machine's: one has an rng for naming, the other none
    a, b = Registry(random.Random(1)), Registry()
    for cmd in SETUP + log:
        result_a, changes_a = a.apply_command(cmd)
        result_b, changes_b = b.apply_command(cmd)
        assert (result_a, changes_a) == (result_b, changes_b), cmd
        if isinstance(result_a, (AmqpError, AdminError)):
            assert changes_a == [], f"a refused command changed something: {cmd}"
    assert a.snapshot() == b.snapshot()


def test_a_server_named_queue_is_named_by_the_proposer():
    r = Registry(random.Random(3))
    name = r.fresh_queue_name("/")
    assert name.startswith("amq.gen-") and len(name) == 30
    assert r.apply_command(PutQueue("/", name))[0].text.startswith("ACCESS_REFUSED - queue name 'amq.gen-")
    rec, changes = r.apply_command(PutQueue("/", name, server_named=True))
    assert rec.created and changes == [QueueCreated("/", name, False, None, False, {})]
    assert r.fresh_queue_name("/") != name


def test_names_without_an_rng_are_deterministic_and_skip_taken_ones():
    first = Registry().fresh_queue_name("/")
    r = Registry()
    r.apply_command(PutQueue("/", first, server_named=True))
    assert Registry().fresh_queue_name("/") == first and r.fresh_queue_name("/") != first
