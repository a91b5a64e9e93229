"""Shared by the admin and warrenctl integration tests: a node with an amqps listener, a
self-signed certificate made with the openssl CLI, and warrenctl, run in this process (its `main`:
a subprocess costs a second of start-up, more on a loaded machine, and the suite runs hundreds of
commands) or as the real command (`warrenctl_process`: tests/integration/test_warrenctl.py checks
the command itself)."""
from __future__ import annotations

import contextlib
import io
import subprocess

from pathlib import Path

import pika

from actors.runtime.ports import stable_port
from scripts import warrenctl as warrenctl_main
from tests.integration.nodes import REPO, start_node

warrenctl_timeout_s = 60


def make_cert(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost"], check=True, capture_output=True)
    return cert, key


def start_tls_node(directory: Path):
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = make_cert(directory)
    tls_port = stable_port()
    conf = directory / "warren.conf"
    conf.write_text(f"listeners.ssl.default = {tls_port}\nssl_options.certfile = {cert}\n"
                    f"ssl_options.keyfile = {key}\n")
    node = start_node(directory / "data", "--config", str(conf))
    node.tls_port = tls_port
    return node


def warrenctl(node, *args: str) -> subprocess.CompletedProcess:
    """What `warrenctl -n DATA_DIR ARGS` prints and exits with, from its `main` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = warrenctl_main.main(["-n", str(node.data_dir), *args])
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def warrenctl_process(node, *args: str) -> subprocess.CompletedProcess:
    """The real command, scripts/warrenctl, as a subprocess."""
    return subprocess.run([str(REPO / "scripts" / "warrenctl"), "-n", str(node.data_dir), *args],
                          capture_output=True, text=True, timeout=warrenctl_timeout_s)


def ok(node, *args: str) -> str:
    r = warrenctl(node, *args)
    assert r.returncode == 0, (args, r.stderr)
    return r.stdout


def connect(node, user="guest", password="guest", vhost="/") -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.port, vhost,
                                                             pika.PlainCredentials(user, password)))



