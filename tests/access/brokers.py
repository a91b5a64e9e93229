"""A RabbitMQ 3.10 oracle and a warren node configured alike, for tests that run the same client
code against both and compare the answers (codes, texts, which connections close).

`start_pair(root, conf_lines)` starts the oracle (scripts/rabbitmq_oracle, with its AMQPS listener
and management plugin) and a warren node given the same rabbitmq.conf lines, and returns their
`Broker`s: ports, how to run their ctl (rabbitmqctl / warrenctl, normalised to (exit code, rows or
error text)), their HTTP API and their logs. `needs_rabbitmq` skips a test where rabbitmq-server
is missing. The `Table` gathers every compared case with both answers, and writes it where
ACCESS_CASES_TABLE says (the side-by-side table of the report); `compared` makes a function of a
broker a test that compares its two answers.
"""
from __future__ import annotations

import base64
import json
import os
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from actors.runtime.ports import can_listen, stable_port
from scripts.local_cluster import REPO, Node, start_node
from tests.integration.oracle import run_script

RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
RABBITMQCTL = Path("/usr/lib/rabbitmq/bin/rabbitmqctl")
ORACLE = REPO / "scripts" / "rabbitmq_oracle"
needs_rabbitmq = pytest.mark.skipif(not RABBITMQ_SERVER.exists(),
                                    reason="rabbitmq-server (the 3.10 oracle) is not installed")
ctl_timeout_s = 60
_LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d+ \[\w+\]")  # rabbitmqctl's own log lines on stderr


@dataclass
class Broker:
    name: str
    port: int
    ssl_port: int
    mgmt_port: int
    prometheus_port: int
    ctl_command: list[str]
    env: dict[str, str]
    log_path: Path
    https_port: int = 0
    node: Node | None = None  # warren's

    def ctl(self, *args: str) -> tuple[int, Any]:
        """(exit code, the output's JSON rows for --formatter json, else its lines) or (code, error text)."""
        done = subprocess.run([*self.ctl_command, *args], capture_output=True, text=True, env=self.env,
                              cwd=REPO, timeout=ctl_timeout_s)
        if done.returncode != 0:
            return done.returncode, error_text(done.stderr)
        out = done.stdout.strip()
        if "--formatter" in args:
            return 0, json.loads(out or "null")
        return 0, [line for line in out.splitlines() if not line.endswith(" ...")]

    def http(self, method: str, path: str, body: Any = None, user: str = "guest",
             password: str = "guest") -> tuple[int, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.mgmt_port}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode())
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        return status, json.loads(raw) if raw else None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metric(self, name: str, labels: str = 'protocol="amqp091"') -> float:
        """A family's aggregated sample with these labels at the Prometheus endpoint."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.prometheus_port}/metrics", timeout=30) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(f"{name}{{{labels}}} "):
                    return float(line.rsplit(" ", 1)[1])
        raise KeyError(name)


def error_text(stderr: str) -> str:
    """rabbitmqctl's "Error:\\n<text>" and warrenctl's "Error: <text>" as one line of words."""
    lines = [line for line in stderr.splitlines() if not _LOG_LINE.match(line)]
    text = " ".join(lines)
    text = re.sub(r"^Error( \(argument validation\))?:", "", text.strip())
    return " ".join(text.replace("Validation failed:", "Validation failed").split())


def _ports(offset: int) -> int:
    """A free port whose `port + offset` is free too (the oracle's Prometheus port)."""
    while True:
        port = stable_port()
        if can_listen(port + offset):
            return port


def start_pair(root: Path, conf_lines: list[str], ssl_dir: Path,
               https_lines: list[str] = ()) -> tuple[Broker, Broker]:
    """The oracle and a warren node, both with `conf_lines` and the AMQPS listener on `ssl_dir`'s
    ca.pem, server.pem and server.key (verify_peer, EXTERNAL after PLAIN and AMQPLAIN); with
    `https_lines` (management.ssl.* but the port) each serves its HTTP API over HTTPS too."""
    oracle_dir = root / "oracle"
    port, ssl_port, mgmt = stable_port(), stable_port(), _ports(20)
    https_port, w_https = (stable_port(), stable_port()) if https_lines else (0, 0)
    https = (lambda p: [f"management.ssl.port = {p}", *https_lines] if https_lines else [])
    # the distribution port outside the ephemeral range too (tests/integration/oracle.py says why)
    env = dict(os.environ, ORACLE_MANAGEMENT_PORT=str(mgmt), ORACLE_SSL_PORT=str(ssl_port), ORACLE_DIST_PORT=str(stable_port()),
               ORACLE_SSL_DIR=str(ssl_dir), ORACLE_CONF_EXTRA="\n".join([*conf_lines, *https(https_port)]))
    run_script("start", str(port), str(oracle_dir), env=env)
    ctl_env = dict(os.environ, HOME=str(oracle_dir), RABBITMQ_ENABLED_PLUGINS_FILE=str(oracle_dir / "enabled_plugins"))
    rabbit = Broker("rabbitmq", port, ssl_port, mgmt, mgmt + 20,
                    [str(RABBITMQCTL), "-n", f"oracle{port}@localhost"], ctl_env,
                    oracle_dir / "log" / f"oracle{port}@localhost.log", https_port)
    _wait_http(rabbit)
    data = root / "warren" / "data"
    data.parent.mkdir(parents=True, exist_ok=True)
    w_ssl, w_mgmt, w_prom = stable_port(), stable_port(), stable_port()
    conf = data.parent / "warren.conf"
    conf.write_text("\n".join([f"listeners.ssl.default = {w_ssl}", f"ssl_options.cacertfile = {ssl_dir}/ca.pem",
                               f"ssl_options.certfile = {ssl_dir}/server.pem",
                               f"ssl_options.keyfile = {ssl_dir}/server.key", "ssl_options.verify = verify_peer",
                               "auth_mechanisms.1 = PLAIN", "auth_mechanisms.2 = AMQPLAIN",
                               "auth_mechanisms.3 = EXTERNAL", *conf_lines, *https(w_https),
                               "collect_statistics_interval = 500", ""]))
    node = start_node(data, "--config", str(conf), "--management-port", str(w_mgmt), "--prometheus-port", str(w_prom))
    warren = Broker("warren", node.port, w_ssl, w_mgmt, w_prom,
                    [sys.executable, "-m", "scripts.warrenctl", "-n", str(data)], dict(os.environ),
                    data / "log" / "warren.log", w_https, node)
    _wait_http(warren)
    return rabbit, warren


def stop_pair(root: Path, pair: tuple[Broker, Broker]) -> None:
    rabbit, warren = pair
    if warren.node is not None:
        warren.node.stop()
    subprocess.run([str(ORACLE), "stop", str(root / "oracle")], capture_output=True, timeout=60)


def _wait_http(broker: Broker) -> None:
    from tests.waiting import until

    def answers() -> bool:
        try:
            return broker.http("GET", "/api/overview")[0] == 200
        except OSError:
            return False
    until(answers, f"{broker.name}'s management API", 60)


@dataclass
class Table:
    """Every compared case: (case, RabbitMQ's answer, warren's answer)."""

    rows: list[tuple[str, Any, Any, bool]] = field(default_factory=list)

    def compare(self, case: str, run: Callable[[Broker], Any], rabbit: Broker, warren: Broker,
                same: Callable[[Any], Any] = lambda answer: answer) -> Any:
        """`same`: what of an answer must be equal (both answers are kept whole in the table)."""
        theirs, ours = run(rabbit), run(warren)
        self.rows.append((case, theirs, ours, same(theirs) == same(ours)))
        assert same(ours) == same(theirs), f"{case}: warren answered {ours!r}, RabbitMQ {theirs!r}"
        return ours

    def write(self, path: str) -> None:
        lines = ["| case | RabbitMQ 3.10 | warren | agree |", "|---|---|---|---|"]
        for case, theirs, ours, agree in self.rows:
            cell = (lambda v: str(v).replace("|", "\\|").replace("\n", " "))
            exact = "yes" if theirs == ours else "yes, but the alert's description" if agree else "NO"
            lines.append(f"| {case} | {cell(theirs)} | {cell(ours)} | {exact} |")
        Path(path).write_text("\n".join(lines) + "\n")


def compared(case: str, same: Callable[[Any], Any] = lambda answer: answer):
    """`@compared(case)` over `def test_x(b: Broker) -> answer`: the test pytest collects (under
    the same name) runs the function on RabbitMQ and on warren through the `both` fixture
    (conftest.py: Table.compare), whose answers must be equal as `same` sees them."""
    def test_of(run: Callable[[Broker], Any]) -> Callable[[Any], None]:
        def test(both) -> None:
            both(case, run, same)
        # pytest reads the fixtures it passes from the signature: `both`, not `b`; so no functools.wraps
        test.__name__, test.__qualname__, test.__doc__ = run.__name__, run.__qualname__, run.__doc__
        test.__module__ = run.__module__
        return test
    return test_of


def tls_client(ssl_dir: Path, cert: str | None, *, minimum: ssl.TLSVersion | None = None,
               ciphers: str | None = None) -> ssl.SSLContext:
    """A client context trusting the test CA, with `cert` (stem of .pem/.key in `ssl_dir`)."""
    ctx = ssl.create_default_context(cafile=str(ssl_dir / "ca.pem"))
    if cert is not None:
        key = ssl_dir / f"{cert}.key"
        if not key.exists():  # a chain bundle named after its leaf
            key = ssl_dir / f"{cert.removeprefix('chain-')}.key"
        ctx.load_cert_chain(str(ssl_dir / f"{cert}.pem"), str(key))
    if minimum is not None:
        ctx.minimum_version = minimum
    if ciphers is not None:
        ctx.set_ciphers(ciphers)
    return ctx
