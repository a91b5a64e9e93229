"""Protocol fuzzing against a running node: `python -m tests.fuzz.node_fuzz --cases 2000 --workers 6`.

Several connections at once each open a connection properly and send one case of
tests/fuzz/sequences.py (valid frames, then mutated), and note how the node ended it. Meanwhile a
control client (pika) publishes persistent messages with confirms to a durable queue and consumes
them. The node must stay up with no host restarted, the control connection must never notice
anything, every message it had confirmed must come back, every connection.close the fuzzers get
must carry a reply code of the spec with RabbitMQ's "CODE_NAME - " text, and the node's log must
hold no crashed actor or traceback. With `--oracle`, every case also runs against Debian's
RabbitMQ 3.10 (scripts/rabbitmq_oracle) and the endings are compared; the differences are listed
by kind (some are known and listed in README's differences).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pika
import pika.exceptions

from actors.runtime.client import control
from actors.runtime.ports import port_open
from scripts.local_cluster import REPO, Node, start_node
from tests.fuzz.raw_client import Ending, RawConnection
from tests.fuzz.sequences import case
from tests.waiting import until
from wire.errors import CODE_NAMES

CONTROL_QUEUE = "fuzz.control"
ending_timeout_s = 1.0
control_publish_s = 0.01
_ERLANG_WRAP = re.compile(r"\n *")
bad_log_events = ("actor.crashed", "runtime.bad_frame", "host.crashed", "supervisor.host_exited")


@dataclass
class Findings:
    cases: int = 0
    endings: Counter = field(default_factory=Counter)          # "close 501" / "dropped" / "open"
    refused: list[str] = field(default_factory=list)            # a handshake the node did not answer
    bad_texts: list[tuple[int, str]] = field(default_factory=list)  # (seed, text) not RabbitMQ-shaped
    control_errors: list[str] = field(default_factory=list)
    confirmed: int = 0
    lost: int = 0
    log_problems: Counter = field(default_factory=Counter)
    restarts: dict[str, int] = field(default_factory=dict)
    node_up: bool = True
    oracle_diffs: Counter = field(default_factory=Counter)      # (warren, rabbit) -> cases
    oracle_examples: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (self.node_up and not self.refused and not self.bad_texts and not self.control_errors
                and not self.lost and not self.log_problems and not any(self.restarts.values()))

    def report(self) -> str:
        lines = [f"protocol fuzz: {self.cases} cases; verdict {'PASS' if self.ok else 'FAIL'}",
                 f"node up: {self.node_up}; host restarts: {self.restarts}",
                 f"control client: {self.confirmed} confirmed, {self.lost} lost, errors: {self.control_errors or 'none'}",
                 "endings: " + ", ".join(f"{k} {n}" for k, n in self.endings.most_common()),
                 f"handshakes refused: {len(self.refused)} {self.refused[:5]}",
                 f"texts not RabbitMQ-shaped: {self.bad_texts[:5]}",
                 f"node log problems: {dict(self.log_problems)}"]
        if self.oracle_diffs:
            lines.append(f"differences from RabbitMQ 3.10 in {sum(self.oracle_diffs.values())} cases "
                         "(warren | rabbitmq: cases, first seed):")
            lines += [f"  {w} | {r}: {n}, seed {self.oracle_examples[(w, r)]}"
                      for (w, r), n in self.oracle_diffs.most_common()]
        return "\n".join(lines)


def shaped(ending: Ending) -> bool:
    """A close whose code is the spec's and whose text opens with its name, as RabbitMQ's do."""
    return ending.kind != "close" or (ending.code in CODE_NAMES
                                      and ending.text.startswith(f"{CODE_NAMES[ending.code]} - "))


def run_case(host: str, port: int, seed: int) -> Ending:
    c = RawConnection(host, port)
    try:
        try:
            c.send(case(seed).data)
        except OSError:
            pass  # the node closed while we were still sending: ending() reads what it said
        return c.ending(ending_timeout_s)
    finally:
        c.close()


def summary(ending: Ending) -> str:
    """An ending as compared with the oracle: the kind, the code and the text, less the line breaks
    Erlang's ~p puts into a long binary (README: warren prints it on one line)."""
    return f"close {ending.code} {_ERLANG_WRAP.sub('', ending.text)}" if ending.kind == "close" else ending.kind


class Control:
    """A well-behaved client beside the fuzzers: publishes with confirms, consumes, must notice nothing."""

    def __init__(self, url: str, findings: Findings) -> None:
        self.url = url
        self.findings = findings
        self.stop = threading.Event()
        self.confirmed: set[str] = set()
        self.consumed: set[str] = set()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            conn = pika.BlockingConnection(pika.URLParameters(self.url))
            ch = conn.channel()
            ch.queue_declare(CONTROL_QUEUE, durable=True)
            ch.confirm_delivery()
            ch.basic_consume(CONTROL_QUEUE, lambda c, m, p, b: (self.consumed.add(b.decode()),
                                                                c.basic_ack(m.delivery_tag)))
            n = 0
            while not self.stop.is_set():
                n += 1
                ch.basic_publish("", CONTROL_QUEUE, b"%d" % n, pika.BasicProperties(delivery_mode=2))
                self.confirmed.add(str(n))
                conn.process_data_events(control_publish_s)
            # what is missing at the end is the finding (finish): the wait itself does not fail
            until(lambda: conn.process_data_events(0.1) or not self.confirmed - self.consumed,
                  "the control messages", 30, every_s=0, raises=False)
            conn.close()
        except Exception as e:  # anything at all is a finding: this client did nothing wrong
            self.findings.control_errors.append(f"{type(e).__name__}: {e}")

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(60)
        self.findings.confirmed = len(self.confirmed)
        self.findings.lost = len(self.confirmed - self.consumed)


def fuzz(node: Node, seeds: range, *, workers: int, oracle_port: int | None = None) -> Findings:
    findings = Findings()
    ctl = Control(node.url, findings)
    ctl.thread.start()
    lock = threading.Lock()

    def one(seed: int) -> None:
        try:
            ending = run_case(node.host, node.port, seed)
        except (ConnectionError, OSError) as e:
            with lock:
                findings.refused.append(f"seed {seed}: {e}")
            return
        theirs = run_case("127.0.0.1", oracle_port, seed) if oracle_port else None
        with lock:
            findings.cases += 1
            findings.endings[f"close {ending.code}" if ending.kind == "close" else ending.kind] += 1
            if not shaped(ending):
                findings.bad_texts.append((seed, ending.text))
            if theirs is not None and summary(ending) != summary(theirs):
                key = (_kind(summary(ending)), _kind(summary(theirs)))
                findings.oracle_diffs[key] += 1
                findings.oracle_examples.setdefault(key, seed)

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, seeds))
    ctl.finish()
    findings.node_up = node.proc.poll() is None and port_open(node.port, node.host)
    findings.restarts = host_restarts(node)
    findings.log_problems = log_problems(node)
    return findings


def _kind(summary: str) -> str:
    """A difference's class: the code and the start of the text (the octets quoted vary by case)."""
    return summary[:60]


def host_restarts(node: Node) -> dict[str, int]:
    port = int((node.data_dir / "admin_port").read_text())
    status = control(port, "$supervisor", "node_status", {})
    return {p["name"]: p["restarts"] for p in status["processes"] if p.get("restarts") is not None}


def log_problems(node: Node) -> Counter:
    found: Counter = Counter()
    for path in sorted((node.data_dir / "log").glob("warren.log*")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") in bad_log_events or "Traceback" in str(record.get("exception", "")):
                found[f"{record.get('event')}: {str(record.get('exception', ''))[-200:]}"] += 1
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0, help="the first case's seed (cases are seed, seed+1, ...)")
    p.add_argument("--workers", type=int, default=6, help="connections at once")
    p.add_argument("--oracle", action="store_true", help="compare every ending with RabbitMQ 3.10's")
    p.add_argument("--oracle-port", type=int, default=5699,
                   help="the oracle's AMQP port (a running one is used as it is; default 5699)")
    p.add_argument("--out", type=Path, default=REPO / "var" / "fuzz")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    node = start_node(a.out / f"node-{time.strftime('%Y%m%d-%H%M%S')}")
    oracle_dir = a.out / "oracle"
    oracle_port = a.oracle_port if a.oracle else None
    started = oracle_port is not None and not port_open(oracle_port)
    try:
        if started:  # its distribution port is AMQP + 20000: keep the AMQP port below 45536
            subprocess.run([str(REPO / "scripts" / "rabbitmq_oracle"), "start", str(oracle_port), str(oracle_dir)],
                           check=True)
        findings = fuzz(node, range(a.seed, a.seed + a.cases), workers=a.workers, oracle_port=oracle_port)
    finally:
        node.stop()
        if started:
            subprocess.run([str(REPO / "scripts" / "rabbitmq_oracle"), "stop", str(oracle_dir)], check=False)
    print(findings.report())
    print(f"node data and log: {node.data_dir}; replay a case: tests.fuzz.sequences.case(SEED).data")
    return 0 if findings.ok else 1


if __name__ == "__main__":
    sys.exit(main())
