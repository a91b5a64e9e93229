"""Host entries: what each kind of host process runs (the Supervisor calls them via HostSpec.entry).

Every host has a ClusterView (actors/cluster/view.py): its tcp mailbox is announced to the other
nodes and it learns where theirs listen and which nodes are up.

- node: the NodeActor (the node's metadata decisions) with the node's copy of the registry, the
  metadata Raft group's member on this node with its own WAL under `coordination/` (as RabbitMQ's
  Khepri runs in its own Ra system), and the ClusterActor (membership, joins) on the cluster port;
  the resource monitor (actors/monitor/resources.py: the node's memory and disk alarms, warrenctl
  set_vm_memory_high_watermark and set_disk_free_limit) and the alarm relay
  (actors/monitor/relay.py), which passes this node's alarms to every other node's and tells this
  node's connection hosts what the cluster is short of.
- The node host's entry with the management HTTP API, web UI and Prometheus endpoint (when their
  ports are set) is mgmt/launch.py's, which runs this one and then starts them with its `NodeHost`.
- queueN (a node with `queue_hosts = N`; by default the connection hosts run the same, see
  QueueService): a QueueManager that creates the classic queue actors placed on this host (their group
  commit: actors/queue/group_commit.py), the host's durable storage (persist/classic/host_storage.py:
  message stores, queue indexes) on a RealDisk, and its housekeeping (actors/queue/housekeeping.py:
  memory and paging, GC), which follows the node's memory limit.
- quorum: the node's quorum queue members and their one WAL (actors/quorum/host.py); when a node
  goes down, its channels' consumers and unacked messages are given back by every member here.
- connN: the AMQP listener (SO_REUSEPORT, so every connection host shares the port; plus an amqps
  listener when tls_port is set, with ssl_options' client certificate checks: actors/reader/tls.py),
  a registry replica (the Gatekeeper decides logins, vhost access and limits with it,
  actors/reader/login.py), the host's share of the cluster's connection counts (tracking.py),
  the readers/channels of the connections this host accepted, and by default (no queue hosts) the
  classic queues the node places here. It subscribes to the
  node and has started only once it holds the registry snapshot, so it never routes with an
  empty table (the node answers once it serves: after a restart, once the metadata group is back);
  it opens its listeners when the supervisor says (OPEN_LISTENERS), once every host of the node serves.
"""
from __future__ import annotations

import asyncio
import os
import random
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import psutil
import structlog

from actors.channel.publish_checks import MAX_MESSAGE_SIZE_DEFAULT
from actors.cluster.membership import Membership, down_after_ticks_default, liveness_ticks
from actors.cluster.shell import ClusterActor, read_members, tick_ms as cluster_tick_ms
from actors.cluster.view import ClusterView, tell_local_hosts
from actors.quorum import host as quorum
from actors.raft.hosts import Profiler
from actors.quorum.names import QUORUM_KIND
from actors.node.admin import ADMIN_OPS
from actors.node.core import CONNECTION_ADMIN_NAME, TIMEOUT_MS_DEFAULT, Startup
from actors.node.listings import LISTING_OPS
from actors.node.metadata_machine import MetadataMachine
from actors.node.quorum_membership import Reconciliation
from actors.node.quorum_queues import Declaring
from actors.node.metadata_member import MEMBER_NAME, start_member
from actors.node.shell import NodeActor
from actors.messages.alarms import WatchMemory
from actors.messages.cluster import NodesUp
from actors.monitor.relay import AlarmRelay
from actors.monitor.relay_shell import RelayActor
from actors.monitor.resources import ResourceMonitor, tell_relay
from actors.placement import (ALARMS_NAME, CLUSTER_NAME, META_NAME, NODE_KIND, QUEUE_MANAGER_NAME, QUEUE_ROUTER_NAME,
                              RESOURCE_MONITOR_NAME, ROUTER_NAME, alarm_relay, host_of, kind_of, node_address,
                              queue_address, queue_kind, resource_monitor, route_host)
from metadata import definitions
from metadata.cert_login import DISTINGUISHED_NAME
from metadata.quorum import CLUSTER_SIZE_DEFAULT
from metadata.registry import Registry
from actors.messages.stats import REPORTER_NAME
from actors.stats.collector import StatsCollector
from actors.stats.reporters import (ConnectionHostReporter, NodeHostReporter, QueueHostReporter, QuorumHostReporter,
                                   node_facts)
from actors.queue.housekeeping import Housekeeping
from actors.queue.manager import QueueManager
from persist.classic.host_storage import HostStorage
from persist.disk import RealDisk
from actors.reader import admin as conn_admin
from actors.reader import tls
from actors.reader.acceptor import Acceptor
from actors.reader.handover import MovedConnection
from actors.reader.mover import Mover
from actors.reader.admin import ConnectionAdmin
from actors.reader.alarms import WATCHER_NAME, AlarmWatcher
from actors.reader.core import Gatekeeper, Settings
from actors.reader.login import DEFAULT_MECHANISMS
from actors.reader.tracking import Tracking, TrackingShell
from actors.reader.shell import (ConnectionHostContext, Reader, tell_channels, tell_channels_host_restarted,
                                 tell_channels_nodes)
from actors.replica import RegistryReplica
from actors.runtime.address import Address
from actors.runtime.control import OPEN_LISTENERS
from actors.runtime.node_process import socket_dir
from flow.alarms import (DEFAULT_DISK_FREE_LIMIT_BYTES, DEFAULT_MEMORY_WATERMARK, AbsoluteLimit, Limit,
                         RelativeLimit)
from wire.errors import CONNECTION_FORCED

log = structlog.get_logger("warren.hosts")

subscribe_timeout_s = 300.0  # a node whose peers are down waits for the metadata group this long
control_stats_wait_ms = 5000  # how long warrenctl's cluster-wide listing waits for the queue hosts
DEFINITIONS_FILE = "definitions.json"  # where a node kept its metadata before it was replicated
HOUSEKEEPING_NAME = "housekeeping"  # a queue host's storage rounds, told the node's memory limit


def _host_info(op: str, args: dict | None = None) -> Any:
    """Control ops every host answers: "pid"; "profile" (as the raft host's: {"path": P} starts
    cProfile of the host's loop thread, {"path": None} writes it to P; for benchmarks)."""
    if op == "pid":
        return os.getpid()
    if op == "profile":
        return _PROFILER.toggle((args or {}).get("path"))
    return {"error": f"unknown op {op!r}"}


_PROFILER = Profiler()


@dataclass(frozen=True, slots=True)
class NodeHost:
    """What the node host started that the management (mgmt/launch.py) reads."""

    node: NodeActor
    facts: Callable[[], dict]  # this node's facts (reporters.node_facts)
    cluster_status: Callable[[], dict]  # ClusterActor.status


async def node_host(runtime: Any, spec: Any) -> NodeHost:
    started = time.monotonic()
    cfg = spec.config
    me, data_dir = cfg["node_name"], cfg["data_dir"]
    registry = Registry(random.Random())
    node = NodeActor(runtime, META_NAME, registry, me, tuple(cfg["queue_kinds"]),
                     timeout_ms=cfg.get("metadata_timeout_ms", TIMEOUT_MS_DEFAULT),
                     member=Address(runtime.host, MEMBER_NAME),
                     quorum_cluster_size=cfg.get("quorum_cluster_size", CLUSTER_SIZE_DEFAULT),
                     reconciliation=Reconciliation(**cfg.get("reconciliation", {})),
                     declaring=Declaring(**cfg.get("quorum_declaring", {})))
    runtime.spawn(META_NAME, node)
    known = read_members(data_dir)  # None: this node has never served
    joining = known is None and bool(cfg.get("join"))
    bootstrap = known is None and not joining
    machine = MetadataMachine(registry, node.applied, node.restored)
    alone = bootstrap or (known is not None and set(known) == {me})  # never had a peer: its only voter
    member = start_member(runtime, data_dir, me, machine, alone=alone)
    membership = Membership(me, runtime.tcp_endpoint, known or {me: runtime.tcp_endpoint},
                            address_of=lambda n: Address(host_of(n, NODE_KIND), CLUSTER_NAME),
                            incarnation=int.from_bytes(os.urandom(6), "big"),
                            **liveness_ticks(cfg.get("node_down_after_ms", down_after_ticks_default * cluster_tick_ms),
                                             cluster_tick_ms))
    cluster = ClusterActor(runtime, membership, member, data_dir)
    relay = start_alarms(runtime, me)
    monitor = start_monitor(runtime, cfg, me)
    mechanisms = list(cfg.get("auth_mechanisms", DEFAULT_MECHANISMS))

    def facts() -> dict:
        return {**node_facts(me, started, monitor.management_facts), "auth_mechanisms": mechanisms}
    runtime.spawn(REPORTER_NAME, NodeHostReporter(runtime, facts))  # other nodes' management asks it too

    def on_nodes(up: list[str], down: list[str]) -> None:
        node.nodes(up, down)
        relay.receive(Address(runtime.host, CLUSTER_NAME), NodesUp(up, down))
    view = ClusterView(runtime, me, on_nodes=on_nodes)
    cluster.start()
    view.start()
    tell_local_hosts(runtime, me)
    if joining:
        await cluster.join(cfg["join"])
    imported = _definitions_to_import(data_dir) if bootstrap else ()
    node.start(Startup(bootstrap, cfg.get("default_user", "guest"), cfg.get("default_pass", "guest"), imported))
    if known is None:
        asyncio.ensure_future(_first_serve(node, cluster, data_dir))
    # the hosts that may hold queues: queue hosts, connection hosts (a node without queue hosts) and quorum hosts
    queue_stats = StatsCollector(runtime, lambda: sorted(h for h in runtime.directory
                                                         if kind_of(h).startswith(("queue", "conn", QUORUM_KIND))),
                                 control_stats_wait_ms, name="ctl-stats", changes=False)
    runtime.spawn(queue_stats.name, queue_stats)

    async def control(op: str, args: dict) -> Any:
        if op in ADMIN_OPS:
            return await node.admin(op, args)
        if op == "status":
            return {**node.listing(op, args), "alarms": [list(a) for a in relay.core.cluster.alarms()],
                    **monitor.status()}
        if op in LISTING_OPS:
            return node.listing(op, args)
        if op == "set_vm_memory_high_watermark":
            monitor.set_memory_limit(_limit(args))
            return {"node": me}
        if op == "set_disk_free_limit":
            monitor.set_disk_limit(_limit(args))
            return {"node": me}
        if op == "cluster_status":
            return cluster.status()
        if op == "cluster_queue_stats":  # warrenctl list_queues: every queue host of the cluster, once
            return list((await queue_stats.collect()).queues.values())
        if op == "forget_cluster_node":
            return await _forget(cluster, node, args["node"])
        return _host_info(op, args)
    runtime.control = control
    return NodeHost(node, facts, cluster.status)


def start_alarms(runtime: Any, me: str) -> RelayActor:
    """The node's alarm relay, in the node host (actors/monitor/relay.py)."""
    relay = RelayActor(runtime, Address(runtime.host, ALARMS_NAME), AlarmRelay(me, alarm_relay))
    runtime.spawn(ALARMS_NAME, relay)
    return relay


def start_monitor(runtime: Any, cfg: dict, me: str) -> ResourceMonitor:
    """The node's memory and disk monitor, started: its first checks log the limits, as RabbitMQ's."""
    address = Address(runtime.host, RESOURCE_MONITOR_NAME)
    monitor = ResourceMonitor(me, cfg.get("data_dir") or os.getcwd(),
                              cfg.get("memory_limit", RelativeLimit(DEFAULT_MEMORY_WATERMARK)),
                              cfg.get("disk_limit", AbsoluteLimit(DEFAULT_DISK_FREE_LIMIT_BYTES)),
                              on_alarm=tell_relay(runtime, address, alarm_relay(me)), runtime=runtime, me=address)
    runtime.spawn(RESOURCE_MONITOR_NAME, monitor)
    monitor.start()
    return monitor


def _limit(args: dict) -> Limit:
    """A limit as warrenctl sends it: {"relative": fraction} or {"absolute": bytes}."""
    return RelativeLimit(args["relative"]) if "relative" in args else AbsoluteLimit(args["absolute"])


def _definitions_to_import(data_dir: str) -> tuple:
    """A definitions file written before the metadata was replicated: its records, loaded once."""
    path = Path(data_dir) / DEFINITIONS_FILE
    if not path.exists():
        return ()
    records = definitions.decode(path.read_bytes())
    if isinstance(records, definitions.DefinitionsError):
        raise RuntimeError(f"{path}: {records.reason}")  # rather not start than start with the wrong users
    return tuple(records)


async def _first_serve(node: NodeActor, cluster: ClusterActor, data_dir: str) -> None:
    """Once a new node serves, it is a member for good: cluster.json says so from now on (a restart
    does not bootstrap or join again) and an imported definitions file has done its work."""
    await node.serving.wait()
    cluster.save_members()
    path = Path(data_dir) / DEFINITIONS_FILE
    if path.exists():
        path.rename(path.with_name(DEFINITIONS_FILE + ".imported"))


async def _forget(cluster: ClusterActor, node: NodeActor, gone: str) -> dict:
    """warrenctl forget_cluster_node: out of the metadata group, then its queues and membership."""
    status = cluster.status()
    if gone not in status["members"]:
        return {"error": f"Node {gone} is not a member of this cluster", "exit": 69}
    if gone in status["running"]:
        return {"error": f"Node {gone} must be stopped before it can be removed", "exit": 69}
    try:
        await cluster.change(gone, add=False)
    except RuntimeError as e:
        return {"error": str(e), "exit": 70}
    return await node.admin("forget_node_queues", {"node": gone})


def quorum_host(runtime: Any, spec: Any) -> None:
    """A node's quorum host (actors/quorum/host.py) with its window on the cluster: the directory
    of the other nodes' hosts, and the channels of nodes that went down given back."""
    # a registry replica, kept current by the node as a queue host's, routes dead-lettered messages
    me = spec.config["node_name"]
    replica = RegistryReplica(runtime, QUEUE_ROUTER_NAME, Registry(), node_address(me))
    runtime.spawn(QUEUE_ROUTER_NAME, replica)
    replica.subscribe()
    host = quorum.quorum_host(runtime, spec, replica.registry, replica.incarnation)
    runtime.spawn(REPORTER_NAME, QuorumHostReporter(runtime, host, spec.config["node_name"]))
    seen_down: set[str] = set()

    def on_nodes(_up: list[str], down: list[str]) -> None:
        newly, back = set(down) - seen_down, seen_down - set(down)
        seen_down.clear()
        seen_down.update(down)
        if newly:
            host.nodes_down(newly)
        if back:
            host.nodes_back(back)
    ClusterView(runtime, me, on_nodes=on_nodes, on_node_started=replica.subscribe).start()


@dataclass
class QueueService:
    """What a host holding classic queues runs for them (a queue host, or a connection host when
    the node has none): a registry replica that routes dead-lettered messages and names the
    durable queues to recover, the QueueManager that creates the queue actors the node places here
    (queues are created only by the node, after it has answered the replica's subscription), the
    host's storage and its housekeeping."""
    runtime: Any
    node: str
    replica: RegistryReplica
    manager: QueueManager
    storage: HostStorage | None

    def nodes(self, up: list[str], down: list[str]) -> None:
        # channels on down nodes are gone: their queues drop their consumers and requeue their deliveries
        self.manager.nodes(up, down)

    def node_started(self) -> None:
        self.replica.subscribe()
        self.watch_memory()

    def watch_memory(self) -> None:
        """The node's monitor answers now and after every check (Housekeeping takes the answers)."""
        if self.storage is not None:
            self.runtime.send(resource_monitor(self.node), WatchMemory(),
                              sender=Address(self.runtime.host, HOUSEKEEPING_NAME))

    def control(self, op: str) -> Any:
        """The control ops about the queues held here; None for any other op."""
        if op == "list_queues":
            return self.manager.stats()
        if op == "store_summary":
            storage = self.storage
            return storage.summary() if storage is not None and storage.recovered else {"host": self.runtime.host}
        return None


def serve_queues(runtime: Any, cfg: dict) -> QueueService:
    """Start the classic queue side of this host (see QueueService); the caller subscribes it."""
    me = cfg["node_name"]
    replica = RegistryReplica(runtime, QUEUE_ROUTER_NAME, Registry(), node_address(me))
    runtime.spawn(QUEUE_ROUTER_NAME, replica)
    storage = None
    if cfg.get("data_dir"):
        kinds = cfg["queue_kinds"]
        # a queue's directory is this host's when the node homes its queues here (actors/placement.py)
        storage = HostStorage(RealDisk(cfg["data_dir"]), kind_of(runtime.host),  # its directories: msg_stores/queueN/...
                              embed_below=cfg.get("queue_index_embed_msgs_below", 4096),
                              file_size_limit=cfg.get("msg_store_file_size_limit", 16 * 1024 * 1024),
                              placed_here=lambda vhost, name: host_of(me, queue_kind(vhost, name, kinds))
                              == runtime.host)
    manager = QueueManager(runtime, QUEUE_MANAGER_NAME, replica.registry, node_address(me), storage,
                           replica.ready.is_set)
    runtime.spawn(QUEUE_MANAGER_NAME, manager)
    service = QueueService(runtime, me, replica, manager, storage)
    if storage is not None:
        # paging starts at vm_memory_high_watermark_paging_ratio x vm_memory_high_watermark x RAM, and
        # follows the node's limit once its monitor answers (warrenctl set_vm_memory_high_watermark)
        ratio = float(cfg.get("vm_memory_high_watermark_paging_ratio", 0.5))
        threshold = int(float(cfg.get("vm_memory_high_watermark", 0.4)) * ratio * psutil.virtual_memory().total)
        housekeeping = Housekeeping(storage, threshold, manager.ensure_recovered, paging_ratio=ratio,
                                    paged=manager.touch_all)
        runtime.spawn(HOUSEKEEPING_NAME, housekeeping)
        housekeeping.start()
    return service


def holds_queues(runtime: Any, cfg: dict) -> bool:
    """Whether the node places classic queues on this host (actors/placement.py: queue_kinds)."""
    return kind_of(runtime.host) in cfg["queue_kinds"]


def queue_host(runtime: Any, spec: Any) -> None:
    queues = serve_queues(runtime, spec.config)
    ClusterView(runtime, queues.node, on_nodes=queues.nodes, on_node_started=queues.node_started).start()
    queues.node_started()  # subscribes: the node has started if it answers, and will tell us if not
    runtime.spawn(REPORTER_NAME, QueueHostReporter(runtime, queues.manager))

    async def control(op: str, args: dict) -> Any:
        if op == "flow_links":
            return queues.manager.flow_links()
        answer = queues.control(op)
        return answer if answer is not None else _host_info(op, args)
    runtime.control = control


async def connection_host(runtime: Any, spec: Any) -> None:
    cfg = spec.config
    me = cfg["node_name"]
    registry = Registry()
    settings = Settings(frame_max=cfg.get("frame_max", 131072), channel_max=cfg.get("channel_max", 2047),
                        heartbeat=cfg.get("heartbeat", 60), handshake_timeout_ms=cfg.get("handshake_timeout", 10_000))
    # logins, vhost access and limits are decided with this host's replica, fed with hashes by the node
    loopback_users = frozenset(u.strip() for u in str(cfg.get("loopback_users", "guest")).split(",") if u.strip())
    tls_options = tls.TlsOptions.from_dict(cfg["tls"]) if cfg.get("tls_port") and cfg.get("tls") else None
    counts = Tracking(runtime.host)  # the cluster's connections and channels, for the limits
    gatekeeper = Gatekeeper(registry, loopback_users, tuple(cfg.get("auth_mechanisms", DEFAULT_MECHANISMS)),
                            cfg.get("ssl_cert_login_from", DISTINGUISHED_NAME),
                            verify_peer=tls_options is not None and tls_options.verify == tls.VERIFY_PEER,
                            tracking=counts)
    ctx = ConnectionHostContext(
        runtime, registry, registry_place(registry, me), settings, gatekeeper,
        vhost_exists=registry.vhost_exists, router_address=Address(runtime.host, ROUTER_NAME),
        node=node_address(me), consumer_timeout_ms=cfg.get("consumer_timeout", 1800000),
        max_message_size=cfg.get("max_message_size", MAX_MESSAGE_SIZE_DEFAULT), tracking=counts)
    tracking = TrackingShell(runtime, counts, CONNECTION_ADMIN_NAME, lambda: ctx.down_nodes)
    ctx.counts_changed = tracking.maybe_tell
    on_channels_change = tell_channels(ctx)

    def on_change(sender: Address, changes: list, gone: list[Address]) -> None:
        on_channels_change(sender, changes, gone)
        ctx.tracking.track(registry.limits.tracked_vhosts(), registry.limits.tracked_users())
        tracking.maybe_tell()
    replica = RegistryReplica(runtime, ROUTER_NAME, registry, node_address(me), on_change,
                              tell_channels_host_restarted(ctx), incarnation=ctx.incarnation)
    runtime.spawn(ROUTER_NAME, replica)
    watcher = AlarmWatcher(ctx, alarm_relay(me))
    runtime.spawn(WATCHER_NAME, watcher)

    # the node's classic queues, here unless it has queue hosts: a message to a queue of this host's
    # channels crosses no process boundary
    queues = serve_queues(runtime, cfg) if holds_queues(runtime, cfg) else None
    on_channel_nodes = tell_channels_nodes(ctx)

    def on_nodes(up: list[str], down: list[str]) -> None:
        on_channel_nodes(up, down)
        ctx.tracking.nodes_down(frozenset(down))
        if queues is not None:
            queues.nodes(up, down)

    def node_started() -> None:
        if queues is not None:
            queues.node_started()
        watcher.watch()
        replica.subscribe()
    ClusterView(runtime, me, on_nodes=on_nodes, on_node_started=node_started).start()
    runtime.spawn(CONNECTION_ADMIN_NAME, ConnectionAdmin(ctx, tracking))
    runtime.spawn(REPORTER_NAME, ConnectionHostReporter(runtime, ctx, queues.manager if queues is not None else None))
    if queues is not None:  # first: the node creates this host's queues once their replica subscribed
        queues.node_started()
    watcher.watch()  # answered on the node's pipe before the snapshot we wait for below
    replica.subscribe()
    await asyncio.wait_for(replica.ready.wait(), subscribe_timeout_s)
    tracking.start()  # the other connection hosts answer with their counts
    loop = asyncio.get_running_loop()

    serving: set[asyncio.Task] = set()  # the loop keeps only weak references to tasks

    def adopt(sock: socket.socket, moved: MovedConnection | None) -> None:
        task = loop.create_task(serve(sock, moved))
        serving.add(task)
        task.add_done_callback(serving.discard)

    async def serve(sock: socket.socket, moved: MovedConnection | None) -> None:
        made: list[Reader] = []

        def reader() -> Reader:
            made.append(Reader(ctx, acceptor.left, moved))
            return made[0]
        try:
            await loop.connect_accepted_socket(reader, sock=sock)
        except Exception:  # never served (the client went away first): not counted any more
            log.warning("connection.not_served", host=runtime.host, exc_info=True)
            sock.close()
            if not made or made[0].transport is None:  # else its connection_lost counts it down
                acceptor.left()
    acceptor = Acceptor(loop, cfg.get("conn_index", 0), cfg.get("connection_hosts", 1),
                        socket_dir(Path(cfg["data_dir"])), adopt)
    if acceptor.board is not None and cfg.get("connection_moves", True):
        ctx.mover = Mover(acceptor, runtime.host, ctx.settings.ticks_per_second)

    async def open_listeners() -> dict:
        """The supervisor says when: once every host of the node serves (actors/runtime/restarts.py)."""
        # a certificate that does not load fails the host before anything listens
        tls_context = tls.server_context(tls_options) if tls_options is not None else None
        acceptor.listen(cfg.get("bind", "127.0.0.1"), cfg["port"])
        log.info("listener.started", host=runtime.host, port=cfg["port"])
        # amqps connections are not evened out: TLS is rare on the hot paths this is for
        if tls_context is not None:
            ctx.tls_server = await loop.create_server(
                tls.tls_protocol(loop, lambda: Reader(ctx), tls_context), cfg.get("bind", "127.0.0.1"),
                cfg["tls_port"], reuse_port=True, backlog=1024)
            log.info("tls_listener.started", host=runtime.host, port=cfg["tls_port"])
        return {"port": cfg["port"]}
    loop.create_task(_tick(ctx))

    listings = {"list_connections": conn_admin.list_connections, "list_channels": conn_admin.list_channels,
                "list_consumers": conn_admin.list_consumers, "flow_links": conn_admin.flow_links}

    async def control(op: str, args: dict) -> Any:
        if op == "flow_links" and queues is not None:
            return conn_admin.flow_links(ctx) + queues.manager.flow_links()
        if op in listings:
            return listings[op](ctx)
        answer = queues.control(op) if queues is not None else None
        if answer is not None:
            return answer
        if op == "close_connection":
            return {"closed": conn_admin.close_connections(ctx, None, args["name"], CONNECTION_FORCED,
                                                           args.get("reason", "Closed via warrenctl"))}
        if op == OPEN_LISTENERS:
            return await open_listeners()
        return _host_info(op, args)
    runtime.control = control


def registry_place(registry: Registry, node: str) -> Callable[[str, str], Address]:
    """Where a routed queue's actor is, for a channel on `node`: its record's home, or a replicated
    stream's member on this node (on every publish's path)."""
    def place(vhost: str, name: str) -> Address:
        rec = registry.topology.vhosts[vhost].queues[name]
        home = route_host(rec.home, rec.replicas, node) if rec.replicas else rec.home
        return queue_address(home, vhost, name)
    return place


async def _tick(ctx: ConnectionHostContext) -> None:
    period = 1 / ctx.settings.ticks_per_second
    while True:
        await asyncio.sleep(period)
        if ctx.mover is not None:
            ctx.mover.tick()
        for reader in list(ctx.readers):
            reader.tick()
