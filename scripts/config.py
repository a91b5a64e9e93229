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
unless given) in `listeners.tcp.default.ip`.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import psutil

from flow.alarms import (DEFAULT_DISK_FREE_LIMIT_BYTES, DEFAULT_MEMORY_WATERMARK, MAX_MEMORY_WATERMARK, AbsoluteLimit,
                         Limit, RelativeLimit, memory_limit_bytes)
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
    "connection_moves": True,  # a running connection may move to its queue's host (actors/reader/mover.py)
    "admin_port": 0,
    "consumer_timeout": 1800000,
    "handshake_timeout": 10000,
    "max_message_size": 134217728,
    "listeners.ssl.default": 0,
    "ssl_options.certfile": "",
    "ssl_options.keyfile": "",
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
    "management.tcp.port": 15672,
    "management.tcp.ip": "127.0.0.1",
    "prometheus.tcp.port": 15692,
    "collect_statistics_interval": 5000,
    "raft.segment_max_entries": 4096,  # a quorum queue member's entries per segment file
    "raft.wal_max_size_bytes": 536870912,  # the node's quorum WAL rolls into segments at this size
    "raft.tick_ms": 250,  # quorum members' clock (heartbeats every 2 ticks, elections after 8-16)
    "quorum_cluster_size": 3,  # members of a new quorum queue without x-quorum-initial-group-size
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


def _conf_count(key: str, value: str) -> int:
    if not value.isdigit():
        raise ConfigError(f"{key} must be 0 or a positive integer, got {value!r}")
    return int(value)


PARSERS: dict[str, Callable[[str, str], Any]] = {
    "connection_hosts": _conf_positive, "queue_hosts": _conf_count, "connection_moves": _conf_bool,
    CMR + "enabled": _conf_bool, CMR + "auto_remove": _conf_bool, CMR + "target_group_size": _conf_positive,
    RELAXED_CHECKS: _conf_bool,
    "listeners.tcp.default": _conf_listener,
    "vm_memory_high_watermark.relative": _conf_float, "vm_memory_high_watermark.absolute": _conf_size,
    "disk_free_limit.relative": _conf_float, "disk_free_limit.absolute": _conf_size,
}


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
    watermark, _ = memory_watermark(conf)
    if isinstance(watermark, RelativeLimit):
        conf["vm_memory_high_watermark"] = str(min(watermark.fraction, MAX_MEMORY_WATERMARK))
    else:
        total = total_memory_bytes or psutil.virtual_memory().total
        conf["vm_memory_high_watermark"] = str(memory_limit_bytes(watermark, total)[0] / total)
    return conf


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
