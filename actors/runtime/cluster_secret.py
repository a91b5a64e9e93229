"""The cluster's shared secret, as Erlang nodes share a cookie.

By default the file `~/.warren.cookie` (mode 0600), made by the first node a user starts, so one
user's nodes on one machine just work; `cluster.cookie_file` points elsewhere. It appears whole
or not at all: written and synced under a temporary name beside it, then hard-linked into place,
which fails if another node made it meanwhile (theirs is used). A reader never finds it empty, as
hosts starting together found it when it was created in place and written afterwards. Every node
derives the same key from it (`link_key`), the secret of the cluster's CURVE key pair, with which
the links between nodes authenticate and encrypt (curve.py). Traffic inside one node stays on
ipc:// sockets, which the filesystem guards.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import tempfile
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
        _create(path)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise CookieError(f"cookie file {path} must be accessible only by its owner (mode {mode:o}, want 600)")
    cookie = path.read_bytes().strip()
    if not cookie:
        raise CookieError(f"cookie file {path} is empty")
    return cookie


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, aside = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write("".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(cookie_bytes)))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(aside, path)
        except FileExistsError:
            return  # another node of this user made it meanwhile: use theirs
        log.info("cluster.cookie_created", path=str(path))
    finally:
        os.unlink(aside)


def link_key(cookie: bytes) -> bytes:
    """The key every node of the cluster derives from its secret: the CURVE secret key of its links
    (curve.py); a keyed BLAKE2b of the secret, so the cookie itself is never used as a key."""
    return hashlib.blake2b(cookie, digest_size=32, person=b"warren-link-v1").digest()
