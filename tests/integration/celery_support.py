"""Celery workers as subprocesses against real warren nodes, for tests/integration/test_celery.py
and bench/celery_run.py: `CeleryWorld` holds the brokers (one node or a 3-node cluster), the
result and mark directories, and the worker it starts, kills (-9) and starts again."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pika
from celery import Celery

from scripts.local_cluster import REPO, Cluster, Node, start_node
from tests.integration.celery_app import TASKS, make_app
from tests.integration.sessions import kill_session, stop_session
from tests.integration.workers import Marks
from tests.waiting import until

worker_ready_s = 90.0  # a first start declares kombu's 28 delayed-delivery quorum queues


class Worker:
    """`celery worker` (solo pool: one process, so kill -9 kills the task with it)."""

    def __init__(self, world: CeleryWorld, name: str) -> None:
        self.log_path = world.root / f"worker-{name}.log"
        env = dict(os.environ, WARREN_CELERY_BROKER=world.broker_url, WARREN_CELERY_BACKEND=str(world.results),
                   WARREN_CELERY_MARKS=str(world.marks.root))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", TASKS, "worker", "--pool=solo", "-Q", "celery,classic",
                 "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info", "-n", f"{name}@%h"],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        ready = until(lambda: " ready." in self.log() or self.proc.poll() is not None, "the worker", worker_ready_s,
                      raises=False)
        if not ready or self.proc.poll() is not None:
            raise AssertionError(f"the worker did not get ready:\n{self.log()[-4000:]}")

    def kill(self) -> None:
        """kill -9, mid-task if one runs."""
        kill_session(self.proc, 30)

    def stop(self) -> None:
        stop_session(self.proc)


class CeleryWorld:
    def __init__(self, root: Path, nodes: int) -> None:
        self.root = root
        self.results = root / "results"
        self.marks = Marks(root / "marks")
        self.results.mkdir(parents=True)
        self.marks.root.mkdir()
        self.cluster: Cluster | None = None
        self.node: Node | None = None
        if nodes == 1:
            self.node = start_node(root / "node")
            urls = [self.node.url]
        else:
            self.cluster = Cluster(root / "cluster", nodes).start()
            urls = [self.cluster.url(n) for n in self.cluster.names]
            # the classic queue lives where it is first declared (client-local): on the last node,
            # so the first one, the worker's, can restart under it (a classic queue whose node is
            # down answers 404, on RabbitMQ as here, and Celery stops on that)
            with pika.BlockingConnection(pika.URLParameters(urls[-1])) as conn:
                conn.channel().queue_declare("classic", durable=True)
        self.urls = urls
        self.broker_url = ";".join(urls)  # kombu's failover list
        self.app: Celery = make_app(self.broker_url, str(self.results))
        # The test's own publishes wait for their confirms: one written into a pooled connection that
        # died with a restarted node (its FIN read by nobody yet) is otherwise lost without an error,
        # on RabbitMQ as here; with a confirm awaited kombu sees the error and publishes again.
        self.app.conf.broker_transport_options = {"confirm_publish": True}
        self.workers: list[Worker] = []

    def start_worker(self) -> Worker:
        worker = Worker(self, f"w{len(self.workers) + 1}")
        self.workers.append(worker)
        worker.wait_ready()
        return worker

    @property
    def worker(self) -> Worker:
        return self.workers[-1]

    def task(self, name: str):
        return self.app.signature(f"{TASKS}.{name}")

    def mark(self, name: str) -> list[str]:
        return self.marks.lines(name)

    def wait_mark(self, name: str, lines: int, deadline_s: float = 30.0) -> list[str]:
        return self.marks.wait(name, lines, deadline_s)

    def restart_broker(self) -> None:
        """Stop the node the worker is connected to first (the failover list's first) and start it
        again on the same ports and data dir."""
        if self.node is not None:
            self.node.stop()
            self.node = start_node(self.node.data_dir, port=self.node.port, cluster_port=self.node.cluster_port)
        else:
            assert self.cluster is not None
            first = self.cluster.names[0]
            self.cluster.nodes[first].stop()
            self.cluster.restart(first)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.app.close()
        if self.node is not None:
            self.node.stop()
        if self.cluster is not None:
            self.cluster.stop()
