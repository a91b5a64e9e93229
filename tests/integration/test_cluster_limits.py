"""Vhost and user limits count the whole cluster: connections and channels open on one node count
against a limit checked on another (RabbitMQ's tracking tables; actors/reader/tracking.py). The
refusals are RabbitMQ 3.10's (tests/access/ compares them with the oracle on one node)."""
from __future__ import annotations

import subprocess
import sys

import pika
import pytest

from tests.integration.cluster import Cluster, module_cluster
from tests.waiting import until

pytestmark = pytest.mark.integration


cluster = module_cluster("limits-cluster", 2)


def ctl(cluster: Cluster, name: str, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "scripts.warrenctl", "-n", str(cluster.nodes[name].data_dir), *args],
                   check=True, capture_output=True)


def connect(cluster: Cluster, name: str, vhost: str = "/"):
    params = pika.URLParameters(cluster.url(name))
    params.virtual_host = vhost
    try:
        return pika.BlockingConnection(params)
    except pika.exceptions.ProbableAccessDeniedError as e:
        return str(e)


def refused_on(cluster: Cluster, name: str, vhost: str, text: str) -> bool:
    got = connect(cluster, name, vhost)
    if isinstance(got, str):
        return text in got
    got.close()  # the other node's count had not reached this one yet: ask again
    return False


def admitted(cluster: Cluster, name: str, vhost: str) -> bool:
    got = connect(cluster, name, vhost)
    if isinstance(got, str):
        return False
    got.close()
    return True


def test_a_vhost_connection_limit_counts_the_connections_of_every_node(cluster: Cluster) -> None:
    ctl(cluster, "n1", "add_vhost", "lim")
    ctl(cluster, "n1", "set_permissions", "-p", "lim", "guest", ".*", ".*", ".*")
    ctl(cluster, "n1", "set_vhost_limits", "-p", "lim", '{"max-connections": 1}')
    held = connect(cluster, "n1", "lim")
    text = "access to vhost 'lim' refused for user 'guest': connection limit (1) is reached"
    until(lambda: refused_on(cluster, "n2", "lim", text), "n2 refusing the second connection")
    held.close()
    until(lambda: admitted(cluster, "n2", "lim"), "n2 admitting one once n1's is closed")


def test_a_user_channel_limit_counts_the_channels_of_every_node(cluster: Cluster) -> None:
    ctl(cluster, "n1", "set_user_limits", "guest", '{"max-channels": 2}')
    try:
        first = connect(cluster, "n1")
        first.channel()
        first.channel()
        text = "number of channels opened for user 'guest' has reached the maximum allowed user limit of (2)"

        def refused() -> bool:
            conn = connect(cluster, "n2")
            try:
                conn.channel()
            except pika.exceptions.ConnectionClosedByBroker as e:
                return e.reply_code == 530 and text in e.reply_text
            conn.close()
            return False
        until(refused, "n2 refusing a third channel")
        first.close()
    finally:
        ctl(cluster, "n1", "clear_user_limits", "guest", "all")
