"""AMQP errors as values.

Theory of operation: nothing in warren raises across a core boundary for a protocol error. A core
returns an `AmqpError`; the shell turns it into channel.close or connection.close. The reply text is
built exactly as RabbitMQ builds it, `"<CODE_NAME> - <detail>"`, because clients and people match on it
(e.g. ``PRECONDITION_FAILED - unknown delivery tag 5``). Whether the error closes the channel or the
whole connection follows the code: 3xx/4xx codes are channel errors, 5xx codes are connection errors
(AMQP 0-9-1 §1.2 "soft" and "hard" errors), except where RabbitMQ closes the connection for a soft code
(e.g. 403 during connection.open), which the caller says with ``connection=True``.
"""
from __future__ import annotations

from dataclasses import dataclass

# Reply codes (AMQP 0-9-1 constants).
REPLY_SUCCESS = 200
CONTENT_TOO_LARGE = 311
NO_ROUTE = 312
NO_CONSUMERS = 313
CONNECTION_FORCED = 320
INVALID_PATH = 402
ACCESS_REFUSED = 403
NOT_FOUND = 404
RESOURCE_LOCKED = 405
PRECONDITION_FAILED = 406
FRAME_ERROR = 501
SYNTAX_ERROR = 502
COMMAND_INVALID = 503
CHANNEL_ERROR = 504
UNEXPECTED_FRAME = 505
RESOURCE_ERROR = 506
NOT_ALLOWED = 530
NOT_IMPLEMENTED = 540
INTERNAL_ERROR = 541

CODE_NAMES: dict[int, str] = {
    REPLY_SUCCESS: "REPLY_SUCCESS",
    CONTENT_TOO_LARGE: "CONTENT_TOO_LARGE",
    NO_ROUTE: "NO_ROUTE",
    NO_CONSUMERS: "NO_CONSUMERS",
    CONNECTION_FORCED: "CONNECTION_FORCED",
    INVALID_PATH: "INVALID_PATH",
    ACCESS_REFUSED: "ACCESS_REFUSED",
    NOT_FOUND: "NOT_FOUND",
    RESOURCE_LOCKED: "RESOURCE_LOCKED",
    PRECONDITION_FAILED: "PRECONDITION_FAILED",
    FRAME_ERROR: "FRAME_ERROR",
    SYNTAX_ERROR: "SYNTAX_ERROR",
    COMMAND_INVALID: "COMMAND_INVALID",
    CHANNEL_ERROR: "CHANNEL_ERROR",
    UNEXPECTED_FRAME: "UNEXPECTED_FRAME",
    RESOURCE_ERROR: "RESOURCE_ERROR",
    NOT_ALLOWED: "NOT_ALLOWED",
    NOT_IMPLEMENTED: "NOT_IMPLEMENTED",
    INTERNAL_ERROR: "INTERNAL_ERROR",
}

HARD_CODES = frozenset(
    {CONNECTION_FORCED, INVALID_PATH, FRAME_ERROR, SYNTAX_ERROR, COMMAND_INVALID, CHANNEL_ERROR,
     UNEXPECTED_FRAME, RESOURCE_ERROR, NOT_ALLOWED, NOT_IMPLEMENTED, INTERNAL_ERROR}
)


REPLY_TEXT_OCTETS_MAX = 255  # a shortstr


@dataclass(frozen=True, slots=True)
class AmqpError:
    """A protocol error: `code` and `detail`, plus the method that caused it (0, 0 when none)."""

    code: int
    detail: str
    class_id: int = 0
    method_id: int = 0
    connection: bool = False  # force a connection-level close for a soft code

    @property
    def text(self) -> str:
        """The reply-text RabbitMQ sends: ``CODE_NAME - detail``, cut as its
        amqp_exception_explanation cuts it to fit a shortstr: past 255 octets, the first 252 and "...".
        No detail: the bare name, as RabbitMQ's reader sends for a channel that crashed."""
        if not self.detail:
            return CODE_NAMES[self.code]
        text = f"{CODE_NAMES[self.code]} - {self.detail}"
        raw = text.encode("utf-8", "surrogateescape")
        if len(raw) <= REPLY_TEXT_OCTETS_MAX:
            return text
        return (raw[:REPLY_TEXT_OCTETS_MAX - 3] + b"...").decode("utf-8", "surrogateescape")

    @property
    def hard(self) -> bool:
        """True when this error closes the connection rather than the channel."""
        return self.connection or self.code in HARD_CODES

    def at(self, class_id: int, method_id: int) -> "AmqpError":
        """The same error, attributed to the method that caused it."""
        return AmqpError(self.code, self.detail, class_id, method_id, self.connection)
