"""Headers matching: bindings and messages as RabbitMQ 3.10 routed them (recorded from the oracle)."""
import pytest

from metadata.headers import HeadersPattern, validate_binding

BINDINGS = [{}, {"x-match": "any"}, {"a": 1}, {"a": 1, "b": "x"}, {"x-match": "any", "a": 1, "b": "x"}, {"a": None},
            {"x-match": "all", "x-a": 1}, {"x-match": "any", "x-a": 1}, {"x-match": "all-with-x", "x-a": 1},
            {"x-match": "any-with-x", "x-a": 1, "b": 2}, {"x-match": "all-with-x"}, {"a": True}, {"a": "1"}]
MESSAGES = [None, {}, {"a": 1}, {"a": 2}, {"a": 1, "b": "x"}, {"b": "x"}, {"x-a": 1}, {"x-a": 1, "a": 1},
            {"a": True}, {"a": "1"}, {"b": 2}, {"a": 2**40}]
# message index -> binding indexes that matched
ORACLE = {0: [0, 6, 10], 1: [0, 6, 10], 2: [0, 2, 4, 5, 6, 10], 3: [0, 5, 6, 10], 4: [0, 2, 3, 4, 5, 6, 10],
          5: [0, 4, 6, 10], 6: [0, 6, 8, 9, 10], 7: [0, 2, 4, 5, 6, 8, 9, 10], 8: [0, 5, 6, 10, 11],
          9: [0, 5, 6, 10, 12], 10: [0, 6, 9, 10], 11: [0, 5, 6, 10]}


@pytest.mark.parametrize("message_index", sorted(ORACLE))
def test_headers_match_as_rabbitmq(message_index):
    headers = MESSAGES[message_index]
    matched = [i for i, b in enumerate(BINDINGS) if HeadersPattern(b).matches(headers)]
    assert matched == ORACLE[message_index]


def test_numbers_compare_by_value():
    assert HeadersPattern({"a": 1}).matches({"a": 1.0})
    assert not HeadersPattern({"a": 1}).matches({"a": True})


@pytest.mark.parametrize("args, text", [
    ({"x-match": "bogus"}, 'PRECONDITION_FAILED - Invalid x-match field value <<"bogus">>; expected all, any, all-with-x, or any-with-x'),
    ({"x-match": 1}, "PRECONDITION_FAILED - Invalid x-match field type signedint (value 1); expected longstr"),
])
def test_invalid_x_match(args, text):
    assert validate_binding(args).text == text


def test_valid_x_match():
    for kind in ("all", "any", "all-with-x", "any-with-x"):
        assert validate_binding({"x-match": kind}) is None
    assert validate_binding(None) is None


def test_values_compare_as_erlangs_equality_over_the_typed_values():
    from decimal import Decimal

    from wire.field_types import Int8, Int64, Timestamp
    assert HeadersPattern({"a": 1}).matches({"a": Int8(1)})  # top level: the values only
    assert HeadersPattern({"a": 5}).matches({"a": Timestamp(5)})  # a timestamp is an integer
    assert not HeadersPattern({"a": [1]}).matches({"a": [Int64(1)]})  # in an array {signedint,1} /= {long,1}
    assert not HeadersPattern({"a": {"n": 1}}).matches({"a": {"n": Int8(1)}})
    assert HeadersPattern({"a": [1, "x"]}).matches({"a": [1, b"x"]})  # longstr, as text or octets
    assert not HeadersPattern({"a": Decimal("1.5")}).matches({"a": Decimal("1.50")})  # {1,15} /= {2,150}
    assert not HeadersPattern({"a": Decimal("1")}).matches({"a": 1})
