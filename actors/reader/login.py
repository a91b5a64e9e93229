"""Who may connect: the mechanisms offered, the login, and the checks at connection.open and
channel.open, as rabbit_reader 3.10 makes them. A pure core over the registry's decisions.

Theory of operation: the `Gatekeeper` holds what a connection host knows - its registry replica
(users, permissions, limits: metadata/access.py and limits.py decide), the configuration
(`auth_mechanisms`, `loopback_users`, `ssl_cert_login_from`, whether TLS peers are verified) and the
cluster's connection and channel counts (actors/reader/tracking.py) - and the connection core
(core.py) asks it, with the facts of one connection (`Peer`: loopback or not, TLS or not, the
certificate):
- `offered(peer)`: connection.start's mechanisms, in RabbitMQ's order (AMQPLAIN, PLAIN, EXTERNAL)
  among those configured; EXTERNAL only on a TLS connection (rabbit_auth_mechanism_ssl:should_offer);
- `login(mechanism, response, peer)`: a `Login` (the user and its tags at that moment) or a
  `Refused` with the text RabbitMQ logs ("PLAIN login refused: user 'bob' - invalid credentials",
  the same whether the user exists or not; "user 'guest' can only connect via localhost";
  "EXTERNAL login refused: connection peer presented no TLS (x.509) certificate"), or a
  `Malformed` response (a syntax error: the socket closes). EXTERNAL takes the user from the
  certificate (metadata/cert_login.py) and checks no password;
- `open_refusal(user, vhost)`: connection.open - the vhost's max-connections, the user's
  max-connections (with the connections open in the whole cluster), then the permissions;
- `channel_refusal(user)`: channel.open - the user's max-channels.
A bare `check_login(user, password)` callable still works in place of a Gatekeeper (tests of the
handshake that need no registry).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from metadata.cert_login import DISTINGUISHED_NAME, CertRefusal, cert_username
from wire.codec import DecodeError, decode_table
from wire.errors import AmqpError

PLAIN, AMQPLAIN, EXTERNAL = "PLAIN", "AMQPLAIN", "EXTERNAL"
MECHANISM_ORDER = (AMQPLAIN, PLAIN, EXTERNAL)  # the order rabbit_registry lists them in 3.10
DEFAULT_MECHANISMS = (PLAIN, AMQPLAIN)  # rabbitmq.conf's auth_mechanisms default


@dataclass(frozen=True, slots=True)
class Peer:
    """The facts of one connection that a login depends on."""

    loopback: bool = True
    tls: bool = False
    cert: bytes | None = None  # the verified client certificate (DER), on a TLS connection that sent one


@dataclass(frozen=True, slots=True)
class Login:
    user: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Refused:
    user: str
    reason: str  # what RabbitMQ logs: "<MECHANISM> login refused: ..."


@dataclass(frozen=True, slots=True)
class Malformed:
    reason: str


def parse_credentials(mechanism: str, response: bytes) -> tuple[str, str] | None:
    """(user, password) from a PLAIN or AMQPLAIN response, None if malformed."""
    if mechanism == PLAIN:
        parts = response.split(b"\x00")
        if len(parts) != 3:
            return None
        return parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
    if mechanism == AMQPLAIN:
        # an AMQPLAIN response is a field table without its leading length
        try:
            fields, _ = decode_table(len(response).to_bytes(4, "big") + response, 0)
        except DecodeError:
            return None
        login, password = fields.get("LOGIN"), fields.get("PASSWORD")
        if login is None or password is None:
            return None
        as_text = (lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v))
        return as_text(login), as_text(password)
    return None


def password_login(check: Callable[[str, str], bool], mechanism: str, response: bytes) -> str | Refused | Malformed:
    """PLAIN and AMQPLAIN: the user whose password checks, or why not."""
    creds = parse_credentials(mechanism, response)
    if creds is None:
        return Malformed(f"{mechanism} response {response!r} invalid")
    user, password = creds
    if not check(user, password):
        return Refused(user, f"{mechanism} login refused: user '{user}' - invalid credentials")
    return user


def loopback_checked(user: str, tags: tuple[str, ...], mechanism: str, loopback_users: frozenset[str],
                     peer: Peer) -> Login | Refused:
    """rabbit_access_control:check_user_loopback, after the credentials were accepted."""
    if user in loopback_users and not peer.loopback:
        return Refused(user, f"{mechanism} login refused: user '{user}' can only connect via localhost")
    return Login(user, tags)


@dataclass(frozen=True, slots=True)
class Gatekeeper:
    registry: Any  # the host's registry replica (metadata/registry.py)
    loopback_users: frozenset[str] = frozenset({"guest"})
    mechanisms: tuple[str, ...] = DEFAULT_MECHANISMS  # auth_mechanisms
    cert_login_from: str = DISTINGUISHED_NAME  # ssl_cert_login_from
    verify_peer: bool = False  # ssl_options.verify = verify_peer (EXTERNAL needs it)
    tracking: Any = None  # the cluster's connection and channel counts (tracking.py); None: never counted

    def offered(self, peer: Peer) -> tuple[str, ...]:
        return tuple(m for m in MECHANISM_ORDER if m in self.mechanisms and (m != EXTERNAL or peer.tls))

    def login(self, mechanism: str, response: bytes, peer: Peer) -> Login | Refused | Malformed:
        if mechanism == EXTERNAL:
            name = cert_username(peer.cert, self.cert_login_from, self.verify_peer)
            if isinstance(name, CertRefusal):
                return Refused("", f"EXTERNAL login refused: {name.reason}")
            if not self.registry.access.login_external(name):
                return Refused(name, f"EXTERNAL login refused: user '{name}' - invalid credentials")
            user = name
        else:
            user = password_login(self.registry.check_login, mechanism, response)
            if not isinstance(user, str):
                return user
        return loopback_checked(user, self.registry.access.tags_of(user), mechanism, self.loopback_users, peer)

    def open_refusal(self, user: str, vhost: str) -> AmqpError | None:
        limits = self.registry.limits
        if self.tracking is not None:
            refused = limits.connection_refusal(user, vhost, self.tracking.vhost_connections(vhost),
                                                self.tracking.user_connections(user))
            if refused is not None:
                return refused
        return self.registry.vhost_access_error(user, vhost)

    def channel_refusal(self, user: str) -> AmqpError | None:
        if self.tracking is None:
            return None
        return self.registry.limits.channel_refusal(user, self.tracking.user_channels(user))


class PasswordOnly:
    """A Gatekeeper's face for a bare check_login callable: PLAIN and AMQPLAIN, nothing else checked."""

    mechanisms = DEFAULT_MECHANISMS

    def __init__(self, check_login: Callable[[str, str], bool], loopback_users: frozenset[str]) -> None:
        self._check = check_login
        self.loopback_users = loopback_users

    def offered(self, peer: Peer) -> tuple[str, ...]:
        return (AMQPLAIN, PLAIN)

    def login(self, mechanism: str, response: bytes, peer: Peer) -> Login | Refused | Malformed:
        user = password_login(self._check, mechanism, response)
        return user if not isinstance(user, str) else loopback_checked(user, (), mechanism, self.loopback_users, peer)

    def open_refusal(self, user: str, vhost: str) -> AmqpError | None:
        return None

    def channel_refusal(self, user: str) -> AmqpError | None:
        return None
