"""Hypothesis strategies for AMQP values, shared by the wire tests."""
from __future__ import annotations

from decimal import Decimal

from hypothesis import strategies as st

from wire import spec
from wire.codec import ByteArray, Timestamp
from wire.field_types import Float32, Int8, Int16, Int64, UInt8, UInt16, UInt32

# Any octets survive a shortstr: non-UTF-8 ones ride as surrogate escapes.
shortstr = st.binary(max_size=255).map(lambda b: b.decode("utf-8", "surrogateescape"))
table_key = st.text(max_size=40).filter(lambda s: len(s.encode()) <= 255)
invalid_utf8 = st.binary(min_size=1, max_size=20).filter(lambda b: not _is_utf8(b))


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


scalar_values = st.one_of(
    st.booleans(),
    st.integers(-2**63, 2**63 - 1),
    st.integers(-2**7, 2**7 - 1).map(Int8), st.integers(0, 2**8 - 1).map(UInt8),
    st.integers(-2**15, 2**15 - 1).map(Int16), st.integers(0, 2**16 - 1).map(UInt16),
    st.integers(0, 2**32 - 1).map(UInt32), st.integers(-2**63, 2**63 - 1).map(Int64),
    st.floats(allow_nan=False),
    st.floats(allow_nan=False, width=32).map(Float32),
    st.text(max_size=30),
    invalid_utf8,  # bytes that are valid UTF-8 decode as str, so only these stay bytes
    st.binary(max_size=20).map(ByteArray),
    st.none(),
    st.builds(lambda v, s: Decimal(v).scaleb(-s), st.integers(0, 2**32 - 1), st.integers(0, 9)),
    st.integers(0, 2**64 - 1).map(Timestamp),
)

field_values = st.recursive(
    scalar_values,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(table_key, inner, max_size=4)),
    max_leaves=12,
)
tables = st.dictionaries(table_key, field_values, max_size=6)

BY_TYPE = {
    spec.BIT: st.booleans(),
    spec.OCTET: st.integers(0, 255),
    spec.SHORT: st.integers(0, 2**16 - 1),
    spec.LONG: st.integers(0, 2**32 - 1),
    spec.LONGLONG: st.integers(0, 2**64 - 1),
    spec.TIMESTAMP: st.integers(0, 2**64 - 1),
    spec.SHORTSTR: shortstr,
    spec.LONGSTR: st.binary(max_size=300),
    spec.TABLE: tables,
}


def method_args(fields: tuple[spec.Field, ...]) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries({f.name: BY_TYPE[f.type] for f in fields})
