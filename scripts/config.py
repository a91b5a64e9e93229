"""warren.conf: RabbitMQ-style `key = value` lines, so a RabbitMQ user finds the names they know.

Unknown keys are an error (a typo should not be silently ignored); values are ints where the
default is an int. Command-line flags override the file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "listeners.tcp.default": 5672,
    "node_name": "warren",
    "data_dir": "",
    "frame_max": 131072,
    "channel_max": 2047,
    "heartbeat": 60,
    "credit_flow_default_credit.initial": 400,
    "credit_flow_default_credit.more_after": 200,
    "connection_hosts": 2,
    "queue_hosts": 1,
    "admin_port": 0,
    "consumer_timeout": 1800000,
    "listeners.ssl.default": 0,
    "ssl_options.certfile": "",
    "ssl_options.keyfile": "",
    "default_user": "guest",
    "default_pass": "guest",
    "loopback_users": "guest",
    "queue_index_embed_msgs_below": 4096,
    "msg_store_file_size_limit": 16777216,
    "vm_memory_high_watermark": "0.4",
    "vm_memory_high_watermark_paging_ratio": "0.5",
    "disk_free_limit": 50000000,
}


class ConfigError(ValueError):
    pass


def parse(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = (part.strip() for part in line.partition("="))
        if not sep or not key:
            raise ConfigError(f"line {lineno}: expected 'key = value', got {raw!r}")
        if key not in DEFAULTS:
            raise ConfigError(f"line {lineno}: unknown setting {key!r}")
        if isinstance(DEFAULTS[key], int):
            try:
                out[key] = int(value)
            except ValueError:
                raise ConfigError(f"line {lineno}: {key} must be an integer, got {value!r}") from None
        else:
            out[key] = value
    return out


def load(path: Path | None, overrides: dict[str, Any]) -> dict[str, Any]:
    conf = dict(DEFAULTS)
    if path is not None:
        conf.update(parse(Path(path).read_text()))
    conf.update({k: v for k, v in overrides.items() if v is not None})
    return conf
