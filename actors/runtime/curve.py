"""The links between nodes are ZeroMQ tcp:// sockets with CURVE, keyed by the cluster's cookie.

Theory of operation. Every node of a cluster reads the same cookie (cluster_secret.py) and derives
from it the same CURVE key pair: the secret key is `cluster_secret.link_key(cookie)` (a keyed
BLAKE2b of the cookie, 32 bytes), the public key is its Curve25519 public key. A host's tcp PULL
socket is a CURVE server with that pair; each PUSH socket towards another node's host is a CURVE
client with the same pair, expecting the same server key. So the cookie is never sent, and a
peer must hold it twice over:
- a node with another cookie derives another pair: its client encrypts its HELLO for a server key
  that is not ours, so our server cannot open it and drops the connection before any message
  (its socket monitor reports EVENT_HANDSHAKE_FAILED_PROTOCOL; the connecting side's reports
  EVENT_HANDSHAKE_FAILED_NO_DETAIL). Its own server, likewise, cannot be reached by us.
- a client that learned the cluster's public key (it is not secret) but not the cookie has a key
  pair of its own: the ZAP handler (`Admission`, on pyzmq's thread authenticator, the context's
  inproc://zeromq.zap.01) admits only clients whose public key is the cluster's, and answers any
  other with 400 (both sides' monitors: EVENT_HANDSHAKE_FAILED_AUTH).
CURVE encrypts every frame after the handshake (Curve25519 + XSalsa20-Poly1305, per-connection
session keys, so a recorded session replays nothing). Links inside one node (ipc://) stay
unencrypted: the filesystem guards their socket files, and encrypting every local frame would
cost the data path for nothing.

Refusals are logged at most once per `refusal_log_interval_s` per peer, on both sides
(`RefusalLog`): a refused client retries every reconnect interval.
"""
from __future__ import annotations

import time
from typing import Any

import structlog
import zmq
import zmq.utils.z85

from actors.runtime.cluster_secret import link_key

log = structlog.get_logger("warren.cluster")

ZAP_DOMAIN = b"warren"  # the ZAP domain of every tcp mailbox; the handler answers for it alone
refusal_log_interval_s = 30.0


class CurveKeys:
    """The cluster's CURVE key pair, derived from its cookie (z85 text, as libzmq takes keys)."""

    def __init__(self, cookie: bytes) -> None:
        self.secret = zmq.utils.z85.encode(link_key(cookie))
        self.public = zmq.curve_public(self.secret)

    def make_server(self, sock: zmq.Socket) -> None:
        sock.curve_secretkey = self.secret
        sock.curve_publickey = self.public
        sock.curve_server = True
        sock.zap_domain = ZAP_DOMAIN

    def make_client(self, sock: zmq.Socket) -> None:
        sock.curve_secretkey = self.secret
        sock.curve_publickey = self.public
        sock.curve_serverkey = self.public


class RefusalLog:
    """At most one log line per peer and interval, with the number of attempts it covers."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[float, int]] = {}  # peer -> (last logged, attempts since)

    def due(self, peer: str) -> int:
        """0 when nothing is to be logged for this attempt, else the attempts the line covers."""
        now = time.monotonic()
        last, attempts = self._seen.get(peer, (float("-inf"), 0))
        attempts += 1
        if now - last < refusal_log_interval_s:
            self._seen[peer] = (last, attempts)
            return 0
        self._seen[peer] = (now, 0)
        return attempts

    def forget(self, peer: str) -> None:
        """The peer got through: its next refusal is news again."""
        self._seen.pop(peer, None)


class Admission:
    """The ZAP handler's credentials provider: only the cluster's own public key is let in."""

    def __init__(self, keys: CurveKeys, host: str) -> None:
        self._public = keys.public
        self._host = host
        self._refusals = RefusalLog()

    def callback(self, domain: str, key: bytes) -> bool:
        """`key`: the client's public key as z85 text (pyzmq's authenticator hands it so)."""
        if key == self._public:
            return True
        attempts = self._refusals.due(key.decode(errors="replace"))
        if attempts:
            log.warning("cluster.peer_refused", host=self._host, attempts=attempts, client_key=key.decode(errors="replace"),
                        reason="a client without the cluster's key: not this cluster's cookie")
        return False


def start_authenticator(ctx: zmq.Context, keys: CurveKeys, host: str) -> Any:
    """A ZAP handler for `ctx` (a thread that wakes only for handshakes); stop it with `.stop()`."""
    from zmq.auth.thread import ThreadAuthenticator
    auth = ThreadAuthenticator(ctx, log=_quiet)
    auth.start()
    auth.configure_curve_callback(domain=ZAP_DOMAIN.decode(), credentials_provider=Admission(keys, host))
    return auth


class _Quiet:
    """pyzmq's authenticator logs every request at debug and every denial at info through the
    stdlib; `Admission` says what matters once per interval instead."""

    def debug(self, *args: Any, **kwargs: Any) -> None: ...
    info = warning = error = exception = debug


_quiet: Any = _Quiet()
