"""The memory and disk alarm cores (flow/alarms.py): the exact effects of each start, check and limit
change, RabbitMQ's log texts (the memory line was checked against Debian's RabbitMQ 3.10 on this
machine: "Memory high watermark set to 9642 MiB (10110604083 bytes) of 24105 MiB (25276510208 bytes)
total"), and the disk check interval as a property."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from effects import AlarmCleared, AlarmSet, Log, StartTimer
from flow.alarms import (DISK_MAX_CHECK_INTERVAL_MS, DISK_MIN_CHECK_INTERVAL_MS, AbsoluteLimit, DiskAlarm,
                         MemoryAlarm, RelativeLimit, disk_check_interval_ms, disk_limit_bytes, memory_limit_bytes)

NODE = "warren@host1"
RAM = 25276510208  # the total RAM of the machine the oracle ran on
MEMORY_TIMER = StartTimer("memory_check", 1000)
LIMIT_04 = Log("Memory high watermark set to 9642 MiB (10110604083 bytes) of 24105 MiB (25276510208 bytes) total")

MEMORY_LIMIT_CASES = [
    (RelativeLimit(0.4), 10110604083, []),  # trunc(0.4 x RAM)
    (RelativeLimit(0.0), 0, []),
    (RelativeLimit(1.0), RAM, []),
    (RelativeLimit(1.5), RAM, [Log("Memory high watermark of 1.5 is above the allowed maximum, falling back to 1.0",
                                   "warning")]),
    (AbsoluteLimit(1073741824), 1073741824, []),
    (AbsoluteLimit("1024MiB"), 1073741824, []),
    (AbsoluteLimit("2GB"), 2 * 10 ** 9, []),
    (AbsoluteLimit("100GB"), RAM, []),  # never above the RAM there is
    (AbsoluteLimit("1.5GB"), 10110604083, [Log('Unable to parse vm_memory_high_watermark value "1.5GB"', "error")]),
]


@pytest.mark.parametrize(("limit", "limit_bytes", "logs"), MEMORY_LIMIT_CASES, ids=lambda v: repr(v)[:40])
def test_the_memory_limit_of_each_setting(limit, limit_bytes, logs):
    assert memory_limit_bytes(limit, RAM) == (limit_bytes, logs)


def test_memory_start_logs_the_limit_and_asks_for_a_check_in_a_second():
    alarm = MemoryAlarm(NODE)
    assert alarm.start(RelativeLimit(0.4), RAM, 10 ** 8) == [LIMIT_04, MEMORY_TIMER]
    assert not alarm.alarmed and alarm.limit_bytes == 10110604083


def test_memory_alarm_is_set_above_the_limit_and_cleared_at_it_without_hysteresis():
    alarm = MemoryAlarm(NODE)
    alarm.start(AbsoluteLimit(1000), RAM, 0)
    assert alarm.check(1000) == [MEMORY_TIMER]  # at the limit: not above it
    assert alarm.check(1001) == [Log("vm_memory_high_watermark set. Memory used:1001 allowed:1000"),
                                 AlarmSet("memory", NODE), MEMORY_TIMER]
    assert alarm.check(5000) == [MEMORY_TIMER]  # still set: nothing new
    assert alarm.check(1000) == [Log("vm_memory_high_watermark clear. Memory used:1000 allowed:1000"),
                                 AlarmCleared("memory", NODE), MEMORY_TIMER]
    assert alarm.check(999) == [MEMORY_TIMER]


def test_a_zero_watermark_blocks_at_once_and_raising_it_clears_the_alarm():
    """The seed's 9.2.1 sequence: set to 0 (the alarm), then back to 0.4 (cleared)."""
    alarm = MemoryAlarm(NODE)
    used = 93482232
    assert alarm.start(RelativeLimit(0.0), RAM, used) == [
        Log("Memory high watermark set to 0 MiB (0 bytes) of 24105 MiB (25276510208 bytes) total"),
        Log(f"vm_memory_high_watermark set. Memory used:{used} allowed:0"), AlarmSet("memory", NODE), MEMORY_TIMER]
    assert alarm.configure(RelativeLimit(0.4), RAM, used) == [
        LIMIT_04, Log(f"vm_memory_high_watermark clear. Memory used:{used} allowed:10110604083"),
        AlarmCleared("memory", NODE)]


DISK_LIMIT_CASES = [
    (AbsoluteLimit(50000000), 50000000, []),
    (AbsoluteLimit("1GB"), 10 ** 9, []),
    (AbsoluteLimit("50000kB"), 50000000, []),
    (RelativeLimit(1.0), RAM, []),
    (RelativeLimit(1.5), 37914765312, []),
    (RelativeLimit(0.5), 12638255104, []),
    (AbsoluteLimit("2 GB"), 50000000, [Log('Unable to parse disk_free_limit value "2 GB"', "error")]),
]


@pytest.mark.parametrize(("limit", "limit_bytes", "logs"), DISK_LIMIT_CASES, ids=lambda v: repr(v)[:40])
def test_the_disk_limit_of_each_setting(limit, limit_bytes, logs):
    assert disk_limit_bytes(limit, RAM) == (limit_bytes, logs)


def test_a_relative_disk_limit_rounds_half_away_from_zero_as_erlang():
    assert disk_limit_bytes(RelativeLimit(0.5), 5) == (3, [])  # 2.5: Erlang's round says 3, Python's round() 2
    assert disk_limit_bytes(RelativeLimit(0.5), 7) == (4, [])  # 3.5: both say 4


def test_disk_start_logs_as_rabbitmq_and_checks_sooner_near_the_limit():
    alarm = DiskAlarm(NODE)
    free = 10 ** 9
    assert alarm.start(AbsoluteLimit(50000000), RAM, free) == [
        Log(f"Enabling free disk space monitoring (disk free space: {free}, total memory: {RAM})"),
        Log("Disk free limit set to 50MB"),
        StartTimer("disk_check", 7600)]  # 2 x 950 MB / 250 MB/s


def test_disk_alarm_is_set_below_the_limit_checked_every_10s_while_set_and_cleared_at_it():
    alarm = DiskAlarm(NODE)
    alarm.start(AbsoluteLimit(1000), RAM, 10 ** 12)
    assert alarm.check(1000) == [StartTimer("disk_check", 100)]  # at the limit: enough, and as often as it gets
    assert alarm.check(999) == [Log("Free disk space is insufficient. Free bytes: 999. Limit: 1000"),
                                AlarmSet("disk", NODE), StartTimer("disk_check", 10000)]
    assert alarm.check(0) == [StartTimer("disk_check", 10000)]
    assert alarm.check(1000) == [Log("Free disk space is sufficient. Free bytes: 1000. Limit: 1000"),
                                 AlarmCleared("disk", NODE), StartTimer("disk_check", 100)]


def test_a_free_space_that_could_not_be_read_changes_nothing_and_waits_the_longest():
    alarm = DiskAlarm(NODE)
    alarm.start(AbsoluteLimit(1000), RAM, 10)
    assert alarm.alarmed
    assert alarm.check(None) == [StartTimer("disk_check", 10000)]
    assert alarm.alarmed


def test_a_disk_that_cannot_be_read_at_start_is_checked_again_later_without_enabling():
    alarm = DiskAlarm(NODE)
    assert alarm.start(AbsoluteLimit(1000), RAM, None) == [Log("Disk free limit set to 0MB"),
                                                           StartTimer("disk_check", 10000)]
    assert alarm.check(10) == [Log("Free disk space is insufficient. Free bytes: 10. Limit: 1000"),
                               AlarmSet("disk", NODE), StartTimer("disk_check", 10000)]


def test_changing_the_disk_limit_at_run_time_rechecks_at_once():
    alarm = DiskAlarm(NODE)
    alarm.start(AbsoluteLimit(1000), RAM, 5000)
    assert alarm.configure(AbsoluteLimit("1MB"), RAM, 5000) == [
        Log("Disk free limit set to 1MB"), Log("Free disk space is insufficient. Free bytes: 5000. Limit: 1000000"),
        AlarmSet("disk", NODE)]


@pytest.mark.parametrize(("free", "limit", "ms"), [
    (50_000_000, 50_000_000, 100), (50_000_000 + 12_500_000, 50_000_000, 100),  # 100 ms: 10 checks a second
    (50_000_000 + 25_000_000, 50_000_000, 200), (50_000_000 + 1_250_000_000, 50_000_000, 10000),
    (10 ** 15, 50_000_000, 10000),
])
def test_disk_check_interval_table(free, limit, ms):
    assert disk_check_interval_ms(free, limit, alarmed=False) == ms


sizes = st.integers(0, 10 ** 13)


@given(sizes, sizes, sizes)
def test_disk_check_interval_is_monotone_in_free_space_and_within_bounds(free_a, free_b, limit):
    """More free space never means an earlier check; every interval is within 100 ms .. 10 s."""
    low, high = sorted((free_a, free_b))
    if low < limit:
        return  # below the limit the alarm is set: see the next property
    a = disk_check_interval_ms(low, limit, alarmed=False)
    b = disk_check_interval_ms(high, limit, alarmed=False)
    assert DISK_MIN_CHECK_INTERVAL_MS <= a <= b <= DISK_MAX_CHECK_INTERVAL_MS


@given(st.lists(sizes, min_size=1, max_size=30), st.integers(0, 10 ** 12))
def test_disk_checks_against_a_model(frees, limit):
    """After every check: alarmed iff free < limit; sets and clears alternate, starting with a set;
    the next check is within bounds, and the longest while the alarm is in force."""
    alarm = DiskAlarm(NODE)
    changes = [e for e in alarm.start(AbsoluteLimit(limit), RAM, frees[0]) if isinstance(e, (AlarmSet, AlarmCleared))]
    for free in frees[1:]:
        effects = alarm.check(free)
        changes += [e for e in effects if isinstance(e, (AlarmSet, AlarmCleared))]
        assert alarm.alarmed is (free < limit)
        timer = effects[-1]
        assert isinstance(timer, StartTimer) and DISK_MIN_CHECK_INTERVAL_MS <= timer.ticks <= DISK_MAX_CHECK_INTERVAL_MS
        assert not alarm.alarmed or timer.ticks == DISK_MAX_CHECK_INTERVAL_MS
    assert [type(c) for c in changes] == [(AlarmSet, AlarmCleared)[i % 2] for i in range(len(changes))]


@given(st.lists(st.integers(0, 10 ** 6), min_size=1, max_size=30), st.integers(0, 10 ** 6))
def test_memory_checks_against_a_model(useds, limit):
    alarm = MemoryAlarm(NODE)
    alarm.start(AbsoluteLimit(limit), RAM, useds[0])
    changes = []
    for used in useds:
        effects = alarm.check(used)
        assert effects[-1] == MEMORY_TIMER
        changes += [type(e) for e in effects if isinstance(e, (AlarmSet, AlarmCleared))]
        assert alarm.alarmed is (used > limit)
    assert all(a is not b for a, b in zip(changes, changes[1:]))
