"""Cluster membership: which nodes form the cluster, which are up, where every host listens.

Theory of operation. Each node host runs one Membership. It knows the cluster's members (node name
-> the node host's cluster endpoint), kept in `cluster.json` in the data dir (`SaveClusterFile`),
so a restarted node finds its peers again before anything else runs. Membership is soft state
beside the metadata Raft group: the group decides who VOTES (a join is admitted by adding a Raft
member); this core only carries who exists, who answers and where their hosts listen.

- Hello: on start, and whenever where this node's hosts listen changes, the node says Hello to
  every other member: its cluster endpoint, its hosts' tcp endpoints and the members it knows. A
  Hello from a node this one does not know is accepted only when that node lists this one among
  its members (someone admitted it); a first Hello from a peer is answered with one's own.
- Liveness: every `ping_interval_ticks` each peer gets a Ping; any message from a peer counts as
  hearing from it. A peer not heard from for `down_after_ticks` is down; the next message from it
  makes it up again (and is answered with a Hello, since it may have restarted on new ports).
- Restarts: a Hello carries its node's incarnation (a new one each start). A peer that restarted
  faster than it could be seen down is down and up again at once: every host must learn that what
  it had in flight to that node is lost, and the restarted node gets this one's Hello, so it learns
  where this node's hosts listen.
- Seen down by a peer: silence is judged on each side, so one side may see the other down while
  the other does not (a node stopped for about `down_after_ticks` wakes having heard its peers
  just before it stopped). The side that saw a peer down has let go of its consumers and what it
  had in flight, so the peer must let go too: a Hello carries how often its sender saw the
  receiver down (`downs_of_you`, counted over the sender's run), and a rise in it makes the receiver see
  the sender down and up again at once, as a restart does, unless the receiver itself saw the
  sender down in the last `down_after_ticks` (the same silence, seen on both sides). Only
  silence counts as seeing down: such a bounce is a consequence, told to nobody.
- Local hosts subscribe; they get the cluster's Directory (every other node's hosts -> endpoint)
  and NodesUp (up and down nodes) whenever either changes, and once when they subscribe.
- Joining: a JoinRequest is not decided here. `admission` returns the node to admit and the shell
  asks the metadata group to add it; `admitted` then makes it a member (file, Hello to all, the
  JoinAnswer), or `refused` answers the joiner with the reason.
- Forgetting: `forget(node)` drops a member for good (warrenctl forget_cluster_node).

Time is ticks (the shell's `tick_ms` each). Addresses are opaque: `address_of(node)` names a node
host's cluster actor. Left out: gossip of membership changes beyond Hello (the Raft group is the
authority on who votes), and detecting partitions as anything other than "not heard from".
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Hashable

from actors.placement import NODE_KIND, host_of
from actors.messages.cluster import Directory, Hello, JoinAnswer, JoinRequest, NodesUp, Ping, Pong
from effects import Effect, Log, SaveClusterFile, Send

ping_interval_ticks_default = 10   # 1 s at 100 ms ticks
down_after_ticks_default = 50      # 5 s without a word


def liveness_ticks(down_after_ms: int, tick_ms: int) -> dict[str, int]:
    """Membership's `down_after_ticks` and `ping_interval_ticks` for peers counted down after
    `down_after_ms` of silence: five pings in that time at least, and at most one a second (the
    default's 5 s is 50 ticks of 100 ms and a ping every 10)."""
    down = max(2, -(-down_after_ms // tick_ms))
    return {"down_after_ticks": down, "ping_interval_ticks": max(1, min(ping_interval_ticks_default, down // 5))}


@dataclass
class Peer:
    endpoint: str
    hosts: dict[str, str] = field(default_factory=dict)
    heard_at: int | None = None  # tick of the last message; None: never since this node started
    up: bool = False
    incarnation: int | None = None  # from its last Hello
    downs: int = 0  # how often its silence made this node see it down (told in our Hellos)
    down_at: int | None = None  # the tick of the last of those
    downs_of_me: int = 0  # how often it saw this node down, as its last Hello said


class Membership:
    def __init__(self, me: str, endpoint: str, members: dict[str, str], *,
                 address_of: Callable[[str], Hashable], ping_interval_ticks: int = ping_interval_ticks_default,
                 down_after_ticks: int = down_after_ticks_default, incarnation: int = 0) -> None:
        assert down_after_ticks > ping_interval_ticks > 0
        self.me = me
        self.incarnation = incarnation
        self.endpoint = endpoint
        self.hosts: dict[str, str] = {}
        self.peers: dict[str, Peer] = {n: Peer(e) for n, e in members.items() if n != me}
        self.address_of = address_of
        self.ping_interval_ticks = ping_interval_ticks
        self.down_after_ticks = down_after_ticks
        self.now = 0
        self._ping_seq = 0
        self._subscribers: list[Hashable] = []

    # -- views ------------------------------------------------------------------------------------

    def members(self) -> dict[str, str]:
        return {self.me: self.endpoint, **{n: p.endpoint for n, p in self.peers.items()}}

    def up(self) -> list[str]:
        return sorted([self.me] + [n for n, p in self.peers.items() if p.up])

    def down(self) -> list[str]:
        return sorted(n for n, p in self.peers.items() if not p.up)

    def directory(self) -> dict[str, str]:
        """Every other node's hosts -> tcp endpoint (their node hosts included)."""
        out: dict[str, str] = {}
        for peer in self.peers.values():
            out.update(peer.hosts)
        return out

    def cluster_file(self) -> bytes:
        return json.dumps({"node": self.me, "members": self.members()}, sort_keys=True).encode()

    # -- inputs -----------------------------------------------------------------------------------

    def start(self) -> list[Effect]:
        out: list[Effect] = [Log("cluster.starting", fields=(("node", self.me), ("members", sorted(self.members()))))]
        out += self._hello_all()
        return out

    def subscribe(self, subscriber: Hashable) -> list[Effect]:
        if subscriber not in self._subscribers:
            self._subscribers.append(subscriber)
        return [Send(subscriber, Directory(self.directory())), Send(subscriber, NodesUp(self.up(), self.down()))]

    def host_listening(self, host: str, endpoint: str) -> list[Effect]:
        """A host of this node bound its tcp mailbox: the peers must learn it."""
        if self.hosts.get(host) == endpoint:
            return []
        self.hosts[host] = endpoint
        return self._hello_all()

    def tick(self) -> list[Effect]:
        self.now += 1
        out: list[Effect] = []
        changed = False
        for node, peer in self.peers.items():
            if peer.up and peer.heard_at is not None and self.now - peer.heard_at >= self.down_after_ticks:
                peer.up = False
                peer.downs += 1
                peer.down_at = self.now
                changed = True
                out.append(Log("cluster.node_down", "warning",
                               (("node", node), ("silent_ticks", self.now - peer.heard_at))))
        if self.now % self.ping_interval_ticks == 0:
            self._ping_seq += 1
            out += [Send(self.address_of(n), Ping(self.me, self._ping_seq)) for n in self.peers]
        if changed:
            out += self._publish_up()
        return out

    def receive(self, msg: Hello | Ping | Pong) -> list[Effect]:
        """A message from a peer's node host."""
        kind = type(msg)
        if kind is Hello:
            return self._hello(msg)
        peer = self.peers.get(msg.node)
        if peer is None:
            return [Log("cluster.unknown_peer", "warning", (("node", msg.node), ("message", kind.__name__)))]
        out = self._heard(msg.node, peer)
        if kind is Ping:
            out.append(Send(self.address_of(msg.node), Pong(self.me, msg.seq)))
        return out

    # -- joining and forgetting -------------------------------------------------------------------

    def admission(self, request: JoinRequest) -> tuple[str, str] | None:
        """(node, endpoint) to admit, or None when it is already a member at that endpoint."""
        if request.node == self.me or self.peers.get(request.node, Peer("")).endpoint == request.endpoint:
            return None
        return request.node, request.endpoint

    def admitted(self, node: str, endpoint: str, joiner: Hashable) -> list[Effect]:
        """The metadata group added `node`: it is a member; tell it and everyone."""
        self.peers[node] = Peer(endpoint)
        return [SaveClusterFile(self.cluster_file()),
                Log("cluster.node_joined", fields=(("node", node), ("endpoint", endpoint))),
                Send(joiner, JoinAnswer(True, "", self.members())), *self._hello_all(), *self._publish_up()]

    def refused(self, reason: str, joiner: Hashable) -> list[Effect]:
        return [Send(joiner, JoinAnswer(False, reason, self.members()))]

    def joined(self, answer: JoinAnswer) -> list[Effect]:
        """This node's JoinRequest was admitted: the cluster's members are now ours."""
        assert answer.admitted
        for node, endpoint in answer.members.items():
            if node != self.me and node not in self.peers:
                self.peers[node] = Peer(endpoint)
        return [SaveClusterFile(self.cluster_file()), *self._hello_all(), *self._publish_up()]

    def forget(self, node: str) -> list[Effect]:
        if self.peers.pop(node, None) is None:
            return []
        return [SaveClusterFile(self.cluster_file()), Log("cluster.node_forgotten", fields=(("node", node),)),
                *self._publish_directory(), *self._publish_up()]

    # -- internals --------------------------------------------------------------------------------

    def _hello(self, msg: Hello) -> list[Effect]:
        out: list[Effect] = []
        peer = self.peers.get(msg.node)
        if peer is None:
            if self.me not in msg.members:
                return [Log("cluster.hello_from_stranger", "warning", (("node", msg.node),
                                                                      ("endpoint", msg.endpoint)))]
            peer = self.peers[msg.node] = Peer(msg.endpoint)
            out += [SaveClusterFile(self.cluster_file()),
                    Log("cluster.node_joined", fields=(("node", msg.node), ("endpoint", msg.endpoint)))]
        endpoints = {**msg.hosts, host_of(msg.node, NODE_KIND): msg.endpoint}
        restarted = peer.incarnation is not None and msg.incarnation != peer.incarnation
        if restarted and peer.up:
            peer.up = False  # restarted before its silence was noticed: down, then up below
            out += [Log("cluster.node_restarted", "warning", (("node", msg.node),)), *self._publish_up()]
        elif (msg.downs_of_you > peer.downs_of_me and peer.up and peer.incarnation is not None
              and (peer.down_at is None or self.now - peer.down_at > self.down_after_ticks)):
            peer.up = False  # it saw this node down and let go of what this node had there: down, then up below
            out += [Log("cluster.seen_down_by_peer", "warning", (("node", msg.node),)), *self._publish_up()]
        peer.incarnation = msg.incarnation
        peer.downs_of_me = msg.downs_of_you
        moved = peer.endpoint != msg.endpoint
        if moved:
            peer.endpoint = msg.endpoint
            out.append(SaveClusterFile(self.cluster_file()))
        first = peer.heard_at is None or not peer.up
        out += self._heard(msg.node, peer, answered=True)
        if endpoints != peer.hosts:
            peer.hosts = endpoints
            out += self._publish_directory()
        if first:
            out.append(Send(self.address_of(msg.node), self._my_hello(msg.node)))
        return out

    def _heard(self, node: str, peer: Peer, answered: bool = False) -> list[Effect]:
        """Any message from `node`: it is alive. Back from down: it may have new ports - say Hello."""
        peer.heard_at = self.now
        if peer.up:
            return []
        peer.up = True
        out: list[Effect] = [Log("cluster.node_up", fields=(("node", node),)), *self._publish_up()]
        if not answered:
            out.append(Send(self.address_of(node), self._my_hello(node)))
        return out

    def _my_hello(self, to: str) -> Hello:
        return Hello(self.me, self.endpoint, dict(self.hosts), sorted(self.members()), self.incarnation,
                     self.peers[to].downs)

    def _hello_all(self) -> list[Effect]:
        return [Send(self.address_of(n), self._my_hello(n)) for n in self.peers]

    def _publish_directory(self) -> list[Effect]:
        directory = Directory(self.directory())
        return [Send(s, directory) for s in self._subscribers]

    def _publish_up(self) -> list[Effect]:
        notice = NodesUp(self.up(), self.down())
        return [Send(s, notice) for s in self._subscribers]

