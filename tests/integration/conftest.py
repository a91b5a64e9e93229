import pytest

from tests.integration.nodes import start_node


@pytest.fixture(scope="session")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("warren-node"))
    yield n
    n.stop()


@pytest.fixture
def conn(node):
    import pika
    c = pika.BlockingConnection(pika.URLParameters(node.url))
    yield c
    if c.is_open:
        c.close()


@pytest.fixture
def ch(conn):
    return conn.channel()
