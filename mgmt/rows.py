"""JSON rows encoded once, and the encoder of the API's answers that may hold them.

Theory of operation: a long listing (10,000 queues is ~14 MB of JSON) costs as much to encode as
to shape, so a row that is kept between requests (memo.py) keeps its JSON too: a `Row` is a shaped
value and its encoding. `encode(body)` writes an answer's body -- a plain JSON value, a Row, a
list of Rows (a listing), or a dict whose lists hold Rows (a page) -- with the separators
`json.dumps` uses, splicing each Row's bytes in as they are. Everything else is `json.dumps`'s.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Row:
    value: dict[str, Any]
    json: bytes

    @classmethod
    def of(cls, value: dict[str, Any]) -> Row:
        return cls(value, json.dumps(value).encode())


def value(row: Row | dict[str, Any]) -> dict[str, Any]:
    """A listing's row as a dict, whether it was kept encoded or not."""
    return row.value if type(row) is Row else row


def encode(body: Any) -> bytes:
    """The JSON of `body`, each Row's as it was encoded (the parts are joined once: a listing's
    bytes are copied once, not once per bracket)."""
    parts: list[bytes] = []
    _parts(body, parts)
    return b"".join(parts)


def _parts(body: Any, out: list[bytes]) -> None:
    if type(body) is Row:
        out.append(body.json)
    elif isinstance(body, list) and any(type(item) is Row for item in body):
        out.append(b"[")
        for item in body:
            if type(item) is Row:
                out.append(item.json)
            else:
                _parts(item, out)
            out.append(b", ")
        out[-1] = b"]"
    elif isinstance(body, dict) and any(isinstance(v, list) and v and type(v[0]) is Row for v in body.values()):
        out.append(b"{")
        for key, item in body.items():
            out.append(json.dumps(key).encode() + b": ")
            _parts(item, out)
            out.append(b", ")
        out[-1] = b"}"
    else:
        out.append(json.dumps(body).encode())
