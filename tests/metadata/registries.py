"""Registries the metadata tests start from."""
from metadata import passwords
from metadata.registry import Registry

SALT = b"\x01\x02\x03\x04"


def bob_and_vhost(vhost: str) -> Registry:
    """A registry with user bob (password "pw", no permissions) and `vhost` beside "/"."""
    r = Registry()
    r.add_user("bob", passwords.hash_password("pw", SALT))
    r.add_vhost(vhost)
    return r
