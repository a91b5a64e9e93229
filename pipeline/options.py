"""The `amqp` data source's options (Spark passes them case-insensitively, as strings)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

batch_max_default = 10_000
partitions_default = 2
idle_s_default = 2.0
confirm_window_default = 1_000
confirm_timeout_s_default = 60.0
prefetch_max = 65_535  # basic.qos prefetch-count is a 16-bit field


def _int(options: Mapping[str, str], key: str, default: int, low: int = 1, high: int | None = None) -> int:
    raw = options.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {key} must be an integer, not {raw!r}") from None
    if value < low:
        raise ValueError(f"option {key} must be at least {low}, not {value}")
    if high is not None and value > high:
        raise ValueError(f"option {key} must be at most {high}, not {value}")
    return value


def _float(options: Mapping[str, str], key: str, default: float) -> float:
    raw = options.get(key)
    try:
        return default if raw is None else float(raw)
    except ValueError:
        raise ValueError(f"option {key} must be a number, not {raw!r}") from None


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    if str(raw).lower() not in ("true", "false"):
        raise ValueError(f"option {key} must be true or false, not {raw!r}")
    return str(raw).lower() == "true"


def _required(options: Mapping[str, str], key: str) -> str:
    value = options.get(key)
    if not value:
        raise ValueError(f"the amqp data source needs option {key!r}")
    return value


@dataclass(frozen=True)
class SourceOptions:
    """url (amqp://user:pass@host:port/vhost), queue; maxMessagesPerBatch (a micro-batch's rows at
    most), prefetch (basic.qos, at most 65535; default twice maxMessagesPerBatch, since a committed
    batch is acked only when the next one is planned), numPartitions (tasks a batch is split into), and
    availableNowIdleSeconds (with Trigger.AvailableNow, how long to wait for a message the queue
    announced before ending the run without it, e.g. because another consumer took it); and for a
    stream queue streamOffset, where its consumer starts (x-stream-offset: first, last, next, an
    offset, or an interval such as 30m); with it, Trigger.AvailableNow reads until nothing came for
    availableNowIdleSeconds (a stream reports no ready count to aim at)."""
    url: str
    queue: str
    batch_max: int
    prefetch: int
    partitions: int
    idle_s: float
    stream_offset: str | int | None = None

    @staticmethod
    def parse(options: Mapping[str, str]) -> "SourceOptions":
        batch_max = _int(options, "maxMessagesPerBatch", batch_max_default)
        offset: str | int | None = options.get("streamOffset")
        if offset is not None and str(offset).lstrip("-").isdigit():
            offset = int(offset)
        return SourceOptions(_required(options, "url"), _required(options, "queue"), batch_max,
                             _int(options, "prefetch", min(2 * batch_max, prefetch_max), low=0, high=prefetch_max),
                             _int(options, "numPartitions", partitions_default),
                             _float(options, "availableNowIdleSeconds", idle_s_default), offset)


@dataclass(frozen=True)
class SinkOptions:
    """url, exchange (default "" the default exchange), routing_key (default "", overridden per row by
    a routing_key column), mandatory (default true: an unroutable message fails the task),
    confirmWindow (unconfirmed publishes at most) and confirmTimeoutSeconds."""
    url: str
    exchange: str
    routing_key: str
    mandatory: bool
    window_max: int
    confirm_timeout_s: float

    @staticmethod
    def parse(options: Mapping[str, str]) -> "SinkOptions":
        return SinkOptions(_required(options, "url"), options.get("exchange") or "",
                           options.get("routing_key") or "", _bool(options, "mandatory", True),
                           _int(options, "confirmWindow", confirm_window_default),
                           _float(options, "confirmTimeoutSeconds", confirm_timeout_s_default))
