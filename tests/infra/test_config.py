"""infra/config.py: the one reading of durations, as Exchange's TimeSpan reads them."""

from datetime import timedelta

import pytest

from infra.config import parse_duration


@pytest.mark.parametrize("text, expected", [
    ("23:59:59", timedelta(hours=23, minutes=59, seconds=59)), ("1.01:00:00", timedelta(hours=25)),
    ("00:00:59.5", timedelta(seconds=59.5)), ("10675199.00:00:00", timedelta(days=10675199)),
])
def test_exchange_notation_within_dotnet_ranges(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text, says", [
    # .NET's TimeSpan.Parse takes "25:00:00" for 25 days: read as 25 hours here, it was ambiguous
    ("25:00:00", "'25:00:00' (hours go from 0 to 23, as in Exchange's TimeSpan, which takes \"25:00:00\" for 25"
                 " days; as hours, write \"1.01:00:00\")"),
    ("24:00:00", "as hours, write \"1.00:00:00\""),
    ("00:61:00", "'00:61:00' (minutes go from 0 to 59, as in Exchange's TimeSpan; write \"01:01:00\")"),
    ("00:00:60", "'00:00:60' (seconds go from 0 to 59, as in Exchange's TimeSpan; write \"00:01:00\")"),
    ("00:00:75.5", "write \"00:01:15.5\""),
    ("1.25:00:00", "'1.25:00:00' (hours go from 0 to 23, as in Exchange's TimeSpan; write \"2.01:00:00\")"),
], ids=["25:00:00", "24:00:00", "00:61:00", "00:00:60", "00:00:75.5", "1.25:00:00"])
def test_fields_beyond_dotnet_ranges_are_refused_saying_how_to_write_them(text, says):
    with pytest.raises(ValueError) as refused:
        parse_duration(text)
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)
