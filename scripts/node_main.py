"""Start one warren node: `python -m scripts.node_main --name N --port P --data-dir D --config F`.

Builds the host specs (node, queue hosts, the quorum host, connection hosts; the node host's entry
is the management plugin's, mgmt/launch.py, when a management, Prometheus or HTTPS port is set) from
the configuration and runs them under the Thespian supervisor until SIGTERM or Ctrl-C (exit status
0), or until the node fails (1: a host past its restart intensity, a control plane that keeps
failing, a start that did not serve in time; 2: a bad configuration or cookie; 1 also when another
node holds the data dir or a port is taken). Before anything starts it takes the data dir's lock
(data_dir_lock.py: it waits for what is left of an earlier run, and refuses a second live node),
then checks the ports (an earlier run's it waits for a moment more: its sockets close after its
lock), then reads or creates the cluster's cookie, so the hosts only read it. A node is named
NAME@HOST (HOST: this machine's short host name, as RabbitMQ's nodes are); `--join HOST:PORT`
makes a new node join the cluster of the node whose cluster port that is. Every host gets a tcp
mailbox for the other nodes (ZeroMQ tcp:// with CURVE keyed by the cluster's cookie,
actors/runtime/curve.py): the node host on the cluster port (AMQP port + 20000 unless configured),
the others on a port the OS picks, which the membership tells the peers.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import threading
import time
import sys
from pathlib import Path

import psutil
import structlog

from actors.placement import WAL_KIND, host_of, node_address, queue_kinds, quorum_kinds
from actors.quorum import names as quorum_names
from actors.runtime import logs
from actors.runtime.control import HostSpec
from actors.runtime import data_dir_lock
from actors.runtime.cluster_secret import CookieError, default_cookie_file, read_or_create_cookie
from actors.runtime.node_process import run_node
from scripts.config import (CMR, LISTENER_IP, RELAXED_CHECKS, ConfigError, access_settings, default_quorum_hosts,
                            disk_free_limit, load, memory_watermark)
from actors.runtime.ports import can_listen, free_port


def node_name(name: str) -> str:
    """NAME@HOST, HOST being this machine's short host name, unless `name` names its host already."""
    return name if "@" in name else f"{name}@{socket.gethostname().split('.')[0]}"


def cluster_port(conf: dict) -> int:
    return conf["cluster.port"] or conf["listeners.tcp.default"] + 20000


def reconciliation(conf: dict) -> dict:
    """quorum_queue.continuous_membership_reconciliation.* as actors/node/quorum_membership.py's
    Reconciliation fields."""
    return {"enabled": conf[CMR + "enabled"], "target_group_size": conf[CMR + "target_group_size"],
            "auto_remove": conf[CMR + "auto_remove"], "interval_ms": conf[CMR + "interval"],
            "trigger_interval_ms": conf[CMR + "trigger_interval"]}


def busy_ports(conf: dict) -> list[tuple[str, int]]:
    """The (ip, port)s this node would listen on that something else listens on now."""
    mgmt_ip = conf["management.tcp.ip"]
    amqp_ip = conf[LISTENER_IP]
    wanted = ((amqp_ip, conf["listeners.tcp.default"]), (amqp_ip, conf["listeners.ssl.default"]),
              (conf["cluster.interface"], cluster_port(conf)),
              (mgmt_ip, conf["management.tcp.port"]), (mgmt_ip, conf["prometheus.tcp.port"]),
              (conf["management.ssl.ip"] or mgmt_ip, conf["management.ssl.port"]))
    return [(ip, port) for ip, port in wanted if port and not can_listen(port, ip)]


def host_specs(conf: dict) -> list[HostSpec]:
    """Node first, then queue hosts, then connection hosts: a connection host waits for the node."""
    node = conf["node_name"]
    interface = conf["cluster.interface"]
    cookie_file = conf["cluster.cookie_file"] or str(default_cookie_file)
    common = {"node_name": node, "cookie_file": cookie_file, "tcp_bind": f"tcp://{interface}:*",
              "bind": conf[LISTENER_IP],
              "cluster_port": cluster_port(conf),
              "queue_kinds": queue_kinds(conf["queue_hosts"], conf["connection_hosts"]),
              "data_dir": conf["data_dir_resolved"],
              "consumer_timeout": conf["consumer_timeout"],
              "default_user": conf["default_user"], "default_pass": conf["default_pass"],
              "loopback_users": conf["loopback_users"],
              "queue_index_embed_msgs_below": conf["queue_index_embed_msgs_below"],
              "msg_store_file_size_limit": conf["msg_store_file_size_limit"],
              "vm_memory_high_watermark": conf["vm_memory_high_watermark"],
              "vm_memory_high_watermark_paging_ratio": conf["vm_memory_high_watermark_paging_ratio"],
              "credit_initial": conf["credit_flow_default_credit.initial"],
              "credit_more_after": conf["credit_flow_default_credit.more_after"],
              "quorum_cluster_size": conf["quorum_cluster_size"],
              "quorum_hosts": conf["quorum_hosts_resolved"],
              "memory_limit": memory_watermark(conf)[0], "disk_limit": disk_free_limit(conf)[0],
              **access_settings(conf)}
    management = {"management_port": conf["management.tcp.port"], "management_ip": conf["management.tcp.ip"],
                  "prometheus_port": conf["prometheus.tcp.port"],
                  "collect_statistics_interval": conf["collect_statistics_interval"],
                  "amqp_port": conf["listeners.tcp.default"]}
    # the management plugin's entry runs the node host and then its HTTP servers (mgmt/launch.py)
    served = management["management_port"] or management["prometheus_port"] or common["management_ssl_port"]
    node_entry = "mgmt.launch:node_host_with_management" if served else "actors.hosts:node_host"
    specs = [HostSpec("node", node_entry,
                      dict(common, **management, tcp_bind=f"tcp://{interface}:{cluster_port(conf)}",
                           join=conf.get("join"), metadata_timeout_ms=conf["metadata.timeout"],
                           node_down_after_ms=conf["cluster.node_down_after"],
                           reconciliation=reconciliation(conf),
                           quorum_declaring={"leader_locator": conf["queue_leader_locator"],
                                             "relaxed_checks": conf[RELAXED_CHECKS]}))]
    specs += [HostSpec(f"queue{i}", "actors.hosts:queue_host", dict(common)) for i in range(conf["queue_hosts"])]
    quorum_hosts = conf["quorum_hosts_resolved"]
    if quorum_hosts > 1:  # the node's WAL in a process of its own (actors/raft/wal_host.py), before its writers
        specs.append(HostSpec(WAL_KIND, "actors.raft.wal_host:wal_host", dict(
            common, node=node, wal_max_size_bytes=conf["raft.wal_max_size_bytes"])))
    specs += [HostSpec(kind, "actors.hosts:quorum_host", dict(
        common, node=node, node_address=str(node_address(node)), tick_ms=conf["raft.tick_ms"],
        segment_max_entries=conf["raft.segment_max_entries"], wal_max_size_bytes=conf["raft.wal_max_size_bytes"],
        machine_version=conf["quorum_queue.machine_version"], quorum_index=i))
        for i, kind in enumerate(quorum_kinds(quorum_hosts))]
    conn = dict(common, port=conf["listeners.tcp.default"], frame_max=conf["frame_max"],
                channel_max=conf["channel_max"], heartbeat=conf["heartbeat"],
                handshake_timeout=conf["handshake_timeout"], max_message_size=conf["max_message_size"])
    specs += [HostSpec(f"conn{i}", "actors.hosts:connection_host",
                       dict(conn, conn_index=i, connection_hosts=conf["connection_hosts"],
                            connection_moves=conf["connection_moves"]), listens=True)
              for i in range(conf["connection_hosts"])]
    return [HostSpec(s.name, s.entry, dict(s.config, host=host_of(node, s.name)), s.listens) for s in specs]


watch_interval_s = 1.0
old_ports_wait_s = 5.0  # for an earlier run's ports, once its processes let go of the data dir's lock
startup_timeout_s = 300.0  # a node whose peers are down waits this long for the metadata group


def _stop_when_gone(pid: int) -> None:
    """A node started by a test stops by itself if the test process dies without stopping it.
    The process is known by its pid AND its start time: a pid alone may be reused by another
    process after the test's died (nodes outlived their tests by hours that way)."""
    try:
        started = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        started = None
    while started is not None:
        time.sleep(watch_interval_s)
        try:
            if psutil.Process(pid).create_time() != started:
                break
        except psutil.NoSuchProcess:
            break
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--name", help="node name (default warren)")
    p.add_argument("--port", type=int, help="AMQP port (default 5672)")
    p.add_argument("--data-dir", help="data directory (default var/<node name>)")
    p.add_argument("--config", type=Path, help="warren.conf")
    p.add_argument("--admin-port", type=int, help="Thespian admin port (default: a free port)")
    p.add_argument("--cluster-port", type=int, help="port other nodes reach this one on (default: AMQP port + 20000)")
    p.add_argument("--join", metavar="HOST:PORT", help="join the cluster of the node with this cluster port")
    p.add_argument("--management-port", type=int, help="management HTTP API and web UI (default: AMQP port + 10000, 0: off)")
    p.add_argument("--prometheus-port", type=int, help="Prometheus metrics (default: AMQP port + 10020, 0: off)")
    p.add_argument("--exit-with", type=int, metavar="PID",
                   help="stop cleanly when process PID exits (tests pass their own pid)")
    a = p.parse_args(argv)
    try:
        conf = load(a.config, {"node_name": a.name, "listeners.tcp.default": a.port, "data_dir": a.data_dir,
                               "admin_port": a.admin_port, "cluster.port": a.cluster_port,
                               "management.tcp.port": a.management_port, "prometheus.tcp.port": a.prometheus_port})
    except (ConfigError, OSError) as e:
        print(f"warren: bad configuration: {e}", file=sys.stderr)
        return 2
    conf["join"] = f"tcp://{a.join}" if a.join else None
    if not 0 < cluster_port(conf) < 65536:
        print(f"warren: cluster port {cluster_port(conf)} (AMQP port + 20000) is out of range: "
              "set --cluster-port or cluster.port", file=sys.stderr)
        return 2
    data_dir = Path(conf["data_dir"] or Path("var") / conf["node_name"]).resolve()
    conf["node_name"] = node_name(conf["node_name"])
    data_dir.mkdir(parents=True, exist_ok=True)
    logs.configure("main", data_dir)
    logs.route_standard_library()
    try:  # held by every process of the node, for as long as one of them lives
        lock, waited = data_dir_lock.acquire(data_dir, conf["node_name"])
    except data_dir_lock.DataDirBusy as e:
        print(f"warren: {e}", file=sys.stderr)
        return 1
    amqp_ip = conf[LISTENER_IP]
    taken = busy_ports(conf)
    if taken and waited:  # the old run's sockets close after its lock
        structlog.get_logger("warren.node").warning("node.waiting_for_old_ports", ports=taken,
                                                    timeout_s=old_ports_wait_s)
        deadline = time.monotonic() + old_ports_wait_s
        while taken and time.monotonic() < deadline:
            time.sleep(data_dir_lock.poll_s)  # a condition polled with a deadline
            taken = busy_ports(conf)
    if taken:  # as RabbitMQ, which fails to boot on eaddrinuse rather than share the port
        print(f"warren: cannot listen on {taken[0][0]}:{taken[0][1]}: address in use", file=sys.stderr)
        return 1
    try:  # made here, before any host reads it
        read_or_create_cookie(Path(conf["cluster.cookie_file"] or default_cookie_file))
    except (CookieError, OSError) as e:
        print(f"warren: {e}", file=sys.stderr)
        return 2
    for warning in memory_watermark(conf)[1] + disk_free_limit(conf)[1]:
        structlog.get_logger("warren.config").warning(warning)
    conf["data_dir_resolved"] = str(data_dir)
    conf["quorum_hosts_resolved"] = conf["quorum_hosts"] or default_quorum_hosts(os.cpu_count() or 1,
                                                                                conf["connection_hosts"])
    quorum_names.configure(conf["quorum_hosts_resolved"])  # every host is forked from here and inherits it
    admin_port = conf["admin_port"] or free_port()
    (data_dir / "admin_port").write_text(str(admin_port))
    specs = host_specs(conf)
    print(f"warren node {conf['node_name']} starting: amqp {amqp_ip}:{conf['listeners.tcp.default']}, "
          f"cluster {conf['cluster.interface']}:{cluster_port(conf)}, data {data_dir}, admin port {admin_port}",
          flush=True)
    if a.exit_with:
        threading.Thread(target=_stop_when_gone, args=(a.exit_with,), daemon=True).start()
    status = run_node(conf["node_name"], specs, {}, admin_port, data_dir, ready_timeout_s=startup_timeout_s,
                      stop_timeout_s=conf["stop_timeout"] / 1000)
    if status:
        print(f"warren: node {conf['node_name']} failed; see {logs.log_path(data_dir)}", file=sys.stderr)
    os.close(lock)
    return status


if __name__ == "__main__":
    sys.exit(main())
