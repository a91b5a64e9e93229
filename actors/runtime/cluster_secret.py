"""The cluster's shared secret, as Erlang nodes share a cookie.

By default the file `~/.warren.cookie` (mode 0600), made by the first node a user starts, so one
user's nodes on one machine just work; `cluster.cookie_file` points elsewhere. Every node derives
the same key from it (`link_key`), with which the links between nodes prove to each other that
they belong to one cluster (node_links.py). Traffic inside one node stays on Unix sockets, which
the filesystem guards.
"""
from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import structlog

log = structlog.get_logger("warren.cluster")

default_cookie_file = Path.home() / ".warren.cookie"
cookie_bytes = 20  # Erlang's cookies are 20 characters


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


def link_key(cookie: bytes) -> bytes:
    """The key every node of the cluster derives from its secret for the handshake of its links
    (node_links.py): a keyed BLAKE2b of the secret, so the secret itself is never used as a key."""
    return hashlib.blake2b(cookie, digest_size=32, person=b"warren-link-v1").digest()
