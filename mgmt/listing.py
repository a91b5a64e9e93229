"""RabbitMQ's options of a listing: sort, sort_reverse, pagination (page, page_size, name,
use_regex) and columns, as rabbit_mgmt_util (3.10) applies them.

Theory of operation: a listing is sorted first -- by the `sort` field (dotted for nested ones),
then by the route's default fields (vhost and name for queues, exchanges, vhosts, connections and
channels), comparing values in Erlang's term order (numbers < atoms < maps < lists < strings; a
missing field counts as 0), then reversed whole if `sort_reverse=true`; an empty `sort=` leaves
the order alone. Pagination is asked for by `page`: the sorted rows are filtered by `name`
(a case-insensitive substring, or with `use_regex=true` a case-insensitive regular expression),
the page is cut from what is left, and the answer is an object with the counts around the items:
`total_count` (all rows), `filtered_count`, `item_count`, `page`, `page_size` (default 100, at most
500) and `page_count`. Without `page`, `name` filters nothing, as in RabbitMQ. Bad parameters are
RabbitMQ's 400s: `bad_request` "Pagination parameters are invalid" for a value that is no integer
(or a regex that does not compile), `invalid_pagination_parameters` for a page below 1 or a page
size outside 1..500, `page_out_of_range` for a page that starts past the filtered rows' end plus
one. `columns=a,b.c` keeps those (dotted) fields of each item.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mgmt.changes import Answer
from mgmt.rows import Row, value

DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 100, 500
BY_NAME = ("vhost", "name")  # rabbit_mgmt_util's default sort of these listings
INVALID = Answer(400, {"error": "bad_request", "reason": "Pagination parameters are invalid"})
_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Pagination:
    page: int
    page_size: int
    name: str
    use_regex: bool


@dataclass(frozen=True)
class Options:
    default_sort: tuple[str, ...] = ()
    presorted: bool = False  # the rows come in the default order (the registry lists by vhost, then name)
    paginated: bool = False
    counts_first: bool = False  # the page's keys in rabbit_mgmt_util's proplist order (connections, channels)


def answer(rows: list, query: dict[str, str], options: Options) -> Answer:
    """The listing `rows` (dicts or rows.Row) as the query asks for it."""
    pagination = None
    if options.paginated:
        pagination = pagination_of(query)
        if isinstance(pagination, Answer):
            return pagination
    rows = sort(rows, query, () if options.presorted else options.default_sort)
    columns = [c for c in query.get("columns", "").split(",") if c]
    if pagination is None:
        return Answer(200, [pick(value(r), columns) for r in rows] if columns else rows)
    page = cut(rows, pagination, options.counts_first)
    if isinstance(page, Answer):
        return page
    if columns:
        page["items"] = [pick(value(r), columns) for r in page["items"]]
    return Answer(200, page)


def pagination_of(query: dict[str, str]) -> Pagination | Answer | None:
    """The page asked for, None without `page`, or RabbitMQ's 400 (rabbit_mgmt_util:pagination_params)."""
    numbers: list[int | None] = []
    for key in ("page", "page_size"):
        text = query.get(key)
        if text is not None and not _INTEGER.fullmatch(text):
            return INVALID
        numbers.append(None if text is None else int(text))
    page, size = numbers
    if page is None:
        return None
    if page > 0 and (size is None or 0 < size <= MAX_PAGE_SIZE):
        return Pagination(page, size or DEFAULT_PAGE_SIZE, query.get("name", ""), query.get("use_regex") == "true")
    return Answer(400, {"error": "invalid_pagination_parameters", "reason": "Invalid pagination parameters: "
                        f"page number {page}, page size {'undefined' if size is None else size}"})


def sort(rows: list, query: dict[str, str], default: tuple[str, ...]) -> list:
    """`rows` in the order asked for, then by `default` (Python's sort is stable: rows already in
    the default order need only the asked field)."""
    field = query.get("sort")
    if field == "":
        return rows
    fields = ((field,) if field else ()) + default
    if fields:
        getters = [_getter(f) for f in fields]

        def key(row: Any) -> tuple:
            shown = row.value if type(row) is Row else row
            return tuple([erlang_order(get(shown)) for get in getters])
        rows = sorted(rows, key=key)
    return rows[::-1] if query.get("sort_reverse") == "true" else rows


def cut(rows: list, p: Pagination, counts_first: bool) -> dict | Answer:
    """The filtered page of the sorted `rows`, with RabbitMQ's counts around it."""
    matches = _matcher(p) if p.name and rows else None
    if isinstance(matches, Answer):
        return matches
    kept = rows if matches is None else [r for r in rows if matches(value(r).get("name"))]
    offset = (p.page - 1) * p.page_size
    if offset > len(kept):
        return Answer(400, {"error": "page_out_of_range", "reason": f"Page out of range, page: {p.page} "
                            f"page size: {p.page_size}, len: {len(kept)}"})
    items = kept[offset:offset + p.page_size]
    counts = {"total_count": len(rows), "item_count": len(items), "filtered_count": len(kept), "page": p.page,
              "page_size": p.page_size, "page_count": (len(kept) + p.page_size - 1) // p.page_size}
    if counts_first:
        return {**counts, "items": items}
    return dict(sorted({**counts, "items": items}.items()))


def pick(row: dict, columns: list[str]) -> dict:
    """The (dotted) `columns` of `row`, nested as in the row; a missing one is left out."""
    out: dict = {}
    for column in columns:
        parts = column.split(".")
        found: Any = row
        for part in parts:
            found = found.get(part) if isinstance(found, dict) else None
        if found is None and parts[0] not in row:
            continue
        target = out
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = found
    return out


def erlang_order(v: Any) -> tuple:
    """A key that orders JSON values as Erlang orders the terms RabbitMQ sorts: numbers, then
    atoms (true, false, null), maps (by size first), lists, and strings (binaries) last."""
    if type(v) is str:
        return (4, v)
    if isinstance(v, bool) or v is None:
        return (1, "undefined" if v is None else str(v).lower())
    if isinstance(v, (int, float)):
        return (0, v)
    if isinstance(v, dict):
        return (2, len(v), sorted((erlang_order(k), erlang_order(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return (3, [erlang_order(x) for x in v])
    return (4, str(v))


def _getter(field: str) -> Callable[[dict], Any]:
    """The value of a (dotted) field of a row; 0 if it is missing, as rabbit_mgmt_util sorts it."""
    if "." not in field:
        return lambda row: row.get(field, 0)
    parts = field.split(".")

    def get(row: dict) -> Any:
        found: Any = row
        for part in parts:
            if not isinstance(found, dict) or part not in found:
                return 0
            found = found[part]
        return found
    return get


def _matcher(p: Pagination) -> Callable[[Any], bool] | Answer:
    if p.use_regex:
        try:
            pattern = re.compile(p.name, re.IGNORECASE)
        except re.error:
            return INVALID
        return lambda name: isinstance(name, str) and pattern.search(name) is not None
    wanted = p.name.lower()
    return lambda name: isinstance(name, str) and wanted in name.lower()
