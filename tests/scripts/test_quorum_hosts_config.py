"""`quorum_hosts` in warren.conf (scripts/config.py): 0 (the default) means from the cores, a count sets it."""
from __future__ import annotations

import pytest

from scripts.config import ConfigError, default_quorum_hosts, load


@pytest.mark.parametrize("cores, connection_hosts, expected", [
    (1, 2, 1), (2, 2, 1), (4, 2, 1), (5, 2, 1),  # no core for a second quorum host and the WAL's process
    (6, 2, 2), (16, 2, 2),  # as many as the connection hosts
    (16, 7, 7), (64, 30, 30), (8, 7, 1),
])
def test_the_default_follows_the_cores_and_the_connection_hosts(cores, connection_hosts, expected) -> None:
    assert default_quorum_hosts(cores, connection_hosts) == expected


def test_the_setting_is_read_and_checked(tmp_path) -> None:
    path = tmp_path / "warren.conf"
    assert load(None, {})["quorum_hosts"] == 0
    path.write_text("quorum_hosts = 3\n")
    assert load(path, {})["quorum_hosts"] == 3
    path.write_text("quorum_hosts = many\n")
    with pytest.raises(ConfigError):
        load(path, {})
