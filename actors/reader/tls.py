"""TLS server contexts from RabbitMQ's `ssl_options` (the AMQPS listener) and `management.ssl`
(the HTTPS API): the certificate and key, and the client certificates a peer must present.

Theory of operation: `TlsOptions` holds rabbitmq.conf's keys as RabbitMQ reads them, and
`server_context` makes the ssl module's context that behaves as Erlang's ssl does with them:
- `verify = verify_peer` asks the client for a certificate and checks it against `cacertfile`; a
  certificate the CA did not sign fails the handshake (an "unknown ca" alert). With
  `fail_if_no_peer_cert = true` a client without one fails it too (TLS 1.3's "certificate
  required" alert); with false it may go on without (CERT_OPTIONAL). `verify_none` (the default)
  asks for no certificate at all;
- `depth` is the number of intermediate CA certificates allowed between the client's certificate
  and a trusted one (Erlang's and OpenSSL's meaning are the same: 0 means signed by the CA
  itself; Erlang's default is 10). Python's ssl module has no setter for it, so it is set on the
  context's OpenSSL SSL_CTX through ctypes (SSL_CTX_set_verify_depth), after checking that the
  pointer found is the context's own (its verify mode reads back as set); where that check fails
  a configured depth is refused at start rather than ignored;
- `versions` (tlsv1.3, tlsv1.2, tlsv1.1, tlsv1) bound the protocol from the lowest to the highest
  listed (by default TLS 1.2 and 1.3, Erlang 25's);
- `ciphers`: OpenSSL-style names; TLS 1.3 suites (TLS_*) go to SSL_CTX_set_ciphersuites (ctypes
  as above), the others to `set_ciphers`, so the server offers only what is listed for each
  protocol that has something listed.
A bad path, a key that does not match the certificate or an unknown cipher fails the host at
start, with the ssl module's message. Listeners serve TLS through `tls_protocol`, which sends a
refused handshake's alert to the client before the socket closes, as Erlang does (asyncio's own
TLS drops it).
"""
from __future__ import annotations

import asyncio
import ctypes
import ssl
from asyncio import sslproto
from collections.abc import Callable
from dataclasses import dataclass

VERIFY_PEER, VERIFY_NONE = "verify_peer", "verify_none"
depth_default = 10  # Erlang ssl's
VERSIONS = {"tlsv1": ssl.TLSVersion.TLSv1, "tlsv1.1": ssl.TLSVersion.TLSv1_1, "tlsv1.2": ssl.TLSVersion.TLSv1_2,
            "tlsv1.3": ssl.TLSVersion.TLSv1_3}
versions_default = ("tlsv1.3", "tlsv1.2")


@dataclass(frozen=True, slots=True)
class TlsOptions:
    certfile: str
    keyfile: str = ""
    cacertfile: str = ""
    verify: str = VERIFY_NONE
    fail_if_no_peer_cert: bool = False
    depth: int | None = None  # None: Erlang's default
    versions: tuple[str, ...] = ()
    ciphers: tuple[str, ...] = ()
    password: str = ""

    @classmethod
    def from_dict(cls, d: dict) -> TlsOptions:
        """From the plain dict a host's configuration carries (scripts/config.py's tls_options)."""
        return cls(**{**d, "versions": tuple(d.get("versions", ())), "ciphers": tuple(d.get("ciphers", ()))})


def server_context(o: TlsOptions) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    chosen = sorted(VERSIONS[v] for v in (o.versions or versions_default))
    ctx.minimum_version, ctx.maximum_version = chosen[0], chosen[-1]
    ctx.load_cert_chain(o.certfile, o.keyfile or None, password=o.password or None)
    if o.cacertfile:
        ctx.load_verify_locations(cafile=o.cacertfile)
    if o.verify == VERIFY_PEER:
        ctx.verify_mode = ssl.CERT_REQUIRED if o.fail_if_no_peer_cert else ssl.CERT_OPTIONAL
    else:
        ctx.verify_mode = ssl.CERT_NONE
    suites = [c for c in o.ciphers if c.startswith("TLS_")]
    older = [c for c in o.ciphers if not c.startswith("TLS_")]
    if older:
        ctx.set_ciphers(":".join(older))
    native = _Native(ctx)
    if suites:
        native.set_ciphersuites(":".join(suites))
    depth = depth_default if o.depth is None else o.depth
    if native.usable:
        native.set_verify_depth(depth)
    elif o.depth is not None or suites:
        raise RuntimeError("ssl_options.depth and TLS 1.3 ciphers need OpenSSL's SSL_CTX, not reachable here")
    return ctx


class _Native:
    """OpenSSL's SSL_CTX of an ssl.SSLContext: the setters Python does not expose.

    CPython's context object is `{PyObject_HEAD; SSL_CTX *ctx; ...}`, so the pointer sits right
    after the object header; `usable` is whether what is there follows the context's verify mode
    through two changes (then set back)."""

    _SSL_VERIFY = {ssl.CERT_NONE: 0, ssl.CERT_OPTIONAL: 1, ssl.CERT_REQUIRED: 3}

    def __init__(self, ctx: ssl.SSLContext) -> None:
        self.usable = False
        try:
            self._lib = ctypes.CDLL(ssl._ssl.__file__)  # type: ignore[attr-defined]
            for name, args in (("SSL_CTX_get_verify_mode", [ctypes.c_void_p]),
                               ("SSL_CTX_set_verify_depth", [ctypes.c_void_p, ctypes.c_int]),
                               ("SSL_CTX_set_ciphersuites", [ctypes.c_void_p, ctypes.c_char_p])):
                getattr(self._lib, name).argtypes = args
            self._ptr = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
            mode, answers = ctx.verify_mode, []
            for probe in (ssl.CERT_OPTIONAL, ssl.CERT_REQUIRED, mode):
                ctx.verify_mode = probe
                answers.append(self._lib.SSL_CTX_get_verify_mode(self._ptr))
            self.usable = answers == [self._SSL_VERIFY[m] for m in (ssl.CERT_OPTIONAL, ssl.CERT_REQUIRED, mode)]
        except (OSError, AttributeError, ValueError):
            pass

    def set_verify_depth(self, depth: int) -> None:
        self._lib.SSL_CTX_set_verify_depth(self._ptr, depth)

    def set_ciphersuites(self, suites: str) -> None:
        if not self.usable or self._lib.SSL_CTX_set_ciphersuites(self._ptr, suites.encode()) != 1:
            raise ssl.SSLError(f"no TLS 1.3 cipher suite in {suites!r}")


class AlertingTLSProtocol(sslproto.SSLProtocol):
    """asyncio's server side of TLS, except that a refused handshake's alert reaches the client.

    asyncio's SSLProtocol closes the socket on a failed handshake before writing what OpenSSL
    queued, so a client refused for its certificate saw the connection drop; Erlang's ssl sends
    the alert ("unknown ca", TLS 1.3's "certificate required"), and so does this one: it writes
    the outgoing buffer first. Everything else is asyncio's."""

    def _do_handshake(self) -> None:
        try:
            self._sslobj.do_handshake()
        except sslproto.SSLAgainErrors:
            self._process_outgoing()
        except ssl.SSLError as exc:
            self._process_outgoing()
            self._on_handshake_complete(exc)
        else:
            self._on_handshake_complete(None)


def tls_protocol(loop: asyncio.AbstractEventLoop, app: Callable[[], asyncio.BaseProtocol],
                 context: ssl.SSLContext) -> Callable[[], asyncio.BaseProtocol]:
    """A protocol factory for `loop.create_server` (without its `ssl`): `app`'s protocols over TLS."""
    return lambda: AlertingTLSProtocol(loop, app(), context, None, server_side=True)
