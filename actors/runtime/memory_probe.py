"""What grows inside a host process: the control op `memory` (a diagnostic, off the hot path).

Two views, both taken only when asked:
- **containers**: the size of every dict, list, set and deque an actor (or the runtime) keeps,
  found by walking the attributes of each actor, and of the warren objects it holds, a few levels
  deep. Sizes are summed over the actors of one type, keyed `Type.attr.attr`. A table that keeps
  one entry per connection, channel or queue that has come and gone (keyed by a dead name) shows
  here as a count that climbs with the churn while the live population stays flat.
- **allocations** (only when the process runs with `WARREN_TRACEMALLOC=1`, which starts
  tracemalloc before the host's loop, at a cost on every allocation, so never by default): the
  allocation sites that grew most since the previous `memory` ask of this process (or since the
  start), and the bytes traced now.

`collect=true` runs a full gc collection first; `types=true` adds the count of live gc-tracked objects per type (a whole-heap walk, tens of ms).
`malloc` is glibc's view (mallinfo2): bytes in use and bytes free but kept in its heaps, which the
heap keeper gives back only past its thresholds (flow/heap.py). Nothing here is kept between asks but the previous tracemalloc snapshot.
"""
from __future__ import annotations

import collections
import gc
import os
import tracemalloc
from typing import Any

from actors.runtime import envelope, heap

ENV = "WARREN_TRACEMALLOC"
trace_frames = 8  # frames kept per allocation: enough to see the caller of a container's growth
walk_depth_max = 10
objects_walked_max = 200_000
top_sites_default = 25
top_types_default = 40
_OURS = ("actors", "flow", "metadata", "persist", "raft", "wire", "mgmt", "effects", "pipeline")
_CONTAINERS = (dict, list, set, frozenset, collections.deque, bytearray)
_previous: tracemalloc.Snapshot | None = None


def start_if_wanted() -> bool:
    """Start tracemalloc when the environment asks for it (before the host allocates its state)."""
    global _previous
    if os.environ.get(ENV, "") not in ("", "0") and not tracemalloc.is_tracing():
        tracemalloc.start(trace_frames)
        _previous = tracemalloc.take_snapshot()
    return tracemalloc.is_tracing()


def _ours(obj: Any) -> bool:
    return type(obj).__module__.split(".", 1)[0] in _OURS


def _fields(obj: Any) -> list[tuple[str, Any]]:
    out = list(getattr(obj, "__dict__", {}).items())
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(obj, slot) and not slot.startswith("__"):
                out.append((slot, getattr(obj, slot)))
    return out


def container_sizes(roots: dict[str, Any]) -> dict[str, int]:
    """`{"Owner.attr": summed len}` over every container reachable from `roots` through the
    attributes of warren objects (and the members of containers of warren objects), each object
    counted once and keyed by the type of the object holding it, so that the key does not depend
    on the path the walk took."""
    sizes: collections.Counter[str] = collections.Counter()
    seen: set[int] = set()
    # breadth first: an object is reached (and counted) at its least depth, so a long path that
    # meets it first does not cut off what lies below it
    stack: collections.deque[tuple[str, Any, int]] = collections.deque((label, obj, 0) for label, obj in roots.items())
    while stack and len(seen) < objects_walked_max:
        key, obj, depth = stack.popleft()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, _CONTAINERS):
            sizes[key] += len(obj)
            if depth < walk_depth_max and obj and not isinstance(obj, bytearray):
                members = obj.values() if isinstance(obj, dict) else obj
                sample = next(iter(members))
                if _ours(sample) or isinstance(sample, _CONTAINERS):  # a table of warren objects or of tables
                    stack.extend((f"{key}[]", m, depth + 1) for m in members)
            continue
        if depth >= walk_depth_max or not _ours(obj):
            continue
        owner = type(obj).__name__
        for name, value in _fields(obj):
            if isinstance(value, _CONTAINERS) or _ours(value):
                stack.append((f"{owner}.{name}", value, depth + 1))
    return dict(sizes)


def runtime_roots(runtime: Any) -> dict[str, Any]:
    """The runtime (its own tables), the envelope's header memos and its actors (several actors of a type are summed under
    their type: what matters is how the total moves with the churn)."""
    return {"Runtime": runtime, "envelope._built": envelope._built, "envelope._read": envelope._read,
            **{f"actor#{name}": a for name, a in list(runtime._actors.items())}}


def allocation_growth(limit: int, keep: bool = False) -> dict[str, Any]:
    """The sites that grew most since the previous ask (tracemalloc must be running); `keep`: diff
    against the same snapshot next time too (growth since a baseline rather than since the last ask)."""
    global _previous
    snapshot = tracemalloc.take_snapshot().filter_traces(
        (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>")))
    current, peak = tracemalloc.get_traced_memory()
    top = []
    if _previous is not None:
        for stat in snapshot.compare_to(_previous, "traceback")[:limit]:
            frames = [f"{f.filename.rsplit('/', 2)[-1] if '/' in f.filename else f.filename}:{f.lineno}"
                      for f in stat.traceback][-trace_frames:]
            top.append({"size_diff": stat.size_diff, "count_diff": stat.count_diff, "size": stat.size,
                        "where": list(reversed(frames))})
    if not keep or _previous is None:
        _previous = snapshot
    return {"traced_bytes": current, "traced_peak_bytes": peak, "top": top}


def probe(runtime: Any, args: dict) -> dict[str, Any]:
    """The answer to the control op `memory`: container sizes by actor type, the actors by type,
    and when traced the allocation growth since the previous ask."""
    if args.get("collect"):  # count what is live, not the cyclic garbage the next collection frees
        gc.collect()
    actors = collections.Counter(type(a).__name__ for a in list(runtime._actors.values()))
    answer: dict[str, Any] = {"host": runtime.host, "pid": os.getpid(), "actors": dict(actors),
                              "containers": container_sizes(runtime_roots(runtime)),
                              "gc_objects": len(gc.get_objects()), "tracing": tracemalloc.is_tracing()}
    libc = heap._glibc()
    if libc is not None:  # what the C allocator holds: in use, and free but not given back (heap.py)
        info = libc.mallinfo2()
        answer["malloc"] = {"heap_bytes": info.arena, "mmapped_bytes": info.hblkhd, "in_use_bytes": info.uordblks,
                            "free_bytes": info.fordblks}
    if tracemalloc.is_tracing():
        answer["allocations"] = allocation_growth(int(args.get("limit", top_sites_default)), bool(args.get("keep")))
    if args.get("types"):
        counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
        answer["types"] = dict(counts.most_common(int(args.get("types_limit", top_types_default))))
    return answer
