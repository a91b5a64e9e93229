"""The amqps listener's TLS context: server side, certificate and key from the configuration.

TLS 1.2 or newer, the library's default ciphers; no client certificates (peer verification and
rabbit's ssl_options.verify / fail_if_no_peer_cert are not implemented). A bad path or a key that
does not match the certificate fails the connection host at start, with the ssl module's message.
"""
from __future__ import annotations

import ssl


def server_context(certfile: str, keyfile: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certfile, keyfile or None)
    return ctx
