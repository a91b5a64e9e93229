"""The cluster's connection and channel counts as one connection host keeps them (tracking.py)."""
from actors.messages.node import TrackedCounts
from actors.reader.tracking import Tracking


def test_local_counts_and_the_others_last_word_add_up():
    t = Tracking("n1@h:conn0")
    t.opened("/", "bob")
    t.opened("/", "bob")
    t.channel_opened("bob")
    t.heard(TrackedCounts("n2@h:conn1", {"/": 3}, {"bob": 1}, {"bob": 4}))
    assert (t.vhost_connections("/"), t.user_connections("bob"), t.user_channels("bob")) == (5, 3, 5)
    t.heard(TrackedCounts("n2@h:conn1", {"/": 1}, {}, {}))  # its last word replaces the one before
    assert (t.vhost_connections("/"), t.user_connections("bob"), t.user_channels("bob")) == (3, 2, 1)
    t.closed("/", "bob")
    t.channel_closed("bob")
    assert (t.vhost_connections("/"), t.user_channels("bob")) == (2, 0)


def test_only_tracked_keys_are_told_and_only_changes_to_them_count():
    t = Tracking("n1@h:conn0")
    t.opened("/", "bob")
    assert not t.changed  # nothing has a limit: nobody needs to hear
    t.track(frozenset({"/"}), frozenset({"alice"}))
    assert t.changed  # the tracked set changed: the others need this host's counts of it
    t.changed = False
    t.opened("other", "carol")
    assert not t.changed
    t.opened("/", "carol")
    t.channel_opened("alice")
    assert t.changed
    assert t.counts() == TrackedCounts("n1@h:conn0", {"/": 2}, {}, {"alice": 1})
    assert t.counts(ask=True).ask


def test_a_down_nodes_hosts_are_forgotten():
    t = Tracking("n1@h:conn0")
    t.heard(TrackedCounts("n2@h:conn0", {"/": 1}, {"bob": 1}, {}))
    t.heard(TrackedCounts("n3@h:conn0", {"/": 1}, {}, {}))
    t.nodes_down(frozenset({"n2@h"}))
    assert (t.vhost_connections("/"), t.user_connections("bob")) == (1, 0)
