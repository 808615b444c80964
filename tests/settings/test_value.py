"""The one parser of yes/no words and whole numbers that every reader of values shares."""

from __future__ import annotations

import pytest

from delayqueue.settings.value import (
    BOOLEAN_RULE,
    FALSE_WORDS,
    TRUE_WORDS,
    ValueProblem,
    parse_bool,
    parse_int,
    parse_number,
)


def test_the_words_are_camellias_and_the_rule_lists_them_yes_before_no():
    assert TRUE_WORDS == {"true", "1", "yes", "on"}
    assert FALSE_WORDS == {"false", "0", "no", "off"}
    assert BOOLEAN_RULE == "a boolean (true/false/1/0/yes/no/on/off)"


@pytest.mark.parametrize("raw,expected", [
    ("true", True), ("TRUE", True), ("Yes", True), (" on ", True), ("1", True), (1, True),
    (True, True), ("false", False), ("No", False), ("OFF", False), ("0", False), (0, False),
    (False, False),
])
def test_parse_bool_takes_the_words_in_any_case(raw, expected):
    assert parse_bool(raw) is expected


@pytest.mark.parametrize("raw", ["maybe", "2", 2, "y", "t", "", 1.0, None, ["1"]])
def test_parse_bool_refuses_anything_else_naming_the_rule_and_value(raw):
    with pytest.raises(ValueProblem) as caught:
        parse_bool(raw)
    assert str(caught.value) == f"must be true or false, got {raw!r}"
    assert not caught.value.out_of_range


@pytest.mark.parametrize("raw,expected", [
    (7, 7), (7.0, 7), ("5", 5), ("-5", -5), ("+5", 5), (" 12 ", 12), (-0.0, 0),
])
def test_parse_int_takes_ints_whole_floats_and_integer_text(raw, expected):
    assert parse_int(raw) == expected


@pytest.mark.parametrize("raw", [True, False, 1.5, "1.5", "1e3", "abc", "", None, [1],
                                 float("nan"), float("inf")])
def test_parse_int_refuses_what_is_not_an_integer(raw):
    with pytest.raises(ValueProblem) as caught:
        parse_int(raw, 0, 10)
    assert str(caught.value) == f"must be an integer between 0 and 10, got {raw!r}"
    assert not caught.value.out_of_range


@pytest.mark.parametrize("low,high,rule", [
    (None, None, "an integer"), (1, None, "an integer > 0"), (0, None, "an integer >= 0"),
    (32, None, "an integer >= 32"), (1, 65535, "an integer between 1 and 65535"),
])
def test_parse_int_says_its_bounds_in_the_rule(low, high, rule):
    with pytest.raises(ValueProblem, match=f"^must be {rule}, got 'x'$"):
        parse_int("x", low, high)


def test_parse_int_bounds_are_inclusive_and_past_them_is_out_of_range():
    assert parse_int("3", 3, 5) == 3 and parse_int(5, 3, 5) == 5
    for raw in (2, "6"):
        with pytest.raises(ValueProblem) as caught:
            parse_int(raw, 3, 5)
        assert caught.value.out_of_range and caught.value.raw == raw


def test_a_rule_given_replaces_the_generated_one():
    with pytest.raises(ValueProblem, match=r"^must be an hour \(0-23\), got 24$"):
        parse_int(24, 0, 23, rule="an hour (0-23)")
    with pytest.raises(ValueProblem, match=r"^must be a boolean \(true/false/"):
        parse_bool("perhaps", BOOLEAN_RULE)


@pytest.mark.parametrize("raw,expected", [(1, 1.0), ("2.5", 2.5), (" 1e3 ", 1000.0)])
def test_parse_number_takes_numbers_and_their_text(raw, expected):
    assert parse_number(raw, 1, 1000) == expected


@pytest.mark.parametrize("raw", [True, "x", None, "nan", float("inf"), "-inf"])
def test_parse_number_refuses_non_numbers_and_non_finite_ones(raw):
    with pytest.raises(ValueProblem) as caught:
        parse_number(raw, 1)
    assert str(caught.value) == f"must be a number >= 1, got {raw!r}"
    assert not caught.value.out_of_range


def test_parse_number_past_its_bounds_is_out_of_range():
    for raw in (0.5, 1000.5):
        with pytest.raises(ValueProblem, match="^must be a number from 1 to 1000") as caught:
            parse_number(raw, 1, 1000)
        assert caught.value.out_of_range
