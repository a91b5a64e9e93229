"""Message headers decoded only if routing needs them.

Most publishes go through exchanges that never look at headers, and decoding the content properties
costs more than routing them. The registry's headers matcher reads the mapping; only then are the
properties decoded, once.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from wire.properties import BasicProperties

PROPERTIES_OFFSET = 12  # class-id, weight, body-size precede the property flags in a content header


class LazyHeaders(Mapping):
    __slots__ = ("_header", "_decoded")

    def __init__(self, header: bytes) -> None:
        self._header = header
        self._decoded: dict[str, Any] | None = None

    def _headers(self) -> dict[str, Any]:
        if self._decoded is None:
            self._decoded = BasicProperties.decode(self._header, PROPERTIES_OFFSET).headers or {}
        return self._decoded

    def __getitem__(self, key: str) -> Any:
        return self._headers()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._headers())

    def __len__(self) -> int:
        return len(self._headers())
