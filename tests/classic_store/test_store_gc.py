"""The store's file table: what GC decides, as pure state (rabbit_msg_store's rules)."""
from persist.classic.store_gc import Delete, FileSummary, FileTable, Merge


def table(*files: tuple[int, int], current: int | None = None, limit: int = 100) -> FileTable:
    t = FileTable(limit, current=len(files) if current is None else current)
    for i, (valid, garbage) in enumerate(files):
        t.files[i] = FileSummary(valid, garbage)
    return t


def test_an_all_garbage_file_is_deleted_first():
    assert table((50, 10), (0, 80)).plan() == Delete(1)


def test_the_current_file_is_never_collected():
    assert table((0, 80), current=0).plan() is None


def test_two_adjacent_files_merge_when_live_fits_and_garbage_is_above_half():
    assert table((20, 60), (30, 40)).plan() == Merge(0, 1)


def test_no_merge_at_exactly_half_garbage():
    assert table((25, 25), (25, 25)).plan() is None


def test_no_merge_when_live_data_would_not_fit_in_one_file():
    assert table((60, 100), (50, 100)).plan() is None


def test_only_neighbours_merge():
    # 0 and 2 would qualify together, but 1 sits between them
    t = table((10, 90), (95, 0), (10, 90))
    assert t.plan() is None


def test_locked_files_are_skipped_and_finish_unlocks_and_counts():
    t = table((20, 60), (30, 40), (10, 90), (10, 90))
    first = t.plan()
    assert first == Merge(0, 1)
    t.lock(first)
    assert t.plan() == Merge(2, 3)  # only the two files being merged are locked
    t.finish(first)
    assert t.files[0] == FileSummary(50, 0) and 1 not in t.files and t.gc_runs == 1


def test_release_moves_bytes_from_valid_to_garbage():
    t = table((50, 0))
    t.release(0, 20)
    assert (t.valid_bytes, t.garbage_bytes) == (30, 20)
