"""A node with its management API and Prometheus endpoint on free ports, and an HTTP helper."""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.runtime.ports import stable_port
from tests.integration.nodes import Node, start_node

RABBITMQADMIN = next(Path("/usr/lib/rabbitmq/lib").glob(
    "rabbitmq_server-*/plugins/rabbitmq_management-*/priv/www/cli/rabbitmqadmin"), None) \
    if Path("/usr/lib/rabbitmq/lib").exists() else None
SAMPLE_MS = 200  # the tests' collect_statistics_interval: listings catch up within a few of these


@dataclass
class MgmtNode:
    node: Node
    api_port: int
    prometheus_port: int

    def http(self, method: str, path: str, body: Any = None, user: str | None = "guest:guest",
             raw: bytes | None = None) -> tuple[int, Any, dict]:
        headers = {"Content-Type": "application/json"}
        if user is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(f"http://127.0.0.1:{self.api_port}{path}", data=data, method=method,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                text = resp.read()
                return resp.status, json.loads(text) if text else None, dict(resp.headers)
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text) if text else None, dict(e.headers)
            except ValueError:
                return e.code, text.decode(), dict(e.headers)

    def get(self, path: str, user: str = "guest:guest") -> Any:
        status, body, _ = self.http("GET", path, user=user)
        assert status == 200, (path, status, body)
        return body

    def metrics(self, path: str = "/metrics") -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.prometheus_port}{path}", timeout=30) as resp:
            return resp.read().decode()


def start_mgmt_node(data_dir: Path, sample_ms: int = SAMPLE_MS, conf_lines: tuple[str, ...] = (),
                    extra: tuple[str, ...] = ()) -> MgmtNode:
    """`conf_lines`: more warren.conf settings ("key = value"); `extra`: more node flags (--join)."""
    api, prom = stable_port(), stable_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    conf = data_dir / "warren.conf"
    conf.write_text("".join(f"{line}\n" for line in (f"collect_statistics_interval = {sample_ms}", *conf_lines)))
    node = start_node(data_dir, "--config", str(conf), "--management-port", str(api), "--prometheus-port", str(prom),
                      *extra)
    return MgmtNode(node, api, prom)


def oracle() -> dict:
    return json.loads(Path(__file__).with_name("oracle_shapes.json").read_text())


def key_paths(body: Any, prefix: str = "") -> set[str]:
    """The dotted key paths of a body (of a list's first row), as record_oracle.py keeps them."""
    from tests.mgmt.record_oracle import key_paths as paths
    return set(paths(body, prefix))
