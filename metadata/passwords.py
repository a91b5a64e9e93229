"""Password hashes as RabbitMQ stores them (rabbit_password_hashing_sha256).

Theory of operation: a stored hash is base64(salt ++ sha256(salt ++ utf8(password))) with a 4-byte
salt, so definitions exported from RabbitMQ verify here and the reverse. The salt is an input (the
shell draws it from the OS), which keeps this module pure and its tests exact. Verification
recomputes with the stored salt and compares in constant time. Plain passwords never leave the
process that received them: only hashes travel in change records and reach the disk.
"""
from __future__ import annotations

import base64
import hashlib
import hmac

salt_bytes = 4


def hash_password(password: str, salt: bytes) -> str:
    assert len(salt) == salt_bytes, "RabbitMQ's scheme uses a 4-byte salt"
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode("utf-8")).digest()).decode("ascii")


def check_password(password: str, stored: str) -> bool:
    """True when `password` hashes to `stored`; False for a malformed or empty stored hash."""
    try:
        raw = base64.b64decode(stored.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return False
    if len(raw) != salt_bytes + hashlib.sha256().digest_size:
        return False  # RabbitMQ's passwordless users (empty hash) can never log in with a password
    salt = raw[:salt_bytes]
    return hmac.compare_digest(hash_password(password, salt).encode("ascii"), stored.encode("ascii"))
