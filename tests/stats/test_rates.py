"""Rates over the sample interval: exact values for known samples."""
from __future__ import annotations

from actors.stats.rates import Rates, with_details


def test_one_sample_has_zero_rates():
    r = Rates()
    r.observe(0, {"q": {"publish": 10}})
    assert r.rates("q") == {"publish": 0.0}


def test_counter_rate_is_the_change_per_second_between_the_last_two_samples():
    r = Rates()
    r.observe(0, {"q": {"publish": 10, "messages": 100}})
    r.observe(5000, {"q": {"publish": 60, "messages": 80}})
    assert r.rates("q") == {"publish": 10.0, "messages": -4.0}
    r.observe(10000, {"q": {"publish": 60, "messages": 80}})
    assert r.rates("q") == {"publish": 0.0, "messages": 0.0}


def test_objects_missing_from_a_sample_are_forgotten():
    r = Rates()
    r.observe(0, {"a": {"n": 1}, "b": {"n": 1}})
    r.observe(5000, {"a": {"n": 6}})
    assert r.rates("b") == {}
    r.observe(10000, {"a": {"n": 6}, "b": {"n": 100}})
    assert r.rates("b") == {"n": 0.0}  # b came back as a new object: one sample only
    assert r.rates("a") == {"n": 0.0}


def test_a_value_new_in_the_later_sample_counts_from_zero():
    r = Rates()
    r.observe(0, {"q": {}})
    r.observe(2000, {"q": {"ack": 4}})
    assert r.rates("q") == {"ack": 2.0}


def test_with_details_pairs_each_value_with_its_rate():
    assert with_details({"publish": 3, "ack": 1}, {"publish": 0.5}) == {
        "publish": 3, "publish_details": {"rate": 0.5}, "ack": 1, "ack_details": {"rate": 0.0}}


def test_frozen_rates_stay_those_of_their_sample():
    r = Rates()
    r.observe(0, {"q": {"publish": 10}})
    r.observe(5000, {"q": {"publish": 60}})
    frozen = r.frozen()
    r.observe(10000, {"q": {"publish": 60}})
    assert (frozen.rates("q"), r.rates("q")) == ({"publish": 10.0}, {"publish": 0.0})
