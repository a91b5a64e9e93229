"""warren.conf: RabbitMQ-style `key = value` lines, so a RabbitMQ user finds the names they know.

Unknown keys are an error (a typo should not be silently ignored); values are ints where the
default is an int. Command-line flags override the file.

The resource limits read as rabbitmq.conf's (cuttlefish) do, with RabbitMQ's refusals:
- `vm_memory_high_watermark.relative` (a float written with a point: `0.4`, not `1`) or
  `vm_memory_high_watermark.absolute` (bytes, or a size with a unit: `2GB`, `512MiB`, flow/units.py);
  with neither, 0.4; with both, absolute wins with RabbitMQ's warning (`memory_watermark`);
- `disk_free_limit.absolute` (default 50MB) or `disk_free_limit.relative` (a multiple of the RAM),
  the same way (`disk_free_limit`).
A size that passes rabbitmq.conf's check but that the broker cannot read (`1.5GB`) is kept, and
the monitor logs it and uses the default, as RabbitMQ. The older warren keys are aliases:
`vm_memory_high_watermark = F` is `vm_memory_high_watermark.relative = F` and
`disk_free_limit = N` is `disk_free_limit.absolute = N`; of two lines for one setting the later
wins. After loading, `vm_memory_high_watermark` holds the watermark in force as a fraction of the
RAM, for the paging threshold (paging ratio x watermark x RAM). `listeners.tcp.default` takes
rabbitmq.conf's `PORT` or `IP:PORT`; `load` leaves the port there and the address (127.0.0.1
unless given) in `listeners.tcp.default.ip`. `management.tcp.port` and `prometheus.tcp.port` left
unset follow the AMQP port (+ 10000 and + 10020: RabbitMQ's 15672 and 15692 beside 5672), so that
nodes with AMQP ports of their own on one machine never share an HTTP port (README's cluster recipe).

TLS and logins read as RabbitMQ's: `ssl_options.*` for the AMQPS listener and `management.ssl.*`
for the HTTPS API (cacertfile, certfile, keyfile, password, verify = verify_peer | verify_none,
fail_if_no_peer_cert, depth, and the lists `versions.N` and `ciphers.N`), `auth_mechanisms.N`
(PLAIN, AMQPLAIN, EXTERNAL) and `ssl_cert_login_from` (distinguished_name | common_name). A list's
entries keep the order of the file (`ssl_options.versions.1 = tlsv1.2`). `access_settings` gives
the hosts what they need of these (actors/reader/tls.py reads the TLS options).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import psutil

from flow.alarms import (DEFAULT_DISK_FREE_LIMIT_BYTES, DEFAULT_MEMORY_WATERMARK, MAX_MEMORY_WATERMARK, AbsoluteLimit,
                         Limit, RelativeLimit, memory_limit_bytes)
from actors.quorum.machine import MACHINE_VERSION
from flow.units import UnitError, conf_size

CMR = "quorum_queue.continuous_membership_reconciliation."
RELAXED_CHECKS = "quorum_queue.property_equivalence.relaxed_checks_on_redeclaration"
DEFAULTS: dict[str, Any] = {
    "listeners.tcp.default": 5672,  # PORT, or IP:PORT to listen on one address (load splits it)
    "node_name": "warren",
    "data_dir": "",
    "frame_max": 131072,
    "channel_max": 2047,
    "heartbeat": 60,
    "credit_flow_default_credit.initial": 400,
    "credit_flow_default_credit.more_after": 200,
    "connection_hosts": 2,
    "queue_hosts": 0,  # 0: classic queues run in the connection hosts (actors/placement.py)
    "quorum_hosts": 0,  # 0: from the machine's cores (default_quorum_hosts); the same on every node of a cluster
    "connection_moves": True,  # a running connection may move to its queue's host (actors/reader/mover.py)
    "admin_port": 0,
    "consumer_timeout": 1800000,
    "handshake_timeout": 10000,
    "stop_timeout": 30000,  # ms a stop gives the hosts before it kills those still running
    "max_message_size": 134217728,
    "listeners.ssl.default": 0,
    **{f"{prefix}.{key}": value for prefix in ("ssl_options", "management.ssl") for key, value in (
        ("certfile", ""), ("keyfile", ""), ("cacertfile", ""), ("password", ""), ("verify", "verify_none"),
        ("fail_if_no_peer_cert", False), ("depth", None), ("versions", ()), ("ciphers", ()))},
    "management.ssl.port": 0,  # the HTTPS API (0: off)
    "management.ssl.ip": "",  # "": management.tcp.ip
    "auth_mechanisms": ("PLAIN", "AMQPLAIN"),
    "ssl_cert_login_from": "distinguished_name",
    "default_user": "guest",
    "default_pass": "guest",
    "loopback_users": "guest",
    "queue_index_embed_msgs_below": 4096,
    "msg_store_file_size_limit": 16777216,
    "vm_memory_high_watermark.relative": None,
    "vm_memory_high_watermark.absolute": None,
    "vm_memory_high_watermark": str(DEFAULT_MEMORY_WATERMARK),  # derived by `load`: see the docstring
    "vm_memory_high_watermark_paging_ratio": "0.5",
    "disk_free_limit.absolute": None,
    "disk_free_limit.relative": None,
    "cluster.port": 0,  # 0: the AMQP port + 20000, RabbitMQ's distribution port rule
    "cluster.interface": "127.0.0.1",
    "cluster.cookie_file": "",  # "": ~/.warren.cookie, as Erlang's ~/.erlang.cookie
    "cluster.node_down_after": 5000,  # ms of silence after which a peer node counts as down
    "metadata.timeout": 30000,  # ms a metadata change may wait for the group (khepri_default_timeout)
    "management.tcp.port": None,  # None: the AMQP port + 10000 (15672 beside 5672); 0: off
    "management.tcp.ip": "127.0.0.1",
    "prometheus.tcp.port": None,  # None: the AMQP port + 10020 (15692 beside 5672); 0: off
    "collect_statistics_interval": 5000,
    "raft.segment_max_entries": 4096,  # a quorum queue member's entries per segment file
    "raft.wal_max_size_bytes": 536870912,  # the node's quorum WAL rolls into segments at this size
    "raft.tick_ms": 250,  # busy quorum groups' clock (heartbeats every 2 ticks, elections after 8-16)
    "quorum_cluster_size": 3,  # members of a new quorum queue without x-quorum-initial-group-size
    # the newest quorum queue machine version this node runs (actors/quorum/machine.py): a group
    # switches once all its members' nodes run it (docs/UPGRADES.md); 1 is RabbitMQ 4.0's behaviour
    "quorum_queue.machine_version": 1,
    "queue_leader_locator": None,  # None: client-local; balanced (a policy or x-queue-leader-locator wins)
    RELAXED_CHECKS: False,  # true: redeclaring a quorum queue as classic compares seven arguments only
    # RabbitMQ 4.0's continuous membership reconciliation of quorum queues (actors/node/quorum_membership.py)
    CMR + "enabled": False,
    CMR + "target_group_size": None,  # none: reconciliation grows no queue without x-quorum-target-group-size
    CMR + "auto_remove": False,
    CMR + "interval": 3_600_000,
    CMR + "trigger_interval": 10_000,
}
LISTENER_IP = "listeners.tcp.default.ip"  # derived by `load`: the address of `listeners.tcp.default`
ALIASES = {"vm_memory_high_watermark": "vm_memory_high_watermark.relative",
           "disk_free_limit": "disk_free_limit.absolute"}
# rabbitmq.conf's lists: `KEY.N = value`, gathered in the file's order under KEY
_LISTS = re.compile(r"(ssl_options\.versions|ssl_options\.ciphers|management\.ssl\.versions|"
                    r"management\.ssl\.ciphers|auth_mechanisms)\.[A-Za-z0-9_]+")
_FLOAT = re.compile(r"[+-]?[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?")  # cuttlefish's float datatype (Erlang's)


class ConfigError(ValueError):
    pass


def _conf_float(key: str, value: str) -> float:
    if _FLOAT.fullmatch(value) is None:
        raise ConfigError(f'Error transforming datatype for: {key}: "{value}" cannot be converted to a(n) float')
    return float(value)


def _conf_size(key: str, value: str) -> int | str:
    try:
        return conf_size(value)
    except UnitError as e:
        raise ConfigError(f"{key} invalid, {e}") from None


def _conf_listener(key: str, value: str) -> int | tuple[str, int]:
    """rabbitmq.conf's listener: `PORT` (on 127.0.0.1 here) or `IP:PORT` (`listeners.tcp.default = 10.0.0.5:5672`)."""
    ip, sep, port = value.rpartition(":")
    if not port.isdigit() or (sep and not ip):
        raise ConfigError(f"{key} must be PORT or IP:PORT, got {value!r}")
    return (ip, int(port)) if sep else int(port)


def _conf_bool(key: str, value: str) -> bool:
    if value not in ("true", "false"):
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    return value == "true"


def _conf_positive(key: str, value: str) -> int:
    if not value.isdigit() or int(value) == 0:
        raise ConfigError(f"{key} must be a positive integer, got {value!r}")
    return int(value)


def _conf_choice(*choices: str) -> Callable[[str, str], str]:
    def parse(key: str, value: str) -> str:
        if value not in choices:
            raise ConfigError(f"{key} must be one of {', '.join(choices)}, got {value!r}")
        return value
    return parse


def _conf_machine_version(key: str, value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= MACHINE_VERSION:
        raise ConfigError(f"{key} must be a machine version this code runs, 1 to {MACHINE_VERSION}, got {value!r}")
    return int(value)


def default_quorum_hosts(cores: int, connection_hosts: int) -> int:
    """The quorum hosts of a node that does not set `quorum_hosts`: as many as connection hosts,
    as far as the cores leave one each beside the connection hosts and two more (the WAL's own
    process and the node host with the rest), else 1. Measured (bench/RESULTS.md, 2026-12-03,
    "quorum queues over several quorum hosts"): a quorum message costs the members about what it
    costs the connection hosts (~22 µs each, flat out), so N quorum hosts keep up with N
    connection hosts; and on this (loaded) 2-core machine 2 quorum hosts and the WAL's process
    carried no more than 1 quorum host, for about as much CPU a message or up to ~18% more, and a
    higher p50 at 1,000 msg/s (two more processes to wake per commit), which is why a small
    machine keeps 1 (the WAL then lives in the quorum host). So 1 below 6 cores with the default
    2 connection hosts, 2 from 6."""
    return max(1, min(connection_hosts, cores - connection_hosts - 2))


def _conf_count(key: str, value: str) -> int:
    if not value.isdigit():
        raise ConfigError(f"{key} must be 0 or a positive integer, got {value!r}")
    return int(value)


PARSERS: dict[str, Callable[[str, str], Any]] = {
    "connection_hosts": _conf_positive, "queue_hosts": _conf_count, "quorum_hosts": _conf_count,
    "connection_moves": _conf_bool,
    CMR + "enabled": _conf_bool, CMR + "auto_remove": _conf_bool, CMR + "target_group_size": _conf_positive,
    RELAXED_CHECKS: _conf_bool, "quorum_queue.machine_version": _conf_machine_version,
    "listeners.tcp.default": _conf_listener,
    "vm_memory_high_watermark.relative": _conf_float, "vm_memory_high_watermark.absolute": _conf_size,
    "disk_free_limit.relative": _conf_float, "disk_free_limit.absolute": _conf_size,
    "ssl_cert_login_from": _conf_choice("distinguished_name", "common_name"),
    **{f"{prefix}.{key}": parse for prefix in ("ssl_options", "management.ssl") for key, parse in (
        ("verify", _conf_choice("verify_peer", "verify_none")), ("fail_if_no_peer_cert", _conf_bool),
        ("depth", _conf_count))},
    "management.tcp.port": _conf_count, "prometheus.tcp.port": _conf_count,
}
# the HTTP listeners' ports when none is set: RabbitMQ's defaults beside its default AMQP port, and
# beside another AMQP port the same offsets, so that nodes given AMQP ports of their own (a cluster
# on one machine) get HTTP ports of their own, as the cluster port follows the AMQP port (+ 20000)
HTTP_PORT_OFFSETS = {"management.tcp.port": 10000, "prometheus.tcp.port": 10020}


def parse(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = (part.strip() for part in line.partition("="))
        if not sep or not key:
            raise ConfigError(f"line {lineno}: expected 'key = value', got {raw!r}")
        written, key = key, ALIASES.get(key, key)
        listed = _LISTS.fullmatch(key)
        if listed is not None:
            out[listed.group(1)] = (*out.get(listed.group(1), ()), value)
            continue
        if key not in DEFAULTS:
            raise ConfigError(f"line {lineno}: unknown setting {key!r}")
        if key in PARSERS:
            try:
                out[key] = PARSERS[key](written, value)
            except ConfigError as e:
                raise ConfigError(f"line {lineno}: {e}") from None
        elif isinstance(DEFAULTS[key], int):
            try:
                out[key] = int(value)
            except ValueError:
                raise ConfigError(f"line {lineno}: {key} must be an integer, got {value!r}") from None
        else:
            out[key] = value
    return out


def load(path: Path | None, overrides: dict[str, Any], *, total_memory_bytes: int | None = None) -> dict[str, Any]:
    conf = dict(DEFAULTS, **{LISTENER_IP: "127.0.0.1"})
    if path is not None:
        conf.update(parse(Path(path).read_text()))
    if isinstance(conf["listeners.tcp.default"], tuple):  # IP:PORT; a --port flag then changes the port only
        conf[LISTENER_IP], conf["listeners.tcp.default"] = conf["listeners.tcp.default"]
    conf.update({k: v for k, v in overrides.items() if v is not None})
    for key, offset in HTTP_PORT_OFFSETS.items():
        if conf[key] is None:
            conf[key] = conf["listeners.tcp.default"] + offset
            if conf[key] > 65535:
                raise ConfigError(f"{key} (the AMQP port + {offset}) would be {conf[key]}, out of range: set it")
    watermark, _ = memory_watermark(conf)
    if isinstance(watermark, RelativeLimit):
        conf["vm_memory_high_watermark"] = str(min(watermark.fraction, MAX_MEMORY_WATERMARK))
    else:
        total = total_memory_bytes or psutil.virtual_memory().total
        conf["vm_memory_high_watermark"] = str(memory_limit_bytes(watermark, total)[0] / total)
    return conf


def tls_options(conf: dict[str, Any], prefix: str) -> dict[str, Any] | None:
    """A listener's TLS options (actors/reader/tls.py's TlsOptions as a dict), None without a certificate."""
    if not conf[f"{prefix}.certfile"]:
        return None
    return {key: conf[f"{prefix}.{key}"] for key in ("certfile", "keyfile", "cacertfile", "verify",
                                                     "fail_if_no_peer_cert", "depth", "versions", "ciphers", "password")}


def access_settings(conf: dict[str, Any]) -> dict[str, Any]:
    """What the hosts need of the TLS and login settings: the AMQPS listener, the mechanisms, how
    EXTERNAL names its user, and the HTTPS API."""
    return {"tls_port": conf["listeners.ssl.default"], "tls": tls_options(conf, "ssl_options"),
            "auth_mechanisms": list(conf["auth_mechanisms"]), "ssl_cert_login_from": conf["ssl_cert_login_from"],
            "management_ssl_port": conf["management.ssl.port"],
            "management_ssl_ip": conf["management.ssl.ip"] or conf["management.tcp.ip"],
            "management_tls": tls_options(conf, "management.ssl")}


def memory_watermark(conf: dict[str, Any]) -> tuple[Limit, list[str]]:
    """The memory limit the configuration sets, and RabbitMQ's warning when it sets two."""
    return _limit(conf, "vm_memory_high_watermark", RelativeLimit(DEFAULT_MEMORY_WATERMARK))


def disk_free_limit(conf: dict[str, Any]) -> tuple[Limit, list[str]]:
    """The free disk space limit the configuration sets, and RabbitMQ's warning when it sets two."""
    return _limit(conf, "disk_free_limit", AbsoluteLimit(DEFAULT_DISK_FREE_LIMIT_BYTES))


def _limit(conf: dict[str, Any], name: str, default: Limit) -> tuple[Limit, list[str]]:
    absolute, relative = conf[f"{name}.absolute"], conf[f"{name}.relative"]
    if absolute is not None:
        both = relative is not None
        return AbsoluteLimit(absolute), [f"Both {name}.absolute and {name}.relative are configured. "
                                         f"{name}.absolute has precedence"] if both else []
    return (RelativeLimit(relative) if relative is not None else default), []
