"""The resource limits in warren.conf (scripts/config.py): rabbitmq.conf's keys, types and refusals
(checked against Debian's RabbitMQ 3.10: `vm_memory_high_watermark.relative = 1` stops it with
'"1" cannot be converted to a(n) float'), absolute over relative, and the older warren keys as aliases."""
from __future__ import annotations

import pytest

from flow.alarms import AbsoluteLimit, RelativeLimit
from scripts.config import ConfigError, disk_free_limit, load, memory_watermark, parse

RAM = 8 * 2 ** 30
BOTH_MEMORY = ("Both vm_memory_high_watermark.absolute and vm_memory_high_watermark.relative are configured. "
               "vm_memory_high_watermark.absolute has precedence")


def loaded(tmp_path, text: str) -> dict:
    path = tmp_path / "warren.conf"
    path.write_text(text)
    return load(path, {}, total_memory_bytes=RAM)


CASES = [
    ("", RelativeLimit(0.4), [], AbsoluteLimit(50000000), "0.4"),
    ("vm_memory_high_watermark.relative = 0.6\n", RelativeLimit(0.6), [], AbsoluteLimit(50000000), "0.6"),
    ("vm_memory_high_watermark.absolute = 2GiB\n", AbsoluteLimit("2GiB"), [], AbsoluteLimit(50000000), "0.25"),
    ("vm_memory_high_watermark.absolute = 1073741824\n", AbsoluteLimit(2 ** 30), [], AbsoluteLimit(50000000),
     "0.125"),
    ("vm_memory_high_watermark.relative = 0.6\nvm_memory_high_watermark.absolute = 2GiB\n",
     AbsoluteLimit("2GiB"), [BOTH_MEMORY], AbsoluteLimit(50000000), "0.25"),
    ("vm_memory_high_watermark.relative = 1.5\n", RelativeLimit(1.5), [], AbsoluteLimit(50000000), "1.0"),
    ("disk_free_limit.absolute = 1GB\n", RelativeLimit(0.4), [], AbsoluteLimit("1GB"), "0.4"),
    ("disk_free_limit.relative = 2.0\n", RelativeLimit(0.4), [], RelativeLimit(2.0), "0.4"),
    # the older warren keys
    ("vm_memory_high_watermark = 0.001\n", RelativeLimit(0.001), [], AbsoluteLimit(50000000), "0.001"),
    ("disk_free_limit = 60000000\n", RelativeLimit(0.4), [], AbsoluteLimit(60000000), "0.4"),
    ("disk_free_limit = 2GB\ndisk_free_limit.absolute = 3GB\n", RelativeLimit(0.4), [], AbsoluteLimit("3GB"), "0.4"),
]


@pytest.mark.parametrize(("text", "memory", "warnings", "disk", "paging_watermark"), CASES)
def test_the_limits_a_configuration_sets(tmp_path, text, memory, warnings, disk, paging_watermark):
    conf = loaded(tmp_path, text)
    assert memory_watermark(conf) == (memory, warnings)
    assert disk_free_limit(conf)[0] == disk
    assert conf["vm_memory_high_watermark"] == paging_watermark  # what the paging threshold is built from


def test_both_disk_limits_warn_that_absolute_wins(tmp_path):
    conf = loaded(tmp_path, "disk_free_limit.relative = 1.0\ndisk_free_limit.absolute = 2GB\n")
    assert disk_free_limit(conf) == (AbsoluteLimit("2GB"), [
        "Both disk_free_limit.absolute and disk_free_limit.relative are configured. "
        "disk_free_limit.absolute has precedence"])


@pytest.mark.parametrize(("line", "text"), [
    ("vm_memory_high_watermark.relative = 1",
     'line 1: Error transforming datatype for: vm_memory_high_watermark.relative: "1" cannot be converted to a(n) float'),
    ("vm_memory_high_watermark.relative = lots",
     'line 1: Error transforming datatype for: vm_memory_high_watermark.relative: "lots" cannot be converted to a(n) '
     'float'),
    ("vm_memory_high_watermark = 0.4x",
     'line 1: Error transforming datatype for: vm_memory_high_watermark: "0.4x" cannot be converted to a(n) float'),
    ("vm_memory_high_watermark.absolute = lots",
     "line 1: vm_memory_high_watermark.absolute invalid, supported formats: 500MB, 500MiB, 10GB, 10GiB, 2TB, 2TiB, "
     "10000000000"),
    ("disk_free_limit.absolute = 2 GB",
     "line 1: disk_free_limit.absolute invalid, supported formats: 500MB, 500MiB, 10GB, 10GiB, 2TB, 2TiB, 10000000000"),
    ("disk_free_limit.relative = 2", 'line 1: Error transforming datatype for: disk_free_limit.relative: "2" cannot '
                                     'be converted to a(n) float'),
    ("disk_free_limit.percent = 2", "line 1: unknown setting 'disk_free_limit.percent'"),
])
def test_a_bad_limit_stops_the_node_with_rabbitmqs_text(line, text):
    with pytest.raises(ConfigError) as refused:
        parse(line + "\n")
    assert str(refused.value) == text


def test_a_size_the_validator_passes_but_the_broker_cannot_read_is_kept_for_the_monitor_to_refuse(tmp_path):
    conf = loaded(tmp_path, "vm_memory_high_watermark.absolute = 1.5GB\n")
    assert memory_watermark(conf) == (AbsoluteLimit("1.5GB"), [])
    assert conf["vm_memory_high_watermark"] == str(int(0.4 * RAM) / RAM)  # the monitor falls back to 0.4


@pytest.mark.parametrize(("text", "overrides", "ip", "port"), [
    ("", {}, "127.0.0.1", 5672),
    ("listeners.tcp.default = 5800\n", {}, "127.0.0.1", 5800),
    ("listeners.tcp.default = 10.0.0.5:5672\n", {}, "10.0.0.5", 5672),
    ("listeners.tcp.default = 10.0.0.5:5672\n", {"listeners.tcp.default": 5900}, "10.0.0.5", 5900),  # --port
])
def test_the_amqp_listener_is_a_port_or_an_address_and_a_port(tmp_path, text, overrides, ip, port):
    path = tmp_path / "warren.conf"
    path.write_text(text)
    conf = load(path, overrides, total_memory_bytes=RAM)
    assert (conf["listeners.tcp.default.ip"], conf["listeners.tcp.default"]) == (ip, port)


@pytest.mark.parametrize("value", ["", "x", ":5672", "10.0.0.5:", "10.0.0.5:port"])
def test_a_listener_that_is_not_a_port_is_refused(value):
    with pytest.raises(ConfigError, match="listeners.tcp.default must be PORT or IP:PORT"):
        parse(f"listeners.tcp.default = {value}\n")


@pytest.mark.parametrize(("text", "overrides", "management", "prometheus"), [
    ("", {}, 15672, 15692),  # RabbitMQ's defaults beside its default AMQP port
    ("", {"listeners.tcp.default": 5711}, 15711, 15731),  # --port 5711: README's cluster recipe
    ("listeners.tcp.default = 10.0.0.5:5800\n", {}, 15800, 15820),
    ("management.tcp.port = 8080\n", {"listeners.tcp.default": 5711}, 8080, 15731),
    ("management.tcp.port = 0\nprometheus.tcp.port = 0\n", {"listeners.tcp.default": 5711}, 0, 0),  # off
    ("", {"listeners.tcp.default": 5711, "management.tcp.port": 9000, "prometheus.tcp.port": 0}, 9000, 0),  # flags
])
def test_the_http_ports_follow_the_amqp_port_unless_set(tmp_path, text, overrides, management, prometheus):
    path = tmp_path / "warren.conf"
    path.write_text(text)
    conf = load(path, overrides, total_memory_bytes=RAM)
    assert (conf["management.tcp.port"], conf["prometheus.tcp.port"]) == (management, prometheus)


def test_an_http_port_the_rule_puts_out_of_range_is_refused_with_what_to_set():
    with pytest.raises(ConfigError, match=r"prometheus.tcp.port \(the AMQP port \+ 10020\) would be 65540"):
        load(None, {"listeners.tcp.default": 55520, "management.tcp.port": 0}, total_memory_bytes=RAM)
    assert parse("management.tcp.port = 8080\n") == {"management.tcp.port": 8080}
    with pytest.raises(ConfigError, match="management.tcp.port must be 0 or a positive integer"):
        parse("management.tcp.port = http\n")
