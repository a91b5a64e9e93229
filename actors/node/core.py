"""NodeCore: one node's decisions about the cluster's metadata, as a pure core.

Theory of operation. The metadata (vhosts, users, permissions, policies, exchanges, queues,
bindings: the registry, metadata/) is the state machine of one Raft group over every node of the
cluster (RabbitMQ 4.0's Khepri design). Each node's member applies every committed command to the
node's own copy, `registry`, which this core reads and never writes. Its inputs are typed messages
(actors/messages/node.py: the channels' metadata calls, `Subscribe` from the hosts' registry
replicas, `AutoDeleteQueue` from queues, `ConnectionClosed` from readers, the `Reply`s to its own
calls, `Undelivered`), warrenctl's admin asks, `applied` for every entry its member applies, timers
and the cluster's view of which nodes are up; its outputs are effects (effects/): `Send`, `Log`,
`ProposeCommand`, `StartTimer`/`CancelTimer`, `AnswerAdmin`.

- Order. Each request is an operation: a generator (a continuation) that yields steps,
  `Apply(cmd)` (propose one of the registry machine's commands, metadata/commands.py, and resume
  with its (result, changes) once THIS node's member applied it, so the answer never runs ahead of
  this node's own copy) and `Ask(to, request, ...)` (a call to a queue or a queue host, resumed by
  the `Reply` with its rid, or by the step's error when the target does not exist or its node is
  down; a step that waits for a target missing for now, as a redeclare of a durable classic queue
  whose host restarts, asks again every `RETRY_MS`, and once more when the restarted host has
  made its queues (the first ask may have died with its predecessor), until the call's time-out,
  as RabbitMQ retries a queue whose process is being restarted). Operations that touch different
  queues and exchanges from different channels run side by side; those that touch the same ones,
  and a channel's requests, keep their arrival order; admin asks and clean-ups run alone
  (operations.py). Requests of other nodes interleave in the log;
  each command validates against the state it is applied to.
- Time-outs. A proposal not applied within `timeout_ms` (no majority, say) ends its operation with
  the step's `timeout_error` (RabbitMQ 4.0's texts: a 541 that closes the connection) and nothing
  else happens; should the command still commit later, its consequences on this node are carried
  out then (`_consequences`), so nothing is left half-done. A clean-up that must happen some time
  (a closed connection's exclusive queues, a lost node's transient queues) goes to the back of the
  queue instead (`RETRY_LATER`), so requests behind it get their turn and their own time-outs.
- Every applied entry, whoever proposed it, goes to this node's subscribers (`MetadataChanged`, in
  log order, on the same pipe as the replies, so a channel that got declare-ok routes with a replica
  that has the queue) and has its consequences for this node's hosts: a queue homed here that a
  command created gets its actor, one removed loses it (`Dispose`, fire and forget), a quorum
  queue with a member here gets `StartMember` when created and `DeleteMember` when removed (both
  fire and forget, from this one sender in log order, so a start cannot outlive the delete), a policy
  change reaches the queues homed here (`ApplyPolicy`) and, from the node it went through, the
  leaders of the quorum queues it changes (every node remembers what each was told), a deleted
  vhost or user closes this node's connections on it or of it (320, RabbitMQ's texts), a
  forgotten node leaves the membership.
- Placement. A classic queue is homed on the declaring node (RabbitMQ's client-local rule), on one
  of its queue hosts by a hash of its name (actors/placement.py); its record keeps that host.
- Start. The node serves (answers `Subscribe`, so its hosts start) only after its start-up
  operations are applied here: `RemoveNodeTransients(self)` (a restarted node's transient queues
  are gone) and, for the node that starts a new cluster, the default user or the records of a
  definitions file written before the metadata was replicated. Having applied them means this
  node's copy holds everything committed before them. A start-up proposal that times out is made
  again: the node cannot serve without the group.
- Nodes going down. A node the cluster sees down loses its transient queues (any node may propose
  it; the command is idempotent), and calls in flight to its hosts end with their error.
- Admin asks take their turn in the same order; a change is answered once every local replica
  confirmed (`Sync`) that it applied it. Passwords are hashed here with a salt from the injected
  `salt` source; only hashes enter commands. The admin operations themselves are kept outside
  the core, each a generator of the same steps over its public names (`queue_target`,
  `queue_declare`, `delete_queue`, `hash_password`, ...): admin.py's on vhosts, policies, queues,
  exchanges and bindings (its table `ADMIN` names them all), access_admin.py's on users,
  permissions, limits and definitions, quorum_membership.py's on quorum queue members.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from actors.messages.calls import Reply
from actors.messages.cluster import ForgetNode
from actors.messages.quorum import HostChannelsGone, NotQueueLeader
from actors.node import quorum_membership as qm
from actors.node import quorum_queues as qq
from actors.node import streams as sq
from actors.node.admin import ADMIN
from actors.node.operations import Operations, Origin
from actors.node.steps import MISSING, RETRY_LATER, Apply, Ask, AskAll, Op, command, home_down, queue_down
from actors.messages.node import (
    ApplyPolicy, AutoDeleteQueue, BindExchange, BindQueue, CloseConnections, ConnectionClosed,
    DeclareExchange, DeclareQueue, DeleteExchange, DeleteQueue, Dispose, MetadataChanged, QueueDeclared,
    QueueHostRestarted, QueueStats, Subscribe, Sync, UnbindExchange, UnbindQueue,
)
from actors.messages.runtime import Undelivered
from actors.placement import (CLUSTER_NAME, NODE_KIND, QUEUE_ROUTER_NAME, ROUTER_NAME, host_of, member_hosts,
                              node_of, queue_address, queue_kind, queue_manager, route_host)
from actors.runtime.address import Address
from effects import AnswerAdmin, Effect, Log, Send, StartTimer
from metadata import names, passwords, quorum, stream
from metadata.admin_errors import EX_SOFTWARE, AdminError
from metadata.changes import PolicyCleared, PolicySet, QueueCreated, QueueDeleted, UserDeleted, VhostDeleted
from metadata.commands import (
    AddBinding, AddUser, Command, ForgetNodeQueues, LoadDefinitions, PutExchange, PutQueue, RemoveBinding,
    RemoveExchange, RemoveNodeTransients, RemoveOwnedQueues, RemoveQueue, RemoveVhost, SetPermissions,
)
from metadata.records import EXCHANGE, QUEUE, QueueRecord
from metadata.registry import Registry
from metadata import texts
from wire.errors import CONNECTION_FORCED, INTERNAL_ERROR, NOT_FOUND, AmqpError

CONNECTION_ADMIN_NAME = "conn-admin"  # the actor in each connection host that closes connections
TIMEOUT_MS_DEFAULT = 30_000  # RabbitMQ's khepri_default_timeout


@dataclass(frozen=True, slots=True)
class AdminAsk:
    """An admin command from warrenctl, in the serial order with the channels' requests."""

    ask: Hashable
    op: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Startup:
    """This node's start-up operations (see the module docstring)."""

    bootstrap: bool  # this node starts a new cluster
    default_user: str = "guest"
    default_pass: str = "guest"
    imported: tuple = ()  # a definitions file's records, loaded once by the node that bootstraps


@dataclass(frozen=True, slots=True)
class HostRestarted:
    """An internal operation: connection host `host` restarted (now as `incarnation`); its
    connections' exclusive queues go, and quorum queues give back what its channels held."""

    host: str
    incarnation: int


@dataclass(frozen=True, slots=True)
class NodeDown:
    """An internal operation: `node` is down; its transient queues go."""

    node: str


class NodeCore:
    """One node's metadata decisions (the module docstring); the admin operations outside it
    reach it through its public methods and attributes."""

    def __init__(self, registry: Registry, node: str, queue_kinds: tuple[str, ...], *, salt: Callable[[int], bytes],
                 incarnation: int, timeout_ms: int = TIMEOUT_MS_DEFAULT,
                 now_ms: Callable[[], int] = lambda: 0,
                 quorum_cluster_size: int = quorum.CLUSTER_SIZE_DEFAULT,
                 reconciliation: qm.Reconciliation = qm.Reconciliation(),
                 declaring: qq.Declaring = qq.Declaring()) -> None:
        self.registry = registry
        self.node = node
        self.queue_kinds = queue_kinds  # the kinds of this node's hosts that hold classic queues
        self.timeout_ms = timeout_ms
        self._salt = salt  # n -> n random bytes (the OS's, in the shell)
        self._now_ms = now_ms  # wall-clock milliseconds (a quorum queue's creation time: x-expires)
        self.quorum_cluster_size = quorum_cluster_size  # members of a new quorum queue by default
        self.declaring = declaring  # the leader locator and equivalence checks configured
        self.serving = False
        self.down: set[str] = set()  # nodes the cluster sees down
        self.cluster: set[str] = {node}  # every node the cluster view has named, up or down
        self.cluster_now: set[str] = {node}  # the nodes the cluster view names now (forgotten ones go)
        self.reconciliation = reconciliation  # quorum queues' continuous membership reconciliation
        self._triggered = False  # a trigger's round is due (its timer has not fired yet)
        self.leaders = qq.Leaders()  # the quorum queue members seen leading
        self._redirects: dict[int, int] = {}  # rid -> times a call was refused while no member led
        self._retries: dict[int, tuple[Address, Any]] = {}  # rid -> (member, request) to send again
        self._seen_up: set[str] = set()  # nodes seen up since this one started and not lost since
        self.subscribers: dict[Address, int] = {}  # replicas, in subscription order -> their incarnation
        self._held_subscribers: list[tuple[Address, int]] = []  # subscribed before this node serves
        self._queue_hosts_seen: set[str] = set()  # queue hosts whose replica subscribed already
        self._queue_settings: dict[tuple[str, str], dict] = {}  # what each queue homed here or quorum was told
        self._syncs: dict[Hashable, tuple[set[int], Any]] = {}  # admin ask -> Syncs awaited, its result
        self._startup_left = 0
        self._out: list[Effect] = []
        self._ops = Operations(begin=lambda msg: _OPS[type(msg)](self, msg), answer=self._answer,
                               unreachable=self.unreachable, emit=self.emit,
                               incarnation=incarnation, timeout_ms=timeout_ms)
        self._calls = self._ops.calls  # rid -> (resume, its Ask): every call in flight

    # ------------------------------------------------------------------ inputs
    def start(self, startup: Startup) -> list[Effect]:
        ops: list[Any] = [RemoveNodeTransients(self.node)]
        if startup.bootstrap:
            if startup.imported:
                ops.append(LoadDefinitions(tuple(self._adopt(startup.imported))))
            else:
                ops += [AddUser(startup.default_user, self.hash_password(startup.default_pass), ("administrator",)),
                        SetPermissions(startup.default_user, "/", ".*", ".*", ".*")]
        self._startup_left = len(ops)
        for cmd in ops:
            self._ops.submit(None, _StartupOp(cmd))
        return self._flush()

    def receive(self, sender: Address, msg: Any) -> list[Effect]:
        kind = type(msg)
        if kind is Reply:
            call = self._calls.pop(msg.rid, None)
            self._redirects.pop(msg.rid, None)
            if call is not None:
                call[0](msg)
        elif kind in _OPS:
            self._ops.submit(sender, msg)
        elif kind is Subscribe:
            if self.serving:
                self._subscribe(sender, msg.incarnation)
            else:
                self._held_subscribers.append((sender, msg.incarnation))
        elif kind is NotQueueLeader:
            self._redirected(sender, msg)
        elif kind is Undelivered:
            self._undelivered(msg)
        else:
            self._out.append(Log("node.unexpected_message", "warning", (("kind", kind.__name__),)))
        return self._flush()

    def admin(self, ask: Hashable, op: str, args: dict[str, Any]) -> list[Effect]:
        """An admin command (one of ADMIN_OPS); answered later with AnswerAdmin(ask, value)."""
        self._ops.submit(None, AdminAsk(ask, op, args))
        return self._flush()

    def applied(self, origin: str, key: Hashable, cmd: Command, result: Any, changes: list) -> list[Effect]:
        """This node's member applied an entry of the log (proposed by node `origin` under `key`)."""
        if changes:
            for sub in self.subscribers:
                self._out.append(Send(sub, MetadataChanged(changes)))
        mine = origin == self.node and self._ops.waits_for(key)
        if self.serving:
            # the running declare creates its queue's actor and the running delete has disposed of it
            self._consequences(cmd, result, changes, actors_done=mine and type(cmd) in (PutQueue, RemoveQueue),
                               proposed_here=origin == self.node)
        if mine:
            self._ops.applied(key, (result, changes))
        return self._flush()

    def restored(self) -> list[Effect]:
        """This node's copy was replaced by a snapshot from the leader: the subscribers get it whole."""
        snapshot = self.registry.snapshot()
        for sub in self.subscribers:
            self._out.append(Send(sub, MetadataChanged(snapshot)))
        return self._flush()

    def timer(self, name: str) -> list[Effect]:
        if name == qm.CMR_TIMER:  # the next round is scheduled when this one ends (_answer)
            self._triggered = False
            self._ops.submit(None, qm.Reconcile())
            return self._flush()
        if name.startswith(_RETRY_TIMER):
            self._retry_call(int(name[len(_RETRY_TIMER):]))
            return self._flush()
        self._ops.timer(name)
        return self._flush()

    def nodes(self, up: Iterable[str], down: Iterable[str]) -> list[Effect]:
        """The cluster's view of which nodes are up changed. A node not heard from since this one
        started counts as down for calls, but only one seen up and then lost loses its transient
        queues: a node that has just started has not heard from anyone yet."""
        gone = set(down) & self._seen_up
        named = set(up) | set(down) | {self.node}
        if self.serving and (named != self.cluster_now or set(down) - {self.node} != self.down):
            self._trigger_reconciliation()  # a node joined, was forgotten, came up or went down
        self.cluster |= named
        self.cluster_now = named
        self._seen_up = (self._seen_up | set(up)) - set(down)
        self.down = set(down) - {self.node}
        for node in sorted(self.down):
            if node in gone:
                self._ops.submit(None, NodeDown(node))
            hosts_prefix = node + ":"
            for rid, (resume, step) in list(self._calls.items()):
                if step.to.host.startswith(hosts_prefix):
                    del self._calls[rid]
                    resume(Reply(rid, error=step.down or step.missing))
        self._ops.pump()
        return self._flush()

    def connection_hosts(self) -> list[Address]:
        """The subscribers that are connection hosts' routers (queue hosts subscribe too)."""
        return [sub for sub in self.subscribers if sub.name == ROUTER_NAME]

    # ------------------------------------------------------------------ the serial order
    def _flush(self) -> list[Effect]:
        out, self._out = self._out, []
        return out

    def _redirected(self, sender: Address, msg: NotQueueLeader) -> None:
        """A quorum queue member that does not lead refused a request (quorum_queues.py)."""
        refused = msg.refused
        rid = getattr(refused, "rid", 0)
        call = self._calls.get(rid) if rid else None
        if rid and call is None:
            return  # a call that ended meanwhile
        # a leader on a node known down or forgotten would never answer: as during an election, the
        # same member again a moment later, until it has heard of (or become) the new leader
        if msg.leader is not None and node_of(Address.parse(msg.leader).host) not in self.unreachable():
            to = self.leaders.saw(msg.leader)
            if call is not None:
                self._calls[rid] = (call[0], replace(call[1], to=to))
            if refused is not None:
                self._out.append(Send(to, refused))
        elif call is not None:  # an election runs: the same member again, a moment later
            tries = self._redirects[rid] = self._redirects.get(rid, 0) + 1
            if tries * qq.RETRY_MS > (call[1].timeout_ms or self.timeout_ms):
                del self._calls[rid], self._redirects[rid]
                call[0](Reply(rid, error=call[1].missing))
            else:
                self._retries[rid] = (sender, refused)
                self._out.append(StartTimer(f"{_RETRY_TIMER}{rid}", qq.RETRY_MS))

    def _undelivered(self, msg: Undelivered) -> None:
        """A call to an actor that does not exist: its host is restarting (a step that waits for it
        asks again, as during an election), or it is gone."""
        rid = getattr(msg.msg, "rid", None)
        call = self._calls.get(rid) if rid else None
        if call is None:
            return
        step = call[1]
        if step.absent is not None:  # asked again until it is back; the call's time-out ends it
            self._retries[rid] = (step.to, msg.msg)
            self._out.append(StartTimer(f"{_RETRY_TIMER}{rid}", qq.RETRY_MS))
            return
        del self._calls[rid]
        call[0](Reply(rid, error=step.missing))

    def _retry_call(self, rid: int) -> None:
        sender, request = self._retries.pop(rid, (None, None))
        if sender is not None and rid in self._calls:
            self._out.append(Send(sender, request))
        else:  # the call ended meanwhile (its node went down, say)
            self._redirects.pop(rid, None)

    def _answer(self, origin: Origin, msg: Any, result: Any) -> None:
        kind = type(msg)
        if kind is AdminAsk:
            self._admin_done(msg.ask, result)
        elif kind is qm.Reconcile:  # soon if it changed something, or a trigger's round is still due
            self._out += qm.schedule(self.reconciliation, triggered=result is True or self._triggered)
        elif kind is _StartupOp:
            self._startup_left -= 1
            if self._startup_left == 0:
                self._serve()
        elif hasattr(msg, "rid"):  # a call (queue auto-delete and connection close are not)
            assert origin is not None
            reply = Reply(msg.rid, error=result) if isinstance(result, AmqpError) else Reply(msg.rid, result)
            self._out.append(Send(origin, reply))

    # ------------------------------------------------------------------ serving, replicas, queue hosts
    def _serve(self) -> None:
        self.serving = True
        self._out.append(Log("node.serving", fields=(("node", self.node),)))
        self._out += qm.reconcile(self.node, self.registry.queues())
        self._out += qm.schedule(self.reconciliation, triggered=False)
        for rec in self.registry.queues():  # what the quorum queues were told before this node started
            if rec.quorum:
                self._send_policy(rec, tell=False)
        held, self._held_subscribers = self._held_subscribers, []
        for sub, incarnation in held:
            self._subscribe(sub, incarnation)

    def _subscribe(self, sender: Address, incarnation: int) -> None:
        """A replica's first subscription, a restarted host's, or one asked again after this node host
        restarted (the same incarnation as before: nothing was lost on that host)."""
        before = self.subscribers.get(sender)
        again = before == incarnation
        self.subscribers[sender] = incarnation
        self._out.append(Send(sender, MetadataChanged(self.registry.snapshot())))
        if before is not None and not again and (
                sender.name == ROUTER_NAME
                or (sender.name == QUEUE_ROUTER_NAME and Address(sender.host, ROUTER_NAME) not in self.subscribers)):
            # a connection host restarted: its connections are gone, and their exclusive queues;
            # or a host without connections (the quorum host) did: its dead-letter worker, named
            # by the replica's incarnation as a channel is, is gone
            self._ops.submit(None, HostRestarted(sender.host, incarnation))
        if sender.name != QUEUE_ROUTER_NAME or again:
            return
        host = sender.host
        if host in self._queue_hosts_seen:
            for sub in self.connection_hosts():
                self._out.append(Send(sub, QueueHostRestarted(host)))
        self._queue_hosts_seen.add(host)
        # durable queues after a node restart, all queues after a crash of that host alone
        for rec in self.registry.queues():
            if host in member_hosts(rec.home, rec.replicas):
                self._create_actor(rec, host)
                self._queue_settings.pop((rec.vhost, rec.name), None)  # the new actor knows no policy yet
                self._send_policy(rec)
        for rid, (_resume, step) in list(self._calls.items()):  # asked of its predecessor: maybe lost with it
            if step.absent is not None and step.to.host == host:
                self._out.append(Send(step.to, step.request(rid)))

    def _create_actor(self, rec: QueueRecord, host: str) -> None:
        self._out.append(Send(queue_manager(host), sq.create(rec, 0)))

    def _homed_here(self, home: str) -> bool:
        return node_of(home) == self.node

    def _here(self, rec: QueueRecord) -> str | None:
        """This node's host of the queue's actor: its home, or a replicated stream's member here."""
        host = route_host(rec.home, rec.replicas, self.node)
        return host if node_of(host) == self.node else None

    def _consequences(self, cmd: Command, result: Any, changes: list, *, actors_done: bool,
                      proposed_here: bool) -> None:
        """What an applied entry means for this node's hosts (see the module docstring)."""
        policies: set[str] = set()
        for change in changes:
            kind = type(change)
            if kind is QueueCreated:
                rec = self.registry.queue(change.vhost, change.name)
                here = None if rec is None else self._here(rec)
                if here is not None and not actors_done:
                    self._create_actor(rec, here)
                    self._send_policy(rec)
                elif rec is not None and rec.quorum and not actors_done:
                    self._send_policy(rec, tell=False)  # what the declaring node tells it
                    if self.node in rec.members:
                        # started by the declaring node too: a second start is a no-op, a missed one is not
                        self._out.append(Send(qq.manager(self.node, rec), qq.start_member(rec)(0)))
            elif kind is QueueDeleted:
                self._queue_settings.pop((change.vhost, change.name), None)
                if not actors_done:
                    self._dispose_if_homed_here(change.vhost, change.name,
                                                route_host(change.home, change.replicas, self.node))
                    if self.node in change.members:
                        # deleted by the deleting node too, but the start sent above when this node
                        # applied the record may reach the host after that: this one comes after it
                        self._out.append(Send(*qq.delete_own_member(self.node, change.home)))
            elif kind is VhostDeleted or kind is UserDeleted:  # rabbit_connection_tracking's closes
                close = (CloseConnections(change.vhost, None, CONNECTION_FORCED, f"vhost '{change.vhost}' is deleted")
                         if kind is VhostDeleted else CloseConnections(None, None, CONNECTION_FORCED,
                                                                       f"user '{change.name}' is deleted", change.name))
                for sub in self.connection_hosts():
                    self._out.append(Send(Address(sub.host, CONNECTION_ADMIN_NAME), close))
            elif kind is PolicySet or kind is PolicyCleared:
                policies.add(change.vhost)
        if policies:  # a policy change triggers quorum membership reconciliation (RabbitMQ 4.0's CMR)
            self._trigger_reconciliation()
        if type(cmd) is RemoveVhost and isinstance(result, list):  # its queues went with the vhost
            for rec in result:
                self._queue_settings.pop((rec.vhost, rec.name), None)
                self._dispose_if_homed_here(rec.vhost, rec.name, route_host(rec.home, rec.replicas, self.node))
        elif type(cmd) is ForgetNodeQueues:
            self._out.append(Send(Address(host_of(self.node, NODE_KIND), CLUSTER_NAME), ForgetNode(cmd.node)))
        for vhost in sorted(policies):
            for rec in self.registry.queues(vhost):
                if self._here(rec) is not None:  # a replicated stream: each member node tells its own
                    self._send_policy(rec)
                elif rec.quorum:  # its leader is told by the node the change went through, as
                    # rabbit_policy's policy_changed runs where the policy was set; every node
                    # remembers what it was told, so that any node can tell it the next change
                    self._send_policy(rec, tell=proposed_here)

    def _trigger_reconciliation(self) -> None:
        """A round of quorum membership reconciliation after the trigger interval (4.0's CMR)."""
        self._out += qm.schedule(self.reconciliation, triggered=True)
        self._triggered = True  # a round ending before its timer fires must not put it back later

    def _dispose_if_homed_here(self, vhost: str, name: str, home: str) -> None:
        if self._homed_here(home):
            self._out.append(Send(queue_address(home, vhost, name), Dispose(0, False, False)))

    def _send_policy(self, rec: QueueRecord, *, tell: bool = True) -> None:
        """Tell the queue its effective settings when they differ from what it was last told
        (a new queue starts from its arguments, which is what "no policy" means); `tell` False:
        only remember them (another node tells a quorum queue)."""
        policy, operator, settings = self.registry.queue_policy(rec)
        key = (rec.vhost, rec.name)
        last = self._queue_settings.get(key)
        if last is None and not (policy or operator):
            return
        if settings != last:
            self._queue_settings[key] = settings
            if tell:
                here = self._here(rec) if rec.replicas else None
                to = self.queue_target(rec) if here is None else queue_address(here, rec.vhost, rec.name)
                self._out.append(Send(to, ApplyPolicy(settings)))

    def _adopt(self, records: Iterable[Any]) -> list[Any]:
        """A definitions file's queues are homed on this node, which brings them in (its quorum queues
        get their one member here: the file is loaded by a node that starts a new cluster)."""
        out = []
        for r in records:
            if type(r) is QueueCreated and quorum.is_quorum(r.arguments):
                placed = qq.place(None, r.arguments, self.node, {self.node}, set(), self._salt, 1)
                r = replace(r, home=placed.home, members=placed.members, created_ms=self._now_ms())
            elif type(r) is QueueCreated:
                r = replace(r, home=self._home(r.vhost, r.name))
            out.append(r)
        return out

    def _home(self, vhost: str, name: str) -> str:
        return host_of(self.node, queue_kind(vhost, name, self.queue_kinds))

    # ------------------------------------------------------------------ operations
    def _startup(self, x: _StartupOp) -> Op:
        result, _ = yield Apply(x.cmd)
        return result

    def _host_restarted(self, x: HostRestarted) -> Op:
        gone = HostChannelsGone(x.host, f"{x.incarnation:x}")
        for node in sorted(self.cluster_now - self.down):
            self._out += [Send(manager, gone) for manager in qq.managers(node)]
        yield Apply(RemoveOwnedQueues(f"{x.host}:", prefix=True), RETRY_LATER)

    def _node_down(self, x: NodeDown) -> Op:
        yield Apply(RemoveNodeTransients(x.node), RETRY_LATER)

    def exchange_declare(self, x: DeclareExchange) -> Op:
        """A channel's exchange.declare (or the HTTP API's): the exchange, or the error to answer."""
        if x.passive:
            return self.registry.check_exchange(x.vhost, x.exchange)
        return (yield from command(PutExchange(x.vhost, x.exchange, x.type, x.durable, x.auto_delete,
                                               x.internal, x.arguments),
                                   texts.declare_timeout("exchange", x.exchange, x.vhost)))

    def queue_declare(self, x: DeclareQueue) -> Op:
        """A channel's queue.declare (or the HTTP API's): placed, recorded, its actor or members
        started once created; declare-ok with its counts, or the error to answer."""
        if x.passive:
            rec = self.registry.check_queue_access(x.vhost, x.queue, x.owner)
        else:
            name, server_named = x.queue, names.strip_cr_lf(x.queue) == ""
            if server_named:
                error = quorum.server_named_error(x.arguments) or stream.server_named_error(x.arguments)
                if error is not None:
                    return error
                # the channel's name, the one it checked (a clash, never seen with 128 random bits: a fresh one)
                name = (x.server_name if x.server_name and self.registry.queue(x.vhost, x.server_name) is None
                        else self.registry.fresh_queue_name(x.vhost))
            home, members, replicas = self._home(x.vhost, name), (), ()
            if stream.is_stream(x.arguments) and self.registry.queue(x.vhost, name) is None:
                home, replicas = sq.place(self.registry, x.arguments, self.node, self.cluster_now, self.down,
                                          self.queue_kinds, x.vhost, name, self._salt,
                                          self.registry.queue_policy_definition(x.vhost, name, stream.TYPE))
            if quorum.is_quorum(x.arguments) and self.registry.queue(x.vhost, name) is None:
                placed = qq.place(self.registry, x.arguments, self.node, self.cluster_now, self.down,
                                  self._salt, self.quorum_cluster_size,
                                  self.registry.queue_policy_definition(x.vhost, name, quorum.TYPE),
                                  self.declaring.leader_locator)
                home, members = placed.home, placed.members
            rec, _ = yield Apply(PutQueue(x.vhost, name, x.durable, x.exclusive, x.auto_delete, x.arguments, x.owner,
                                          server_named, home, members, self._now_ms() if members else 0,
                                          self.declaring.relaxed_checks, replicas),
                                 texts.queue_declare_timeout(name, x.vhost, self.node))
        if isinstance(rec, AmqpError):
            return rec
        down = home_down(rec)
        if rec.created and rec.quorum:
            return (yield from self._start_members(rec))
        if rec.created and rec.replicas:
            yield from sq.start_members(rec, self.unreachable(), down)
            self._send_policy(rec)
            return QueueDeclared(rec.name, 0, 0)
        if rec.created:
            yield Ask(queue_manager(rec.home), lambda rid: sq.create(rec, rid), queue_down(rec.name), down)
            self._send_policy(rec)
            return QueueDeclared(rec.name, 0, 0)
        # a durable classic queue comes back with its host: a declare while that restarts waits for it
        absent = texts.queue_operation_timeout(rec.name, rec.vhost) if rec.durable and not rec.quorum else None
        stats = yield Ask(self.queue_target(rec), QueueStats, queue_down(rec.name), down, absent)
        if not stats.ok:
            if rec.quorum:  # no leader to count them (an election, a minority): rabbit_quorum_queue:stat's 0, 0
                return QueueDeclared(rec.name, 0, 0)
            return stats.error
        return QueueDeclared(rec.name, stats.value.messages, stats.value.consumers)

    def _start_members(self, rec: QueueRecord) -> Op:
        error = yield from qq.start_members(rec, self.node, lambda: self.queue_target(rec))
        if error is not None:
            return error
        self._send_policy(rec)
        self._trigger_reconciliation()  # 4.0's queue_created trigger, on the declaring node
        return QueueDeclared(rec.name, 0, 0)

    def unreachable(self) -> set[str]:
        """The nodes a call cannot reach: those down and those forgotten (named once, no longer)."""
        return self.down | (self.cluster - self.cluster_now)

    def queue_target(self, rec: QueueRecord) -> Address:
        """Where a call to the queue goes: its actor, or the quorum queue member that leads."""
        if rec.quorum:
            return self.leaders.target(rec, self.unreachable())
        if rec.replicas:
            return sq.target(rec, self.unreachable())
        return queue_address(rec.home, rec.vhost, rec.name)

    def _queue_delete(self, x: DeleteQueue) -> Op:
        rec = self.registry.check_queue_access(x.vhost, x.queue, x.owner)
        if isinstance(rec, AmqpError):
            # deleting a queue that does not exist is not an error in RabbitMQ
            return 0 if rec.code == NOT_FOUND else rec
        return (yield from self.delete_queue(rec, x.if_unused, x.if_empty))

    def _queue_auto_delete(self, x: AutoDeleteQueue) -> Op:
        rec = self.registry.queue(x.vhost, x.name)
        if rec is None:
            return 0
        return (yield from self.delete_queue(rec, True, False))

    def delete_queue(self, rec: QueueRecord, if_unused: bool, if_empty: bool) -> Op:
        """The queue agrees (it checks if-unused / if-empty) and is gone, then the record: its count.
        A queue whose actor is missing on a live node (a crashed host's transient queue, say) has
        nothing to agree or count: its record goes. So does a quorum queue no member leads (RabbitMQ's
        force delete); its members are deleted after the record, on every member node that is up."""
        to = self.queue_target(rec)
        reply = yield Ask(to, lambda rid: Dispose(rid, if_unused, if_empty), MISSING,
                          MISSING if rec.quorum or rec.replicas else home_down(rec))
        if not reply.ok and reply.error is not MISSING:
            return reply.error
        yield Apply(RemoveQueue(rec.vhost, rec.name, rec.exclusive_owner), texts.queue_delete_timeout())
        if rec.replicas:
            yield from sq.dispose_others(rec, to, self.unreachable())
        if rec.quorum:  # RabbitMQ deletes a quorum queue with no leader too (its force delete)
            yield AskAll(tuple(Ask(qq.manager(node, rec), qq.delete_member(rec), MISSING) for node in rec.members))
            self.leaders.forget(rec)
        return reply.value if reply.ok else 0

    def _connection_closed(self, x: ConnectionClosed) -> Op:
        yield Apply(RemoveOwnedQueues(x.owner), RETRY_LATER)

    # ------------------------------------------------------------------ admin commands
    def _admin(self, a: AdminAsk) -> Op:
        return (yield from self.run_admin(a.op, a.args))

    def run_admin(self, op: str, args: dict[str, Any]) -> Op:
        """Admin operation `op` (admin.py's table) as a step of an operation running now."""
        return (yield from ADMIN[op](self, args))

    def _admin_done(self, ask: Hashable, result: Any) -> None:
        """Errors at once; anything else once every replica has applied what was published so far."""
        if isinstance(result, AdminError):
            self._out.append(AnswerAdmin(ask, {"error": result.message, "exit": result.exit_code}))
            return
        if isinstance(result, AmqpError):  # the code lets the HTTP API answer as RabbitMQ's does
            self._out.append(AnswerAdmin(ask, {"error": result.detail, "exit": EX_SOFTWARE, "code": result.code}))
            return
        rids: set[int] = set()
        self._syncs[ask] = (rids, result)
        for sub in self.subscribers:
            rid = self._ops.call(lambda reply, ask=ask: self._synced(ask, reply.rid),
                                 Ask(sub, Sync, AmqpError(NOT_FOUND, f"replica {sub} is down")))
            rids.add(rid)
            self._out.append(Send(sub, Sync(rid)))
        if not rids:
            self._synced(ask, None)

    def _synced(self, ask: Hashable, rid: int | None) -> None:
        rids, result = self._syncs[ask]
        rids.discard(rid)
        if not rids:
            del self._syncs[ask]
            self._out.append(AnswerAdmin(ask, result))

    def hash_password(self, password: str) -> str:
        """`password` hashed with a fresh salt from the injected source: only hashes enter commands."""
        return passwords.hash_password(password, self._salt(passwords.salt_bytes))

    def forget(self, node: str) -> None:
        """`node` is forgotten (the cluster view may not say so yet): no call goes there."""
        self.cluster.add(node)
        self.cluster_now.discard(node)

    def emit(self, effect: Effect) -> None:
        """An effect of an operation kept outside the core, out with the core's next ones."""
        self._out.append(effect)


@dataclass(frozen=True, slots=True)
class _StartupOp:
    cmd: Command


_RETRY_TIMER = "leader-retry:"


def _binding_timeout(action: str) -> AmqpError:
    return AmqpError(INTERNAL_ERROR, f"Could not {action} binding due to timeout")


# the channels' calls that are one registry command each, as that command and its time-out error
_COMMANDS: dict[type, tuple[Callable[[Any], Command], Callable[[Any], AmqpError]]] = {
    DeleteExchange: (lambda x: RemoveExchange(x.vhost, x.exchange, x.if_unused),
                     lambda x: texts.exchange_delete_timeout(x.exchange, x.vhost)),
    BindExchange: (lambda x: AddBinding(x.vhost, EXCHANGE, x.destination, x.source, x.routing_key, x.arguments),
                   lambda x: _binding_timeout("add")),
    UnbindExchange: (lambda x: RemoveBinding(x.vhost, EXCHANGE, x.destination, x.source, x.routing_key,
                                             x.arguments),
                     lambda x: _binding_timeout("remove")),
    BindQueue: (lambda x: AddBinding(x.vhost, QUEUE, x.queue, x.exchange, x.routing_key, x.arguments, x.owner),
                lambda x: _binding_timeout("add")),
    UnbindQueue: (lambda x: RemoveBinding(x.vhost, QUEUE, x.queue, x.exchange, x.routing_key, x.arguments, x.owner),
                  lambda x: _binding_timeout("remove")),
}

_OPS: dict[type, Callable[[NodeCore, Any], Op]] = {
    **{kind: (lambda core, x, to_command=to_command, timeout=timeout: command(to_command(x), timeout(x)))
       for kind, (to_command, timeout) in _COMMANDS.items()},
    DeclareExchange: NodeCore.exchange_declare, DeclareQueue: NodeCore.queue_declare,
    DeleteQueue: NodeCore._queue_delete, AutoDeleteQueue: NodeCore._queue_auto_delete,
    ConnectionClosed: NodeCore._connection_closed, AdminAsk: NodeCore._admin,
    _StartupOp: NodeCore._startup, NodeDown: NodeCore._node_down, HostRestarted: NodeCore._host_restarted,
    qm.Reconcile: qm.reconcile_members,
}
