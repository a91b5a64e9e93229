"""tests/watchdog.py against tests that swallow pytest-timeout's exception, each in a pytest run
of its own: one blocked on a child's pipe is freed by the kill and reported failed while the run
goes on; one that blocks whatever happens ends the run with status 1 and its stack shown."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BLOCKED_ON_A_CHILD = '''
import subprocess, sys
import pytest

@pytest.mark.timeout(1)
def test_blocked_on_a_child():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdout=subprocess.PIPE)
    while True:
        try:
            if child.stdout.read() == b"":
                return
        except BaseException:
            pass

def test_after_it():
    pass
'''

BLOCKED_FOR_GOOD = '''
import time
import pytest

@pytest.mark.timeout(1)
def test_blocked_for_good():
    while True:
        try:
            time.sleep(0.05)
        except BaseException:
            pass

def test_never_reached():
    pass
'''


def run_probe(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    probe = tmp_path / "test_probe.py"
    probe.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.watchdog",
         "-o", "watchdog_grace=1", "--rootdir", str(tmp_path), "-c", "/dev/null", str(probe)],
        cwd=REPO, capture_output=True, text=True, timeout=60)


def test_a_test_blocked_on_a_child_is_freed_and_failed_and_the_run_goes_on(tmp_path):
    done = run_probe(tmp_path, BLOCKED_ON_A_CHILD)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "watchdog: killed 1 processes" in done.stderr
    assert "test_probe.py::test_blocked_on_a_child hung past its timeout" in done.stdout
    assert "2 passed, 1 error" in done.stdout  # the call ended, its teardown report carries the failure


def test_a_test_blocked_for_good_ends_the_run_with_its_stack(tmp_path):
    done = run_probe(tmp_path, BLOCKED_FOR_GOOD)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_blocked_for_good is still blocked; ending the run" in done.stderr
    assert "in test_blocked_for_good" in done.stderr  # its frame in the stack shown
    assert "test_never_reached" not in done.stdout and "passed" not in done.stdout
