"""RabbitMQ's information units (flow/units.py), case by case: the broker's table against RabbitMQ's own
regex and examples, rabbitmq.conf's validator, and rabbitmqctl's table with the texts it prints
(checked against Debian's rabbitmqctl 3.10: "Error (argument validation): Bad argument: Invalid units.")."""
from __future__ import annotations

import pytest

from flow.units import (BROKER_UNITS, VALIDATOR_FORMATS, UnitError, cli_disk_absolute, cli_disk_relative,
                        cli_memory_absolute, cli_memory_relative, conf_size, is_supported_information_unit,
                        parse_information_unit)

# rabbit_resource_monitor_misc.erl (RabbitMQ 4.0): the unit alternatives of its regex, verbatim.
RABBITMQ_REGEX_UNITS = ("kB|Ki|Mi|Gi|Ti|Pi|KB|MB|GB|TB|PB|kb|ki|mb|gb|tb|pb|Kb|Mb|Gb|Tb|Pb|kiB|KiB|MiB|GiB|TiB|PiB"
                        "|kib|mib|gib|tib|pib|KIB|MIB|GIB|TIB|PIB|k|K|m|M|g|G|p|P")


def test_the_broker_reads_exactly_the_spellings_of_rabbitmqs_regex():
    assert set(BROKER_UNITS) == set(RABBITMQ_REGEX_UNITS.split("|"))


BROKER_CASES = [
    # RabbitMQ's docs and rabbit.schema examples
    ("1073741824", 1073741824),
    ("1024MiB", 1024 * 2 ** 20),
    ("2GB", 2 * 10 ** 9),
    ("1GB", 10 ** 9),
    ("50MB", 50 * 10 ** 6),
    ("50000kB", 50 * 10 ** 6),
    ("500MiB", 500 * 2 ** 20),
    ("10GiB", 10 * 2 ** 30),
    ("2TB", 2 * 10 ** 12),
    ("2TiB", 2 * 2 ** 40),
    # since 3.13 a single letter is decimal, as Kubernetes reads it
    ("1024M", 1024 * 10 ** 6),
    ("4G", 4 * 10 ** 9),
    ("1k", 1000), ("1K", 1000), ("1kb", 1000), ("1Kb", 1000), ("1KB", 1000),
    ("1Ki", 1024), ("1ki", 1024), ("1kiB", 1024), ("1kib", 1024), ("1KIB", 1024), ("1KiB", 1024),
    ("1m", 10 ** 6), ("1Mb", 10 ** 6), ("1Mi", 2 ** 20), ("1mib", 2 ** 20), ("1MIB", 2 ** 20),
    ("1g", 10 ** 9), ("1Gi", 2 ** 30), ("1gib", 2 ** 30),
    ("1Tb", 10 ** 12), ("1Ti", 2 ** 40), ("1tib", 2 ** 40),
    ("1p", 10 ** 15), ("1PB", 10 ** 15), ("1Pi", 2 ** 50), ("1PiB", 2 ** 50),
    ("0", 0), ("007MB", 7 * 10 ** 6),
]


@pytest.mark.parametrize(("text", "size"), BROKER_CASES)
def test_the_broker_reads_a_size(text, size):
    assert parse_information_unit(text) == size


@pytest.mark.parametrize("text", ["", "lots", "1.5GB", "2 GB", " 2GB", "2GB ", "1t", "1T", "1mB", "1gB", "1mi",
                                  "-5", "+5", "1KBB", "1e9", "GB", "1bytes", "١GB"])
def test_the_broker_refuses_what_rabbitmq_cannot_parse(text):
    with pytest.raises(UnitError):
        parse_information_unit(text)


def test_an_integer_is_taken_as_bytes():
    assert parse_information_unit(50000000) == 50000000


# rabbitmq.conf: cuttlefish's datatype [integer, string] then is_supported_information_unit
CONF_CASES = [
    ("1000000", 1000000),
    ("-5", -5),  # cuttlefish's integer datatype takes a sign; the broker then takes it as it is
    ("2GB", "2GB"),
    ("512MiB", "512MiB"),
    ("1.5GB", "1.5GB"),  # passes the validator ("5GB" ends it), fails in the broker
    ("1t", "1t"),  # likewise: the validator knows t, the broker does not
    ("5xk", "5xk"),
    ("2GB  ", "2GB  "),  # the validator strips the right side; the broker does not
]


@pytest.mark.parametrize(("text", "value"), CONF_CASES)
def test_rabbitmq_conf_hands_the_broker_an_integer_or_a_string_the_validator_accepts(text, value):
    assert conf_size(text) == value


@pytest.mark.parametrize("text", ["lots", "2 GB", "1.5", "1GBB", "1x", "GB", "1ſb"])
def test_rabbitmq_conf_refuses_with_cuttlefishs_text(text):
    assert not is_supported_information_unit(text)
    with pytest.raises(UnitError) as refused:
        conf_size(text)
    assert str(refused.value) == VALIDATOR_FORMATS
    assert VALIDATOR_FORMATS == "supported formats: 500MB, 500MiB, 10GB, 10GiB, 2TB, 2TiB, 10000000000"


# rabbitmqctl: RabbitMQ.CLI.Core.Memory, where k/M/G are binary
CLI_MEMORY_CASES = [
    ("1000", 1000), ("4G", 4 * 2 ** 30), ("1024M", 2 ** 30), ("1k", 1024), ("1kiB", 1024),
    ("1MiB", 2 ** 20), ("1GiB", 2 ** 30), ("1kB", 1000), ("2000MB", 2 * 10 ** 9), ("1GB", 10 ** 9),
]


@pytest.mark.parametrize(("arg", "size"), CLI_MEMORY_CASES)
def test_rabbitmqctl_reads_an_absolute_watermark(arg, size):
    assert cli_memory_absolute(arg) == size


@pytest.mark.parametrize(("arg", "text"), [
    ("10XB", "Bad argument: Invalid units."),
    ("1Ki", "Bad argument: Invalid units."),
    ("1.GB", "Bad argument: Invalid units."),
    ("1.5GB", "Bad argument: The threshold should be an integer."),
    ("1e3GB", "Bad argument: The threshold should be an integer."),
    ("abc", "Bad argument."),
])
def test_rabbitmqctl_refuses_an_absolute_watermark_with_its_text(arg, text):
    with pytest.raises(UnitError) as refused:
        cli_memory_absolute(arg)
    assert str(refused.value) == text


@pytest.mark.parametrize(("arg", "fraction"), [("0.4", 0.4), ("0", 0.0), ("1", 1.0), ("1.0", 1.0), ("4e-1", 0.4)])
def test_rabbitmqctl_reads_a_relative_watermark(arg, fraction):
    assert cli_memory_relative(arg) == fraction


@pytest.mark.parametrize(("arg", "text"), [
    ("1.5", "Bad argument: The threshold should be a fraction between 0.0 and 1.0"),
    ("-0.1", "Bad argument: The threshold should be a fraction between 0.0 and 1.0"),
    ("abc", "Bad argument."), (".5", "Bad argument."), ("0.4x", "Bad argument."),
])
def test_rabbitmqctl_refuses_a_relative_watermark_with_its_text(arg, text):
    with pytest.raises(UnitError) as refused:
        cli_memory_relative(arg)
    assert str(refused.value) == text


@pytest.mark.parametrize(("arg", "size"), [("50000000", 50000000), ("1GB", 10 ** 9), ("1G", 2 ** 30), ("-5", -5)])
def test_rabbitmqctl_reads_a_disk_limit(arg, size):
    assert cli_disk_absolute(arg) == size


@pytest.mark.parametrize("arg", ["10XB", "abc", "-5MB", "1.5GB"])
def test_rabbitmqctl_refuses_a_disk_limit(arg):
    with pytest.raises(UnitError, match=r"^Bad argument\.$"):
        cli_disk_absolute(arg)


def test_rabbitmqctl_reads_a_relative_disk_limit_of_zero_or_more():
    assert cli_disk_relative("2.0") == 2.0 and cli_disk_relative("1") == 1.0
    for arg in ("x", "-1.0"):
        with pytest.raises(UnitError, match=r"^Bad argument\.$"):
            cli_disk_relative(arg)
