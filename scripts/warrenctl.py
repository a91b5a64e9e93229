"""warrenctl: rabbitmqctl for warren. `warrenctl [-n DATA_DIR | --admin-port N] [--formatter json] COMMAND ...`

Finds the node through `<data_dir>/admin_port` (default data dir var/warren) and talks to its
hosts with actors.runtime.client.control: admin changes go to the node host (which runs them in
turn with the channels' requests and persists them), queue statistics come from every queue host,
connections/channels/consumers from every connection host; `store_summary` prints each queue host's
message stores (files, messages, live and garbage bytes, GC runs); `status` and `stop` are
scripts/ctl_node.py's (the node's name, ports, uptime, memory and processes; rabbitmqctl stop);
`flow` shows the publish chain live and names its bottleneck (scripts/flow_view.py);
`set_vm_memory_high_watermark` and `set_disk_free_limit` change the resource limits until the node
restarts; topic permissions and vhost and user limits are scripts/ctl_access.py's; `ping`,
`check_running`, `check_local_alarms`, `check_port_connectivity` and `await_startup` are
rabbitmq-diagnostics' health checks, with its exit codes (scripts/ctl_health.py). Output is a tab-separated table with a header row, or with `--formatter json` a JSON list
of objects. Every failure prints one line,
"Error: ...", on stderr and exits non-zero with rabbitmqctl's codes (64 usage, 65 bad argument or no such vhost,
67 no such user, 69 node unreachable or validation failed, 70 already exists / internal error).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from flow.units import (UnitError, cli_disk_absolute, cli_disk_relative, cli_memory_absolute,
                        cli_memory_relative)
from actors.quorum.names import QUORUM_KIND
from metadata.policies import parse_definition
from scripts import ctl_access, ctl_health, ctl_node, ctl_quorum, ctl_streams, flow_view
from scripts.queue_columns import QUEUE_COLUMNS, queue_rows

EX_USAGE, EX_DATAERR, EX_UNAVAILABLE, EX_SOFTWARE, EX_TEMPFAIL = 64, 65, 69, 70, 75
default_node_dir = Path("var/warren")
control_timeout_s = 10.0
forget_timeout_s = 600.0  # forget_cluster_node removes the node's quorum queue members one at a time
flow_ask_timeout_s = 3.0  # a host that takes longer is shown as silent in `warrenctl flow`

LISTINGS: dict[str, tuple[str, tuple[str, ...]]] = {  # command -> (where, default columns)
    "list_queues": ("queues", ("name", "messages")),
    "list_exchanges": ("node", ("name", "type")),
    "list_bindings": ("node", ("source_name", "source_kind", "destination_name", "destination_kind",
                               "routing_key", "arguments")),
    "list_connections": ("connections", ("name", "user", "peer_host", "peer_port", "state")),
    "list_channels": ("connections", ("name", "user", "consumer_count", "messages_unacknowledged")),
    "list_consumers": ("connections", ("queue_name", "channel_pid", "consumer_tag", "ack_required")),
    "list_users": ("node", ("user", "tags")),
    "list_vhosts": ("node", ("name",)),
    "list_permissions": ("node", ("user", "configure", "write", "read")),
    "list_policies": ("node", ("vhost", "name", "pattern", "apply-to", "definition", "priority")),
    "list_operator_policies": ("node", ("vhost", "name", "pattern", "apply-to", "definition", "priority")),
}

STORE_COLUMNS = ("host", "store", "queues", "files", "messages", "live_bytes", "garbage_bytes", "disk_bytes",
                 "gc_runs", "files_deleted")


class Failure(Exception):
    def __init__(self, message: str, code: int, kind: str = "Error") -> None:
        super().__init__(message)
        self.code = code
        self.kind = kind  # rabbitmqctl's "Error" or "Error (argument validation)"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2; rabbitmqctl's usage errors exit 64
        raise Failure(f"{message} (see warrenctl --help)", EX_USAGE)


class Node:
    """The hosts of one node, reached through its Thespian admin port."""

    def __init__(self, admin_port: int, data_dir: Path | None) -> None:
        self.admin_port = admin_port
        self.data_dir = data_dir
        self._status: dict | None = None

    def ask(self, host: str, op: str, args: dict | None = None, timeout_s: float = control_timeout_s) -> Any:
        from actors.runtime.client import control
        try:
            answer = control(self.admin_port, host, op, args or {}, timeout=timeout_s)
        except ConnectionError as e:
            raise Failure(f"unable to reach the node: {e}", EX_UNAVAILABLE) from None
        except (TimeoutError, RuntimeError) as e:
            raise Failure(f"{host}: {e}", EX_SOFTWARE) from None
        if isinstance(answer, dict) and "error" in answer:
            raise Failure(answer["error"], answer.get("exit", EX_SOFTWARE))
        return answer

    def status(self) -> dict:
        if self._status is None:
            self._status = self.ask("node", "status")
        return self._status

    def queue_hosts(self) -> list[str]:
        """The hosts that hold classic queues: the connection hosts unless the node has queue hosts."""
        return list(self.status()["queue_hosts"])

    def connection_hosts(self) -> list[str]:
        return list(self.status()["connection_hosts"])

    def quorum_hosts(self) -> list[str]:
        """The quorum hosts, and the WAL's process on a node with several (an older node: one)."""
        return list(self.status().get("quorum_hosts", [QUORUM_KIND]))


def find_node(a: argparse.Namespace) -> Node:
    if a.admin_port:
        return Node(a.admin_port, None)
    data_dir = Path(a.node_dir)
    try:
        port = int((data_dir / "admin_port").read_text().strip())
    except (OSError, ValueError):
        raise Failure(f"no warren node in {data_dir} (no readable admin_port file; is it running?)",
                      EX_UNAVAILABLE) from None
    return Node(port, data_dir)


# ---------------------------------------------------------------- listings
def _rows(node: Node, command: str, a: argparse.Namespace) -> list[dict]:
    vhost = getattr(a, "vhost", None)
    if command == "list_queues":
        stats = node.ask("node", "cluster_queue_stats")
        running = ((lambda: node.ask("node", "cluster_status")["running"]) if "online" in a.columns else None)
        return queue_rows(node.ask("node", "queue_policies", {"vhost": vhost}), stats, running)
    where, _ = LISTINGS[command]
    if where == "connections":
        rows = [r for host in node.connection_hosts() for r in node.ask(host, command)]
        return [r for r in rows if vhost is None or r.get("vhost") == vhost]
    args = {"vhost": vhost} if vhost is not None else {}
    if command == "list_permissions":
        args = {"vhost": vhost or "/"}
    return node.ask("node", command, args)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def render(rows: list[dict], columns: list[str], formatter: str) -> str:
    if formatter == "json":
        return json.dumps([{c: r.get(c) for c in columns} for r in rows], indent=1)
    lines = ["\t".join(columns)] + ["\t".join(_cell(r.get(c)) for c in columns) for r in rows]
    return "\n".join(lines)


def run_listing(node: Node, a: argparse.Namespace) -> str:
    command = a.command
    columns = list(a.columns) or list(LISTINGS[command][1])
    if command == "list_queues":
        _check_columns(columns, QUEUE_COLUMNS)  # before asking anything, as rabbitmqctl
    rows = _rows(node, command, a)
    if rows and command != "list_queues":
        _check_columns(columns, tuple(rows[0]))
    return render(rows, columns, a.formatter)


def _check_columns(columns: list[str], known: tuple[str, ...]) -> None:
    bad = [c for c in columns if c not in known]
    if bad:
        raise Failure(f"Info key(s) {','.join(bad)} are not supported", EX_USAGE, "Error (argument validation)")


# ---------------------------------------------------------------- changes
def _ok(node: Node, host: str, op: str, args: dict, formatter: str, done: str) -> str:
    answer = node.ask(host, op, args)
    if formatter == "json":
        return json.dumps(answer)
    return done.format(**answer) if isinstance(answer, dict) else done


def run_change(node: Node, a: argparse.Namespace, out: Callable[[str], None] = print) -> str:
    c, f = a.command, a.formatter
    vh = getattr(a, "vhost", None) or "/"
    if c == "add_user":
        return _ok(node, "node", c, {"name": a.user, "password": a.password, "tags": a.tags}, f,
                   f'Added user "{a.user}"')
    if c in ("delete_user",):
        return _ok(node, "node", c, {"name": a.user}, f, f'Deleted user "{a.user}"')
    if c == "change_password":
        return _ok(node, "node", c, {"name": a.user, "password": a.password}, f,
                   f'Changed password for user "{a.user}"')
    if c == "set_user_tags":
        return _ok(node, "node", c, {"name": a.user, "tags": a.tags}, f, f'Set tags for user "{a.user}"')
    if c == "set_permissions":
        return _ok(node, "node", c, {"user": a.user, "vhost": vh, "configure": a.conf, "write": a.write,
                                     "read": a.read}, f, f'Set permissions for user "{a.user}" in vhost "{vh}"')
    if c == "clear_permissions":
        return _ok(node, "node", c, {"user": a.user, "vhost": vh}, f,
                   f'Cleared permissions for user "{a.user}" in vhost "{vh}"')
    if c in ("add_vhost", "delete_vhost"):
        return _ok(node, "node", c, {"name": a.name}, f, f'{"Added" if c == "add_vhost" else "Deleted"} vhost "{a.name}"')
    if c in ("set_policy", "set_operator_policy"):
        definition = parse_definition(a.definition)
        if not isinstance(definition, dict):
            raise Failure(definition.message, definition.exit_code)
        return _ok(node, "node", "set_policy", {"vhost": vh, "name": a.name, "pattern": a.pattern,
                                                "definition": definition, "priority": a.priority,
                                                "apply_to": a.apply_to, "operator": c == "set_operator_policy"},
                   f, f'Set policy "{a.name}" for pattern "{a.pattern}" in vhost "{vh}"')
    if c in ("clear_policy", "clear_operator_policy"):
        return _ok(node, "node", "clear_policy", {"vhost": vh, "name": a.name,
                                                  "operator": c == "clear_operator_policy"},
                   f, f'Cleared policy "{a.name}" in vhost "{vh}"')
    if c == "purge_queue":
        return _ok(node, "node", c, {"vhost": vh, "name": a.queue}, f,
                   f'Purged queue "{a.queue}" in vhost "{vh}": {{messages}} messages')
    if c == "delete_queue":
        return _ok(node, "node", c, {"vhost": vh, "name": a.queue, "if_unused": a.if_unused,
                                     "if_empty": a.if_empty}, f,
                   f'Deleted queue "{a.queue}" in vhost "{vh}": {{messages}} messages')
    if c == "close_connection":
        closed = sum(node.ask(host, c, {"name": a.name, "reason": a.reason})["closed"]
                     for host in node.connection_hosts())
        if not closed:
            raise Failure(f"no connection named {a.name!r} (see list_connections name)", EX_UNAVAILABLE)
        return json.dumps({"closed": closed}) if f == "json" else f'Closed connection "{a.name}"'
    if c == "store_summary":
        rows = []
        for host in node.queue_hosts():
            summary = node.ask(host, "store_summary")
            for store in ("persistent", "transient"):
                if store in summary:
                    rows.append({"host": host, "store": store, "queues": summary["queues"], **summary[store]})
        return render(rows, list(STORE_COLUMNS), f)
    if c == "cluster_status":
        return render_cluster_status(node.ask("node", "cluster_status"), f)
    if c == "forget_cluster_node":  # it shrinks every quorum queue the node was a member of: time
        node.ask("node", c, {"node": a.node}, timeout_s=forget_timeout_s)
        return json.dumps({"ok": True}) if f == "json" else f"Removed {a.node} from the cluster"
    if c in LIMITS:
        return set_limit(node, c, a.args)
    if c == "flow":
        flow_view.run(lambda: flow_snapshot(node), f, a.once, a.interval, lambda text: (out(text), sys.stdout.flush()))
        return ""
    if c in ctl_quorum.COMMANDS:
        return ctl_quorum.run(node, a, render, out, Failure)
    if c in ctl_streams.COMMANDS:
        return ctl_streams.run(node, a, render, out)
    if c in ctl_access.COMMANDS:
        return ctl_access.run(node, a, render, Failure)
    if c == "status":
        return ctl_node.render_status(ctl_node.status(node), f, _cell)
    if c == "stop":
        try:
            ctl_node.stop(node, print)
        except TimeoutError as e:
            raise Failure(str(e), EX_TEMPFAIL) from None
        return ""
    raise AssertionError(c)


def render_cluster_status(st: dict, formatter: str) -> str:
    """rabbitmqctl cluster_status's sections (and its JSON keys), plus the metadata store's leader."""
    doc = {"cluster_name": st["members"][0] if st["members"] else st["node"], "disk_nodes": st["members"],
           "running_nodes": st["running"], "metadata_leader": st["metadata_leader"],
           "metadata_voters": st["metadata_voters"], "metadata_term": st["metadata_term"]}
    if formatter == "json":
        return json.dumps(doc)
    sections = [("Disk Nodes", doc["disk_nodes"]), ("Running Nodes", doc["running_nodes"]),
                ("Metadata Store Leader", [doc["metadata_leader"] or "(none: no majority)"]),
                ("Metadata Store Members", doc["metadata_voters"])]
    lines = [f"Cluster status of node {st['node']} ...", "Basics", "", f"Cluster name: {doc['cluster_name']}"]
    for title, names in sections:
        lines += ["", title, "", *names]
    return "\n".join(lines)


# ---------------------------------------------------------------- flow
def flow_snapshot(node: Node) -> flow_view.Snapshot:
    def ask(host: str) -> list[dict] | None:
        try:
            return node.ask(host, "flow_links", timeout_s=flow_ask_timeout_s)
        except Failure as e:
            if e.code == EX_UNAVAILABLE:  # the node itself is gone: nothing to show
                raise
            return None
    # conn hosts may hold queues; every quorum host, and the WAL's process when it has one
    hosts = dict.fromkeys(node.connection_hosts() + node.queue_hosts() + node.quorum_hosts())
    return flow_view.snapshot(list(hosts), ask)


# ---------------------------------------------------------------- resource limits
# command -> its two forms, each (the word that picks it, how it reads its argument, the kind of
# limit it sets, what rabbitmqctl prints); the first form has no word
Form = tuple[str, Callable[[str], Any], str, str]
LIMITS: dict[str, tuple[Form, Form]] = {
    "set_vm_memory_high_watermark": (
        ("", cli_memory_relative, "relative", "Setting memory threshold on {node} to {arg} ..."),
        ("absolute", cli_memory_absolute, "absolute", "Setting memory threshold on {node} to {arg} bytes ...")),
    "set_disk_free_limit": (
        ("", cli_disk_absolute, "absolute", "Setting disk free limit on {node} to {arg} bytes ..."),
        ("mem_relative", cli_disk_relative, "relative",
         "Setting disk free limit on {node} to {arg} times the total RAM ...")),
}


def set_limit(node: Node, command: str, args: list[str]) -> str:
    """rabbitmqctl's `set_vm_memory_high_watermark <fraction> | absolute <value>` and
    `set_disk_free_limit <disk_limit> | mem_relative <fraction>`: its argument checks and texts."""
    plain, worded = LIMITS[command]
    word, read, kind, done = worded if args and args[0] == worded[0] else plain
    wanted = 2 if word else 1
    if len(args) != wanted:
        raise Failure("not enough arguments." if len(args) < wanted else "too many arguments.", EX_USAGE)
    try:
        value = read(args[-1])
    except UnitError as e:
        raise Failure(str(e), EX_DATAERR) from None
    answer = node.ask("node", command, {kind: value})
    return done.format(node=answer["node"], arg=args[-1])


# ---------------------------------------------------------------- arguments
def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="warrenctl", description="Administer a running warren node (rabbitmqctl style).")
    p.add_argument("-n", "--node-dir", default=str(default_node_dir), help="the node's data directory")
    p.add_argument("--admin-port", type=int, help="the node's Thespian admin port (instead of --node-dir)")
    p.add_argument("--formatter", choices=("table", "json"), default="table")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def cmd(name: str, *, vhost: bool = False, help: str = "") -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help)
        # accepted after the command too, as rabbitmqctl accepts it
        sp.add_argument("--formatter", choices=("table", "json"), default=argparse.SUPPRESS)
        if vhost:
            sp.add_argument("-p", "--vhost")
        return sp

    cmd("status", help="the node: name, ports, uptime, memory, processes")
    ctl_health.add_parsers(cmd)
    cmd("stop", help="stop the node and wait until every process of it has exited")
    cmd("cluster_status", help="the cluster's nodes, which are running, and the metadata store's leader")
    cmd("forget_cluster_node", help="remove a stopped node from the cluster for good").add_argument("node")
    cmd("store_summary", help="each queue host's message stores: files, live and garbage bytes, GC runs")
    for name in LISTINGS:
        cmd(name, vhost=name not in ("list_users", "list_vhosts")).add_argument("columns", nargs="*")
    sp = cmd("add_user"); sp.add_argument("user"); sp.add_argument("password"); sp.add_argument("--tags", nargs="*", default=[])  # noqa: E702
    cmd("delete_user").add_argument("user")
    sp = cmd("change_password"); sp.add_argument("user"); sp.add_argument("password")  # noqa: E702
    sp = cmd("set_user_tags"); sp.add_argument("user"); sp.add_argument("tags", nargs="*")  # noqa: E702
    sp = cmd("set_permissions", vhost=True)
    for arg in ("user", "conf", "write", "read"):
        sp.add_argument(arg)
    cmd("clear_permissions", vhost=True).add_argument("user")
    cmd("add_vhost").add_argument("name")
    cmd("delete_vhost").add_argument("name")
    for name in ("set_policy", "set_operator_policy"):
        sp = cmd(name, vhost=True)
        sp.add_argument("name"); sp.add_argument("pattern"); sp.add_argument("definition")  # noqa: E702
        sp.add_argument("--priority", type=int, default=0)
        sp.add_argument("--apply-to", dest="apply_to", default="all")
    for name in ("clear_policy", "clear_operator_policy"):
        cmd(name, vhost=True).add_argument("name")
    cmd("purge_queue", vhost=True).add_argument("queue")
    sp = cmd("delete_queue", vhost=True); sp.add_argument("queue")  # noqa: E702
    sp.add_argument("--if-unused", action="store_true"); sp.add_argument("--if-empty", action="store_true")  # noqa: E702
    sp = cmd("close_connection"); sp.add_argument("name"); sp.add_argument("reason")  # noqa: E702
    sp = cmd("flow", help="the publish chain reader -> channel -> queue -> store, live, and its bottleneck")
    sp.add_argument("--once", action="store_true", help="print one snapshot and exit")
    sp.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes (default 2)")
    ctl_quorum.add_parsers(cmd)
    ctl_streams.add_parsers(cmd)
    ctl_access.add_parsers(cmd)
    cmd("set_vm_memory_high_watermark", help="<fraction> | absolute <value>: the memory alarm's limit, "
        "until the node restarts").add_argument("args", nargs="*")
    cmd("set_disk_free_limit", help="<disk_limit> | mem_relative <fraction>: the disk alarm's limit, "
        "until the node restarts").add_argument("args", nargs="*")
    return p


def health(a: argparse.Namespace, out: Callable[[str], None]) -> int:
    """A health check (scripts/ctl_health.py); await_startup waits for a node that has not written
    its admin port yet."""
    if a.command == "await_startup" and not a.admin_port:
        node = Node(0, Path(a.node_dir))
    else:
        node = find_node(a)
    outcome = ctl_health.run(node, a.command, a, Failure)
    stdout, stderr = outcome.render(a.formatter)
    if stdout:
        out(stdout)
    if stderr:
        print(stderr, file=sys.stderr)
    return outcome.code


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    try:
        a = parser().parse_args(argv)
        if a.command in ctl_health.COMMANDS:
            return health(a, out)
        node = find_node(a)
        text = run_listing(node, a) if a.command in LISTINGS else run_change(node, a, out)
    except KeyboardInterrupt:  # how a live view ends
        return 0
    except Failure as e:
        print(f"{e.kind}: " + " ".join(str(e).replace("\n\n", ": ").split()), file=sys.stderr)
        return e.code
    if text:
        out(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
