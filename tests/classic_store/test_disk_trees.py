"""The Disk operations the host storage needs beyond files (persist/disk.py): reading a small file
whole, and removing a directory tree. Both disks honour the same contract; the simulated one also
keeps its crash rule: a removal is durable only once the tree's parent directory is synced."""
from __future__ import annotations

import random

import pytest

from persist.disk import RealDisk, write_atomic
from tests.sim.simdisk import SimDisk


@pytest.fixture(params=["real", "sim"])
def disk(request, tmp_path):
    d = RealDisk(str(tmp_path), sync_method="none") if request.param == "real" else SimDisk(random.Random(1))
    yield d
    d.close()


def fill(disk, root: str) -> None:
    """root/a (appended, held open), root/sub/b, root/sub/deeper/c; all durable."""
    for d in (root, f"{root}/sub", f"{root}/sub/deeper"):
        disk.makedirs(d)
    for path in (f"{root}/a", f"{root}/sub/b", f"{root}/sub/deeper/c"):
        disk.open(path)
        disk.append(path, path.encode())
        disk.sync(path)
    for d in (root, f"{root}/sub", f"{root}/sub/deeper", "top"):
        disk.fsync_dir(d)


def test_read_file_reads_a_whole_small_file_and_fails_on_a_missing_one(disk):
    disk.makedirs("top")
    write_atomic(disk, "top/name", b'["/", "q"]')
    assert disk.read_file("top/name") == b'["/", "q"]'
    with pytest.raises(FileNotFoundError):
        disk.read_file("top/none")
    assert not disk.exists("top/none")  # reading did not create it


def test_remove_tree_removes_everything_under_it_and_nothing_else(disk):
    fill(disk, "top/x")
    fill(disk, "top/y")
    disk.remove_tree("top/x")
    assert not disk.exists("top/x") and not disk.exists("top/x/a") and disk.listdir("top") == ["y"]
    assert disk.read("top/y/sub/b") == b"top/y/sub/b"
    disk.remove_tree("top/x")  # gone already: nothing to do
    disk.remove_tree("top/never")


def test_a_file_made_again_where_a_tree_was_removed_starts_empty(disk):
    """The disk let go of what it held open in the tree: appends go to the new file, not the old."""
    fill(disk, "top/x")
    disk.remove_tree("top/x")
    disk.makedirs("top/x")
    disk.open("top/x/a")
    assert disk.size("top/x/a") == 0
    assert disk.append("top/x/a", b"new") == 0
    assert disk.read("top/x/a") == b"new"


def test_sim_a_removal_not_made_durable_comes_back_after_a_crash():
    disk = SimDisk(random.Random(1))
    fill(disk, "top/x")
    disk.remove_tree("top/x")
    disk.crash()
    assert disk.listdir("top/x") == ["a", "sub"] and disk.read("top/x/sub/deeper/c") == b"top/x/sub/deeper/c"


def test_sim_a_removal_made_durable_stays_after_a_crash():
    disk = SimDisk(random.Random(1))
    fill(disk, "top/x")
    disk.remove_tree("top/x/sub")
    disk.remove_tree("top/x")  # the inner removal is part of this one
    disk.fsync_dir("top")
    disk.crash()
    assert not disk.exists("top/x") and disk.files() == []


def test_sim_a_tree_made_again_and_synced_keeps_its_new_files_when_the_old_removal_is_synced():
    disk = SimDisk(random.Random(1))
    fill(disk, "top/x")
    disk.remove_tree("top/x")
    disk.makedirs("top/x")
    disk.open("top/x/new")
    disk.fsync_dir("top/x")
    disk.fsync_dir("top")
    disk.crash()
    assert disk.files() == ["top/x/new"]
