"""Clients that send field tables the way each library encodes them, for the side-by-side test
of field types against warren and RabbitMQ (tests/integration/test_field_types.py).

Every client runs the same steps for each case (a name and a value in that client's terms):
declare queue `ft.<client>.<case>.arg` with the arguments {"k": value}, declare
`ft.<client>.<case>.ttl` with {"x-message-ttl": value}, then publish a message with the headers
{"case": name, "k": value} to `ft.<client>.src`, a queue whose messages expire at once into the
fanout `ft.<client>.dlx` (bound to `ft.<client>.raw` and `ft.<client>.own`): the broker
re-encodes the headers with x-death added. `run` returns, per case, the two declarations'
outcomes; then `raw_headers` reads `.raw` with warren's raw client (the octets exactly, as typed
values) and the client reads `.own` itself (what its user sees).

amqplib (Node) and amqp091-go run the same steps as programs (tests/integration/clients/), each
with its own language's values, and print their answers as JSON.

An outcome is ["ok"], ["channel", code, text], ["connection", code, text] or ["dropped"] (the
socket closed with no close method: RabbitMQ's reader crashing on a table it cannot parse).
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import struct
import subprocess
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

from wire import methods as m
from wire.codec import encode_shortstr
from wire.field_types import field_type
from wire.frames import FRAME_END_BYTES, PROTOCOL_HEADER, method_frame
from wire.inbound import Command, InboundParser
from wire.properties import BasicProperties

from tests.waiting import async_until, until

deadline_s = 10.0
Outcome = list
UNENCODABLE = ["unencodable"]  # the client refused to write the value: nothing was sent


def published(answers: dict[str, list]) -> int:
    """How many of a run's cases published their message (those the client could encode)."""
    return sum(a[0] != UNENCODABLE for a in answers.values())


# ---- setup and the raw reader --------------------------------------------------------------------

def prepare(url: str, client: str) -> None:
    """The expiring source queue, its dead-letter fanout and the two queues behind it (pika)."""
    import pika
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        ch.exchange_declare(f"ft.{client}.dlx", "fanout")
        ch.queue_declare(f"ft.{client}.src", arguments={"x-message-ttl": 0, "x-dead-letter-exchange": f"ft.{client}.dlx"})
        for side in ("raw", "own"):
            ch.queue_declare(f"ft.{client}.{side}")
            ch.queue_bind(f"ft.{client}.{side}", f"ft.{client}.dlx")


def typed(value: Any) -> Any:
    """A value as [RabbitMQ's type name, value], nested, with x-death's time left out."""
    if isinstance(value, dict):
        return ["table", [[k, typed(v)] for k, v in value.items() if k != "time"]]
    if isinstance(value, list):
        return ["array", [typed(v) for v in value]]
    if isinstance(value, bytes):
        return [field_type(value), value.hex()]
    if isinstance(value, Decimal):
        return ["decimal", str(value)]
    return [field_type(value), value]


class Raw:
    """warren's own codec over a plain socket: sends any octets, reads exactly what comes back."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=deadline_s)
        self.parser = InboundParser()
        self.parser.receive_data(PROTOCOL_HEADER)
        self.events: list = []
        self.sock.sendall(PROTOCOL_HEADER)
        self._expect(m.ConnectionStart)
        self.sock.sendall(method_frame(0, m.ConnectionStartOk(client_properties={}, mechanism="PLAIN",
                                                              response=b"\0guest\0guest", locale="en_US")))
        self._expect(m.ConnectionTune)
        self.sock.sendall(method_frame(0, m.ConnectionTuneOk(channel_max=2047, frame_max=131072, heartbeat=0)))
        self.sock.sendall(method_frame(0, m.ConnectionOpen(virtual_host="/")))
        self._expect(m.ConnectionOpenOk)
        self.sock.sendall(method_frame(1, m.ChannelOpen()))
        self._expect(m.ChannelOpenOk)

    def _read(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionResetError("closed")
        self.events += self.parser.receive_data(data)

    def _expect(self, cls: type) -> Command:
        while True:
            while self.events:
                event = self.events.pop(0)
                if isinstance(event, Command) and isinstance(event.method, cls):
                    return event
            self._read()

    def outcome(self) -> Outcome:
        """What the broker answers to the last request: ok, a close (answered with its -ok), or a drop."""
        try:
            while True:
                while self.events:
                    event = self.events.pop(0)
                    if not isinstance(event, Command):
                        continue
                    method = event.method
                    if isinstance(method, m.ConnectionClose):
                        self.sock.sendall(method_frame(0, m.ConnectionCloseOk()))
                        return ["connection", method.reply_code, method.reply_text]
                    if isinstance(method, m.ChannelClose):
                        self.sock.sendall(method_frame(1, m.ChannelCloseOk()))
                        self.sock.sendall(method_frame(1, m.ChannelOpen()))
                        self._expect(m.ChannelOpenOk)
                        return ["channel", method.reply_code, method.reply_text]
                    return ["ok"]
                self._read()
        except (ConnectionError, socket.timeout):
            return ["dropped"]

    def declare(self, queue: str, table_octets: bytes) -> Outcome:
        name = encode_shortstr(queue)
        args = struct.pack(">H", 0) + name + b"\x00" + struct.pack(">I", len(table_octets)) + table_octets
        self.sock.sendall(struct.pack(">BHIHH", 1, 1, len(args) + 4, 50, 10) + args + FRAME_END_BYTES)
        return self.outcome()

    def publish(self, routing_key: str, headers_octets: bytes) -> None:
        props = struct.pack(">H", 1 << 13) + struct.pack(">I", len(headers_octets)) + headers_octets
        method = struct.pack(">HHH", 60, 40, 0) + b"\x00" + encode_shortstr(routing_key) + b"\x00"
        header = struct.pack(">HHQ", 60, 0, 1) + props
        self.sock.sendall(struct.pack(">BHI", 1, 1, len(method)) + method + FRAME_END_BYTES
                          + struct.pack(">BHI", 2, 1, len(header)) + header + FRAME_END_BYTES
                          + struct.pack(">BHI", 3, 1, 1) + b"x" + FRAME_END_BYTES)

    def get(self, queue: str) -> dict | None:
        """basic.get (no-ack) of one message's headers, None when the queue is empty."""
        self.sock.sendall(method_frame(1, m.BasicGet(queue=queue, no_ack=True)))
        while True:
            while self.events:
                event = self.events.pop(0)
                if isinstance(event, Command) and isinstance(event.method, m.BasicGetEmpty):
                    return None
                if isinstance(event, Command) and isinstance(event.method, m.BasicGetOk):
                    return BasicProperties.decode(event.header, 12).headers
            self._read()

    def close(self) -> None:
        self.sock.close()


def drain(get: Callable[[], Any], count: int) -> list:
    """`count` messages from `get`, waiting (with a deadline) for those still on their way."""
    out: list = []

    def taken() -> bool:  # everything there is now; a pause only when nothing came
        while len(out) < count and (got := get()) is not None:
            out.append(got)
        return len(out) >= count
    until(taken, f"{count} messages", deadline_s, every_s=0.02, raises=False)  # the caller compares what came
    return out


def raw_headers(port: int, client: str, count: int) -> list:
    raw = Raw(port)
    try:
        return [typed(h) for h in drain(lambda: raw.get(f"ft.{client}.raw"), count)]
    finally:
        raw.close()


def own_value(value: Any) -> Any:
    """A client-decoded value as JSON carries it, its Python type kept."""
    if isinstance(value, dict):
        return {k: own_value(v) for k, v in value.items() if k != "time"}
    if isinstance(value, (list, tuple)):
        return [own_value(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return ["bytes", bytes(value).hex()]
    if isinstance(value, (Decimal, datetime)):
        return [type(value).__name__, str(value)]
    return [type(value).__name__, value]


# ---- the raw client: every tag and malformed tables, as octets -----------------------------------

def _table(entries: bytes) -> bytes:
    return struct.pack(">I", len(entries)) + entries


RAW_VALUES: dict[str, bytes] = {
    "S": b"S" + _table(b"abc"), "T": b"T" + struct.pack(">Q", 5), "b": b"b\xff", "B": b"B\xff",
    "s": b"s\xff\xfe", "u": b"u\xff\xfe", "I": b"I" + struct.pack(">i", -5),
    "i": b"i" + struct.pack(">I", 2**32 - 1), "d": b"d" + struct.pack(">d", 1.5), "f": b"f" + struct.pack(">f", 1.5),
    "l": b"l" + struct.pack(">q", -2**40), "L": b"L" + struct.pack(">Q", 2**64 - 1),
    "L-2^27s": b"L" + struct.pack(">q", 2**27 * 1000), "t": b"t\x02", "D": b"D\x02" + struct.pack(">I", 2**32 - 1),
    "F": b"F" + _table(b"\x01nb\x07"), "A": b"A" + _table(b"I\x00\x00\x00\x01B\x02"), "x": b"x" + _table(b"\x00\xff"),
    "V": b"V", "U": b"U\x00\x01", "Z": b"Z", "NUL": b"\x00",
    "F-bad-tag": b"F" + _table(b"\x01nZ"), "A-bad-tag": b"A" + _table(b"Z"),
    "I-truncated": b"I\x00\x00", "A-truncated": b"A" + _table(b"I\x00"), "F-past-table": b"F" + struct.pack(">I", 50),
}


def raw_entry(key: str, octets: bytes) -> bytes:
    return encode_shortstr(key) + octets


def run_raw(port: int, cases: dict[str, bytes]) -> dict[str, list]:
    out = {}
    for name, octets in cases.items():
        raw = Raw(port)
        try:
            arg = raw.declare(f"ft.raw.{name}.arg", raw_entry("k", octets))
            raw = _reopened(raw, arg, port)
            ttl = raw.declare(f"ft.raw.{name}.ttl", raw_entry("x-message-ttl", octets))
            raw = _reopened(raw, ttl, port)
            raw.publish("ft.raw.src", raw_entry("case", b"S" + _table(name.encode())) + raw_entry("k", octets))
            published = raw.outcome_after_publish()
            out[name] = [arg, ttl, published]
        finally:
            raw.close()
    return out


def _reopened(raw: Raw, outcome: Outcome, port: int) -> Raw:
    if outcome[0] in ("connection", "dropped"):
        raw.close()
        return Raw(port)
    return raw


def _outcome_after_publish(self: Raw) -> Outcome:
    """A publish is answered only when it fails: a queue.declare of nothing after it is the probe."""
    name = encode_shortstr("ft.raw.src")
    args = struct.pack(">H", 0) + name + b"\x01" + struct.pack(">I", 0)  # passive
    self.sock.sendall(struct.pack(">BHIHH", 1, 1, len(args) + 4, 50, 10) + args + FRAME_END_BYTES)
    return self.outcome()


Raw.outcome_after_publish = _outcome_after_publish  # type: ignore[attr-defined]


# ---- the Python clients --------------------------------------------------------------------------

def python_cases() -> dict[str, Any]:
    """The same fields as Python code writes them; each library picks its own tags."""
    return {
        "bool": True, "int": 5, "negative": -5, "int32-max": 2**31 - 1, "above-int32": 2**31,
        "celery-ttl": 2**27 * 1000, "int64": 2**40, "float": 1.5, "str": "héllo", "bytes": b"\xff\x00",
        "decimal": Decimal("1.25"), "datetime": datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
        "table": {"a": 1, "b": "x"}, "array": [1, "b", None], "none": None,
    }


def run_pika(url: str, cases: dict[str, Any]) -> tuple[dict[str, list], list]:
    import pika
    import pika.exceptions as px
    out = {}
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()

    def declare(queue: str, args: dict) -> Outcome:
        nonlocal conn, ch
        try:
            ch.queue_declare(queue, arguments=args)
            return ["ok"]
        except px.ChannelClosedByBroker as exc:
            ch = conn.channel()
            return ["channel", exc.reply_code, exc.reply_text]
        except px.ConnectionClosedByBroker as exc:
            conn = pika.BlockingConnection(pika.URLParameters(url))
            ch = conn.channel()
            return ["connection", exc.reply_code, exc.reply_text]
        except (px.StreamLostError, px.AMQPConnectionError):
            conn = pika.BlockingConnection(pika.URLParameters(url))
            ch = conn.channel()
            return ["dropped"]
        except px.UnsupportedAMQPFieldException:
            return UNENCODABLE

    for name, value in cases.items():
        out[name] = [declare(f"ft.pika.{name}.arg", {"k": value}), declare(f"ft.pika.{name}.ttl", {"x-message-ttl": value})]
        if out[name][0] != UNENCODABLE:
            ch.basic_publish("", "ft.pika.src", b"x", pika.BasicProperties(headers={"case": name, "k": value}))

    own = [own_value(h) for h in drain(lambda: _pika_get(ch, "ft.pika.own"), published(out))]
    conn.close()
    return out, own


def _pika_get(ch: Any, queue: str) -> Any:
    method, props, _ = ch.basic_get(queue, auto_ack=True)
    return None if method is None else props.headers


def run_pyamqp(url: str, cases: dict[str, Any]) -> tuple[dict[str, list], list]:
    import amqp
    host = url.split("@", 1)[1].split("/", 1)[0]

    def connect() -> tuple[Any, Any]:
        c = amqp.Connection(host)
        c.connect()
        return c, c.channel()

    conn, ch = connect()
    out = {}

    def declare(queue: str, args: dict) -> Outcome:
        nonlocal conn, ch
        try:
            ch.queue_declare(queue, arguments=args)
            return ["ok"]
        except amqp.exceptions.ConnectionError as exc:
            conn, ch = connect()
            return ["connection", exc.reply_code, exc.reply_text]
        except amqp.exceptions.ChannelError as exc:
            ch = conn.channel()
            return ["channel", exc.reply_code, exc.reply_text]
        except (OSError, amqp.exceptions.RecoverableConnectionError):
            conn, ch = connect()
            return ["dropped"]
        except (ValueError, TypeError, struct.error):
            return UNENCODABLE

    for name, value in cases.items():
        out[name] = [declare(f"ft.amqp.{name}.arg", {"k": value}), declare(f"ft.amqp.{name}.ttl", {"x-message-ttl": value})]
        if out[name][0] != UNENCODABLE:
            ch.basic_publish(amqp.Message(b"x", application_headers={"case": name, "k": value}),
                             routing_key="ft.amqp.src")

    def get() -> Any:
        msg = ch.basic_get("ft.amqp.own", no_ack=True)
        return None if msg is None else msg.properties.get("application_headers")
    own = [own_value(h) for h in drain(get, published(out))]
    conn.close()
    return out, own


def run_aiopika(url: str, cases: dict[str, Any]) -> tuple[dict[str, list], list]:
    return asyncio.run(_run_aiopika(url, cases))


async def _run_aiopika(url: str, cases: dict[str, Any]) -> tuple[dict[str, list], list]:
    import aio_pika
    import aiormq.exceptions as ax
    conn = await aio_pika.connect(url)
    ch = await conn.channel()
    out = {}

    async def declare(queue: str, args: dict) -> Outcome:
        nonlocal conn, ch
        try:
            await ch.declare_queue(queue, arguments=args)
            return ["ok"]
        except ax.ChannelClosed as exc:
            ch = await conn.channel()
            return ["channel", *exc.args[:2]]
        except ax.ConnectionClosed as exc:
            conn = await aio_pika.connect(url)
            ch = await conn.channel()
            return ["connection", *exc.args[:2]]
        except (ConnectionError, ax.AMQPConnectionError):
            conn = await aio_pika.connect(url)
            ch = await conn.channel()
            return ["dropped"]
        except (TypeError, ValueError, struct.error):
            return UNENCODABLE

    for name, value in cases.items():
        value = bytearray(value) if isinstance(value, bytes) else value  # pamqp writes bytearray as x
        out[name] = [await declare(f"ft.aiopika.{name}.arg", {"k": value}),
                     await declare(f"ft.aiopika.{name}.ttl", {"x-message-ttl": value})]
        if out[name][0] != UNENCODABLE:
            await ch.default_exchange.publish(aio_pika.Message(b"x", headers={"case": name, "k": value}),
                                              routing_key="ft.aiopika.src")
    own = []
    queue = await ch.get_queue("ft.aiopika.own", ensure=False)

    async def taken() -> bool:  # everything there is now; a pause only when nothing came
        while len(own) < published(out) and (msg := await queue.get(no_ack=True, fail=False)) is not None:
            own.append(own_value(msg.headers))
        return len(own) >= published(out)
    await async_until(taken, "aio-pika's own messages", deadline_s, every_s=0.02, raises=False)
    await conn.close()
    return out, own


# ---- amqplib (Node) and amqp091-go: programs in tests/integration/clients --------------------------

CLIENTS_DIR = Path(__file__).resolve().parent / "clients"
AMQPLIB = "amqplib@0.10.9"
GO_AMQP091 = Path("/usr/share/gocode/src/github.com/rabbitmq/amqp091-go")  # Debian's package
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "warren-test-clients"


def node_client() -> tuple[list[str], dict[str, str]] | str:
    """The command and environment that run the amqplib program, or why it cannot run: amqplib
    is installed from the npm registry into a cache of its own on first use."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node and npm are not installed (apt-get install nodejs npm)"
    prefix = CACHE / "node"
    if not (prefix / "node_modules" / "amqplib").is_dir():
        done = subprocess.run(["npm", "install", "--silent", "--prefix", str(prefix), AMQPLIB],
                              capture_output=True, timeout=300)
        if done.returncode != 0:
            return f"npm install {AMQPLIB} failed: {done.stderr.decode(errors='replace')[-500:]}"
    env = dict(os.environ, NODE_PATH=str(prefix / "node_modules"))
    return ["node", str(CLIENTS_DIR / "field_types.js")], env


def go_client(build_dir: Path) -> tuple[list[str], dict[str, str]] | str:
    """The amqp091-go program built in GOPATH mode against Debian's package, or why it cannot be."""
    if shutil.which("go") is None or not GO_AMQP091.is_dir():
        return "Go or amqp091-go is not installed (apt-get install golang-go golang-github-rabbitmq-amqp091-go-dev)"
    binary = build_dir / "field_types"
    env = dict(os.environ, GO111MODULE="off", GOPATH="/usr/share/gocode", GOCACHE=str(CACHE / "go-build"))
    done = subprocess.run(["go", "build", "-o", str(binary), str(CLIENTS_DIR / "field_types.go")],
                          capture_output=True, env=env, timeout=300)
    if done.returncode != 0:
        return f"go build failed: {done.stderr.decode(errors='replace')[-500:]}"
    return [str(binary)], dict(os.environ)


def run_external(command: list[str], env: dict[str, str], url: str) -> tuple[dict[str, list], list]:
    """One of the programs against `url`: (answers, what its client read back)."""
    done = subprocess.run([*command, url.replace("/%2F", "/")], capture_output=True, env=env, timeout=120, check=True)
    out = json.loads(done.stdout)
    return out["answers"], out["own"]
