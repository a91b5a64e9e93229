"""What a node that cannot finish its start says when it gives up (actors/runtime/node_process.py):
the hosts still waiting, and from the node host's cluster view what they wait for."""
from __future__ import annotations

from actors.runtime.node_process import cluster_cause

ME, N1, N2 = "n3@h", "n1@h", "n2@h"


def view(**kw) -> dict:
    return {"node": ME, "members": [N1, N2, ME], "running": [ME], "down": [N1, N2],
            "metadata_leader": None, "metadata_voters": [N1, N2, ME], **kw}


def test_a_node_that_heard_from_none_of_its_peers_names_them() -> None:
    assert cluster_cause(view()) == (
        ": it has heard from none of its peers (n1@h, n2@h); are they running, and is their cluster "
        "port reachable from here with the same cookie?")


def test_a_node_that_hears_a_minority_names_the_leaderless_metadata_group() -> None:
    assert cluster_cause(view(running=[N1, ME], down=[N2])) == (
        ": the metadata group has no leader (voters ['n1@h', 'n2@h', 'n3@h'], down ['n2@h'])")


def test_a_node_with_a_leader_adds_nothing() -> None:
    assert cluster_cause(view(running=[N1, N2, ME], down=[], metadata_leader=N1)) == ""
    assert cluster_cause({"node": ME, "members": [ME], "down": [], "metadata_leader": ME}) == ""
