"""RabbitMQ's information units: what `2GB`, `512MiB` or `1000000` in a memory or disk limit means.

Theory of operation. RabbitMQ reads a size in three places, each with its own rules, and warren
follows each where it reads the same setting:
- the broker (rabbit_resource_monitor_misc:parse_information_unit, RabbitMQ 3.13 and 4.x) turns
  `vm_memory_high_watermark.absolute` and `disk_free_limit.absolute` into bytes: digits, then one
  of the unit spellings of `BROKER_UNITS` or none. Since 3.13 a single letter (`k`, `M`, `G`, `P`)
  is decimal, as Kubernetes reads it; `Ki`, `KiB`, `MiB`... are binary. Nothing else parses: no
  sign, no fraction, no space (`1.5GB`, `2 GB`, `1t`, `1mB` are errors);
- rabbitmq.conf's validator (cuttlefish's `is_supported_information_unit`) looks first, and a
  value it refuses stops the node with `<key> invalid, supported formats: ...`. It is looser than
  the broker: it accepts any 1-3 letter suffix that ends in a known unit, in any case, so `1.5GB`
  or `5xk` pass it and then fail to parse, which RabbitMQ logs and answers with the default;
- rabbitmqctl (`set_vm_memory_high_watermark absolute N`, `set_disk_free_limit N`) has its own
  table, `CLI_UNITS`, where `k`/`M`/`G` are still binary, and its own error texts.

Deliberate differences, each a RabbitMQ slip that cannot be what anyone relies on: `KiB` is 1024
(RabbitMQ's regex accepts it but its table lacks it, so the broker crashes on it) and `PiB` is
2^50 (RabbitMQ multiplies by 1024^4 x 2014).
"""
from __future__ import annotations

import re

KIB, MIB, GIB, TIB, PIB = (1024 ** n for n in range(1, 6))
KB, MB, GB, TB, PB = (1000 ** n for n in range(1, 6))

# Every spelling RabbitMQ's regex accepts, with what it multiplies by.
BROKER_UNITS: dict[str, int] = {
    **dict.fromkeys(("ki", "Ki", "kiB", "KiB", "kib", "KIB"), KIB),
    **dict.fromkeys(("Mi", "MiB", "mib", "MIB"), MIB),
    **dict.fromkeys(("Gi", "GiB", "gib", "GIB"), GIB),
    **dict.fromkeys(("Ti", "TiB", "tib", "TIB"), TIB),
    **dict.fromkeys(("Pi", "PiB", "pib", "PIB"), PIB),
    **dict.fromkeys(("k", "K", "kB", "KB", "kb", "Kb"), KB),
    **dict.fromkeys(("m", "M", "MB", "mb", "Mb"), MB),
    **dict.fromkeys(("g", "G", "GB", "gb", "Gb"), GB),
    **dict.fromkeys(("TB", "tb", "Tb"), TB),
    **dict.fromkeys(("p", "P", "PB", "pb", "Pb"), PB),
}
CLI_UNITS: dict[str, int] = {"": 1, "k": KIB, "kiB": KIB, "M": MIB, "MiB": MIB, "G": GIB, "GiB": GIB,
                             "kB": KB, "MB": MB, "GB": GB}

VALIDATOR_FORMATS = "supported formats: 500MB, 500MiB, 10GB, 10GiB, 2TB, 2TiB, 10000000000"

_BROKER = re.compile(r"([0-9]+)(" + "|".join(sorted(BROKER_UNITS, key=len, reverse=True)) + r")?")
_INTEGER = re.compile(r"[+-]?[0-9]+")  # cuttlefish's integer datatype; Elixir's Integer.parse
_HAS_SUFFIX = re.compile(r"[0-9]+[a-z]{1,3}\Z", re.IGNORECASE | re.ASCII)
_KNOWN_SUFFIX = re.compile(r"(k|ki|kb|kib|m|mi|mb|mib|g|gi|gb|gib|t|ti|tb|tib|p|pi|pb|pib)\Z", re.IGNORECASE | re.ASCII)
_CLI_FLOAT = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")  # Elixir's Float.parse


class UnitError(ValueError):
    """A size RabbitMQ would not read; the message is RabbitMQ's text for the place it was read."""


def parse_information_unit(value: int | str) -> int:
    """The broker's reading of a size in bytes (an int is taken as it is)."""
    if isinstance(value, int):
        return value
    match = _BROKER.fullmatch(value)
    if match is None:
        raise UnitError(f"cannot parse {value!r} as an information unit")
    digits, unit = match.groups()
    return int(digits) * (BROKER_UNITS[unit] if unit else 1)


def conf_size(value: str) -> int | str:
    """A rabbitmq.conf size setting as cuttlefish hands it to the broker: an integer when it is
    one, else the string, if the validator accepts it (the broker parses it later, and may not)."""
    if _INTEGER.fullmatch(value):
        return int(value)
    if is_supported_information_unit(value):
        return value
    raise UnitError(VALIDATOR_FORMATS)


def is_supported_information_unit(value: str) -> bool:
    """cuttlefish's validator for the size settings (see the module docstring)."""
    text = value.rstrip()
    return bool(_HAS_SUFFIX.search(text) and _KNOWN_SUFFIX.search(text))


def cli_memory_absolute(arg: str) -> int:
    """`rabbitmqctl set_vm_memory_high_watermark absolute ARG` in bytes, or its refusal."""
    number, rest = _cli_split(arg)
    if rest not in CLI_UNITS:
        as_float = _CLI_FLOAT.match(arg)
        if as_float is not None and arg[as_float.end():] == rest:
            raise UnitError("Bad argument: Invalid units.")
        raise UnitError("Bad argument: The threshold should be an integer.")
    return number * CLI_UNITS[rest]


def cli_memory_relative(arg: str) -> float:
    """`rabbitmqctl set_vm_memory_high_watermark ARG`: a fraction of the total RAM."""
    fraction = _cli_float(arg)
    if not 0.0 <= fraction <= 1.0:
        raise UnitError("Bad argument: The threshold should be a fraction between 0.0 and 1.0")
    return fraction


def cli_disk_absolute(arg: str) -> int:
    """`rabbitmqctl set_disk_free_limit ARG` in bytes: an integer, with a CLI unit or none (a
    negative number passes only without a unit, as in rabbitmqctl)."""
    number, rest = _cli_split(arg)
    if rest not in CLI_UNITS or (rest and number < 0):
        raise UnitError("Bad argument.")
    return number * CLI_UNITS[rest]


def cli_disk_relative(arg: str) -> float:
    """`rabbitmqctl set_disk_free_limit mem_relative ARG`: a multiple of the total RAM, >= 0."""
    fraction = _cli_float(arg)
    if fraction < 0.0:
        raise UnitError("Bad argument.")
    return fraction


def _cli_split(arg: str) -> tuple[int, str]:
    """Elixir's Integer.parse: the leading integer and the rest."""
    number = _INTEGER.match(arg)
    if number is None:
        raise UnitError("Bad argument.")
    return int(number.group()), arg[number.end():]


def _cli_float(arg: str) -> float:
    """Elixir's Float.parse, where nothing may follow the number."""
    if _CLI_FLOAT.fullmatch(arg) is None:
        raise UnitError("Bad argument.")
    return float(arg)
