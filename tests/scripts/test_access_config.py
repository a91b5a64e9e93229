"""rabbitmq.conf's TLS and login keys as warren.conf reads them (scripts/config.py): lists in the
file's order, RabbitMQ's choices, and what the hosts are given."""
import pytest

from scripts.config import ConfigError, access_settings, load, parse


def test_tls_lists_and_choices(tmp_path):
    conf = tmp_path / "warren.conf"
    conf.write_text("listeners.ssl.default = 5671\nssl_options.certfile = /c.pem\nssl_options.verify = verify_peer\n"
                    "ssl_options.fail_if_no_peer_cert = true\nssl_options.depth = 2\n"
                    "ssl_options.versions.1 = tlsv1.3\nssl_options.versions.2 = tlsv1.2\n"
                    "ssl_options.ciphers.b = B\nssl_options.ciphers.a = A\n"
                    "auth_mechanisms.1 = EXTERNAL\nssl_cert_login_from = common_name\n"
                    "management.ssl.port = 15671\nmanagement.ssl.certfile = /m.pem\n")
    got = access_settings(load(conf, {}))
    assert got["tls"] == {"certfile": "/c.pem", "keyfile": "", "cacertfile": "", "verify": "verify_peer",
                          "fail_if_no_peer_cert": True, "depth": 2, "versions": ("tlsv1.3", "tlsv1.2"),
                          "ciphers": ("B", "A"), "password": ""}
    assert (got["tls_port"], got["auth_mechanisms"], got["ssl_cert_login_from"]) == (5671, ["EXTERNAL"], "common_name")
    assert (got["management_ssl_port"], got["management_ssl_ip"], got["management_tls"]["certfile"]) == (
        15671, "127.0.0.1", "/m.pem")


def test_defaults_offer_plain_and_amqplain_and_no_tls(tmp_path):
    got = access_settings(load(None, {}))
    assert (got["tls"], got["auth_mechanisms"], got["management_tls"]) == (None, ["PLAIN", "AMQPLAIN"], None)


@pytest.mark.parametrize("line", ["ssl_options.verify = verify_maybe", "ssl_cert_login_from = email",
                                  "ssl_options.fail_if_no_peer_cert = yes", "ssl_options.depth = -1"])
def test_bad_values_are_refused(line):
    with pytest.raises(ConfigError):
        parse(line)
