"""TLS contexts from ssl_options (actors/reader/tls.py): verify modes, versions, ciphers, depth.
The handshakes themselves, against RabbitMQ's, are tests/access/test_oracle_tls.py's."""
import ctypes
import ssl

import pytest

from actors.reader.tls import TlsOptions, server_context
from tests.tls_certs import Pki


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pki = Pki(tmp_path_factory.mktemp("pki"))
    ca = pki.ca("ca", "test CA")
    pki.server("server", ca)
    return pki.dir


def depth_of(ctx: ssl.SSLContext) -> int:
    lib = ctypes.CDLL(ssl._ssl.__file__)
    lib.SSL_CTX_get_verify_depth.argtypes = [ctypes.c_void_p]
    return lib.SSL_CTX_get_verify_depth(ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value)


def options(files, **kw) -> TlsOptions:
    return TlsOptions(str(files / "server.pem"), str(files / "server.key"), str(files / "ca.pem"), **kw)


@pytest.mark.parametrize("verify,fail,mode", [("verify_none", False, ssl.CERT_NONE),
                                              ("verify_peer", False, ssl.CERT_OPTIONAL),
                                              ("verify_peer", True, ssl.CERT_REQUIRED)])
def test_verify_modes(files, verify, fail, mode):
    assert server_context(options(files, verify=verify, fail_if_no_peer_cert=fail)).verify_mode == mode


def test_depth_is_erlangs_default_unless_set(files):
    assert depth_of(server_context(options(files))) == 10
    assert depth_of(server_context(options(files, depth=0))) == 0


def test_versions_bound_the_protocol(files):
    ctx = server_context(options(files, versions=("tlsv1.2",)))
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
    ctx = server_context(options(files))
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)


def test_ciphers_for_each_protocol(files):
    ctx = server_context(options(files, ciphers=("ECDHE-ECDSA-AES256-GCM-SHA384", "TLS_AES_256_GCM_SHA384")))
    names = {c["name"] for c in ctx.get_ciphers()}
    assert names == {"ECDHE-ECDSA-AES256-GCM-SHA384", "TLS_AES_256_GCM_SHA384"}
    with pytest.raises(ssl.SSLError):
        server_context(options(files, ciphers=("NO-SUCH-CIPHER",)))
