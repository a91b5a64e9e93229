"""Where a steady publish -> consume latency goes: into the broker, or into the clients and the
kernel around it, read off the loopback wire (issue 14, item 6). Prints; not a test.

    .venv/bin/python -m bench.wire_latency [--repeat N] [--time S] [--rate N]
        [--connection-hosts N] [--no-rabbitmq]        (as root: it opens a packet socket)

A raw packet socket on `lo` sees every segment the clients and the broker send, stamped by the
kernel as it is sent. bench.perf runs one publisher and one consumer at a steady rate (1 KiB,
persistent, durable queue, confirms with a window of 1000, manual acks with prefetch 300); a
basic.publish and the basic.deliver of the same message are matched by the publish time bench.perf
writes in the body, and the deliver's stamp less the publish's is the broker's own part - waking
up, reading, routing, the queue, writing the delivery. bench.perf's p50 less the broker's
p50 is, roughly, what the two clients, their sockets and the kernel take: the same code for both
brokers. One warren node and one RabbitMQ (scripts/rabbitmq_oracle) run in turn, each round both.
"""
from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.compare_brokers import Broker, Rabbit, Warren, add_broker_options, running
from bench.hop_pingpong import percentile
from bench.latency_compare import perf
from bench.perf.framing import FrameError, FrameSplitter, body_timestamp

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # loopback shows each segment twice: as sent and as received; keep one
SO_TIMESTAMPNS = 35  # Linux: when the packet socket got the segment (as it was sent), a timespec
SO_RCVBUFFORCE = 33  # a receive buffer past rmem_max (root): a dropped segment loses messages
BASIC_PUBLISH, BASIC_DELIVER = (60, 40), (60, 60)
FRAME_METHOD, FRAME_BODY = 1, 3
METHOD = struct.Struct(">HH")  # a method frame opens with its class and method ids


class MessageStream:
    """The messages of one direction of one AMQP connection, fed its TCP payloads in order: the
    publish time bench.perf wrote in each body, for every basic.publish or basic.deliver."""

    def __init__(self, method: tuple[int, int]) -> None:
        self.method = method
        self._frames = FrameSplitter()
        self._in_message = False  # the last method frame was `method`, its body not seen yet

    def feed(self, data: bytes) -> list[int]:
        stamps = []
        try:
            frames = self._frames.feed(data)
        except FrameError:  # the client's protocol header, or a segment the socket dropped
            self._frames, self._in_message = FrameSplitter(), False
            return stamps
        for kind, _, payload in frames:
            if kind == FRAME_METHOD:
                self._in_message = METHOD.unpack_from(payload) == self.method
            elif kind == FRAME_BODY and self._in_message:
                stamps.append(body_timestamp(payload))
                self._in_message = False
        return stamps


def tcp_payload(packet: bytes) -> tuple[int, int, bytes] | None:
    """(source port, destination port, payload) of an IPv4 TCP segment behind lo's Ethernet header."""
    if len(packet) < 14 + 20 or packet[12:14] != b"\x08\x00" or packet[14 + 9] != socket.IPPROTO_TCP:
        return None
    ip = 14
    ihl = (packet[ip] & 0x0F) * 4
    total = struct.unpack_from(">H", packet, ip + 2)[0]
    tcp = ip + ihl
    sport, dport = struct.unpack_from(">HH", packet, tcp)
    offset = (packet[tcp + 12] >> 4) * 4
    return sport, dport, packet[tcp + offset:ip + total]


class Sniffer:
    """Kernel send stamps (ns) of every message published to `port` and delivered from it, by
    the publish time in its body (a burst of messages shares one: the n-th of a burst published
    is the n-th of it delivered)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.published: dict[int, list[int]] = {}
        self.delivered: dict[int, list[int]] = {}
        self._streams: dict[tuple[int, int], MessageStream] = {}
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self._sock.bind(("lo", 0))
        self._sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self._sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)  # root: past rmem_max
        self._sock.settimeout(0.2)
        self._thread = threading.Thread(target=self._run, name="sniffer", daemon=True)

    def __enter__(self) -> Sniffer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                packet, ancillary, _, address = self._sock.recvmsg(1 << 17, 64)
            except TimeoutError:
                continue
            if address[2] != PACKET_OUTGOING:
                continue
            parsed = tcp_payload(packet)
            if parsed is None or self.port not in parsed[:2] or not parsed[2]:
                continue
            stamp = next((struct.unpack("ll", data[:16]) for level, kind, data in ancillary
                          if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS), None)
            if stamp is None:
                continue
            ns = stamp[0] * 1_000_000_000 + stamp[1]
            sport, dport, payload = parsed
            to_broker = dport == self.port
            stream = self._streams.get((sport, dport))
            if stream is None:
                stream = self._streams[(sport, dport)] = MessageStream(BASIC_PUBLISH if to_broker else BASIC_DELIVER)
            seen = self.published if to_broker else self.delivered
            for published_at in stream.feed(payload):
                seen.setdefault(published_at, []).append(ns)

    def broker_part_us(self, after_ns: int) -> list[float]:
        """Deliver stamp less publish stamp of each message published after `after_ns`, in µs."""
        parts = []
        for published_at, sent in self.published.items():
            if published_at >= after_ns:
                parts.extend((d - p) / 1000 for p, d in zip(sent, self.delivered.get(published_at, ())))
        return sorted(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--time", type=float, default=10.0, help="seconds per run (default 10)")
    p.add_argument("--rate", type=int, default=1000, help="msg/s (default 1000)")
    p.add_argument("--connection-hosts", type=int, default=0, help="warren.conf's connection_hosts (0: the default)")
    add_broker_options(p, 5695, 5696)
    a = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="warren-wire-"))
    warren = Warren("warren", a.warren_port, work / "warren")
    if a.connection_hosts:
        (work / "warren.conf").write_text(f"connection_hosts = {a.connection_hosts}\n")
        warren.extra_args = ("--config", str(work / "warren.conf"))
    brokers: list[Broker] = [warren] + ([] if a.no_rabbitmq else [Rabbit("rabbitmq", a.rabbit_port, work / "rabbit")])
    args = ["--size", "1024", "--confirm", "1000", "--prefetch", "300", "--rate", str(a.rate)]
    warmup_ns = int(min(3, a.time / 3) * 1e9)  # bench.perf's warm-up
    rows: list[tuple[str, float, list[float]]] = []
    try:
        with running(brokers):
            for round_ in range(1, a.repeat + 1):
                for broker in brokers:
                    print(f"== round {round_}/{a.repeat}: {broker.name}", file=sys.stderr, flush=True)
                    started_ns = time.time_ns()
                    with Sniffer(broker.port) as sniffer:
                        summary = perf(broker, args, a.time, work / "perf.json")
                    part = sniffer.broker_part_us(started_ns + warmup_ns)
                    if summary and part:
                        rows.append((broker.name, summary["latency_ms"]["p50"] * 1000, part))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"1 KiB at {a.rate} msg/s, persistent, durable queue, confirms, manual acks; {a.time:g} s per run; µs")
    print("| broker | run | perf p50 | broker part p10 / p50 / p90 | perf p50 less broker p50 |")
    print("|---|---|---|---|---|")
    for name in [b.name for b in brokers]:
        mine = [r for r in rows if r[0] == name]
        for i, (_, p50, part) in enumerate(mine, 1):
            print(f"| {name} | {i} | {p50:.0f} | {percentile(part, 0.1):.0f} / {percentile(part, 0.5):.0f} / "
                  f"{percentile(part, 0.9):.0f} | {p50 - percentile(part, 0.5):.0f} |")
        if len(mine) > 1:
            print(f"| {name} | median | {statistics.median(r[1] for r in mine):.0f} | "
                  f"{statistics.median(percentile(r[2], 0.5) for r in mine):.0f} (p50) | "
                  f"{statistics.median(r[1] - percentile(r[2], 0.5) for r in mine):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
