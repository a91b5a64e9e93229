"""Between nodes, mailboxes are ZeroMQ over tcp with CURVE, keyed by the cluster's shared secret.

Theory of operation. Nodes of one cluster share a secret, as Erlang nodes share a cookie: by
default the file `~/.warren.cookie` (mode 0600), made by the first node a user starts, so one user's
nodes on one machine just work; `cluster.cookie_file` points elsewhere. From the secret every node
derives the same CURVE key pair (a keyed BLAKE2b of the secret is the 32-byte secret key). A host's
tcp PULL socket is a CURVE server with that key pair; every PUSH socket towards another node is a
CURVE client with the same pair and the same server key. A ZAP handler on each host admits only
clients whose public key is the cluster's: a peer with another secret derives another key pair,
fails the handshake, and the refusal is logged on both sides (the server's ZAP handler and the
client's socket monitor). Traffic inside one node stays on Unix sockets without CURVE (the
filesystem guards them, and encrypting every local frame would cost the data path for nothing).
"""
from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path
from typing import Any

import structlog
import zmq
import zmq.utils.z85

log = structlog.get_logger("warren.curve")

default_cookie_file = Path.home() / ".warren.cookie"
cookie_bytes = 20  # Erlang's cookies are 20 characters
ZAP_DOMAIN = "warren"  # the ZAP domain of every tcp mailbox; the handler answers for it alone


class CookieError(RuntimeError):
    pass


def read_or_create_cookie(path: Path = default_cookie_file) -> bytes:
    """The cluster secret in `path`, created (mode 0600) when missing, as Erlang's cookie is."""
    path = Path(path).expanduser()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another node of this user made it meanwhile: use theirs
        else:
            with os.fdopen(fd, "w") as f:
                f.write("".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(cookie_bytes)))
            log.info("cluster.cookie_created", path=str(path))
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise CookieError(f"cookie file {path} must be accessible only by its owner (mode {mode:o}, want 600)")
    cookie = path.read_bytes().strip()
    if not cookie:
        raise CookieError(f"cookie file {path} is empty")
    return cookie


class CurveKeys:
    """The cluster's CURVE key pair, derived from its secret (z85 text, as pyzmq takes keys)."""

    def __init__(self, cookie: bytes) -> None:
        raw = hashlib.blake2b(cookie, digest_size=32, person=b"warren-curve-v1").digest()
        self.secret = zmq.utils.z85.encode(raw)
        self.public = zmq.curve_public(self.secret)

    def make_server(self, sock: zmq.Socket) -> None:
        sock.curve_secretkey = self.secret
        sock.curve_publickey = self.public
        sock.curve_server = True
        sock.zap_domain = ZAP_DOMAIN.encode()

    def make_client(self, sock: zmq.Socket) -> None:
        sock.curve_secretkey = self.secret
        sock.curve_publickey = self.public
        sock.curve_serverkey = self.public


class ClusterCredentials:
    """The ZAP handler's credentials provider: only the cluster's own public key is let in."""

    def __init__(self, keys: CurveKeys, host: str) -> None:
        self._public = keys.public
        self._host = host

    def callback(self, domain: str, key: bytes) -> bool:
        """`key`: the client's public key as z85 text (pyzmq's Authenticator hands it so)."""
        allowed = key == self._public
        if not allowed:
            log.warning("cluster.peer_refused", host=self._host, reason="wrong cluster secret (cookie)",
                        client_key=key.decode(errors="replace"))
        return allowed


def start_authenticator(ctx: zmq.Context, keys: CurveKeys, host: str) -> Any:
    """A ZAP handler thread for `ctx` that admits only the cluster's key; stop it with `.stop()`."""
    from zmq.auth.thread import ThreadAuthenticator
    auth = ThreadAuthenticator(ctx)
    auth.start()
    auth.configure_curve_callback(domain=ZAP_DOMAIN, credentials_provider=ClusterCredentials(keys, host))
    return auth
