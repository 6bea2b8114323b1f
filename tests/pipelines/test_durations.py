"""One duration reader for options, settings and plan.toml: the same value, the same words."""
from __future__ import annotations

import pandas as pd
import pytest

from pipelines.runtime.durations import parse_duration
from pipelines.runtime.settings import Settings, SettingsError


@pytest.mark.parametrize("text, expected", [
    ("30m", pd.Timedelta(minutes=30)),  # m is minutes
    ("30min", pd.Timedelta(minutes=30)),
    (" 2h ", pd.Timedelta(hours=2)),
    ("7D", pd.Timedelta(days=7)),
    ("1.5h", pd.Timedelta(minutes=90)),
    ("1 day", pd.Timedelta(days=1)),
])
def test_reads_a_number_and_a_unit(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text, message", [
    ("5", "'5' has no unit (e.g. 30min, 2h, 7D)"),
    ("-2.5", "'-2.5' has no unit"),
    ("nan", "'nan' is not a duration"),
    ("NaT", "'NaT' is not a duration"),
    ("a week", "'a week' is not a duration"),
    ("1M", "'1M' is not a duration"),  # months are not a fixed span
    ("-1h", "'-1h' is not a positive duration"),
    ("0s", "'0s' is not a positive duration"),
    ("1000000D", "'1000000D' is longer than pandas can hold"),
    ("-1000000D", "'-1000000D' is not a positive duration"),  # not "longer"
])
def test_refusals_say_what_the_value_is_not(text, message):
    with pytest.raises(ValueError) as exc:
        parse_duration(text)
    assert str(exc.value).startswith(message)


def test_option_bound_and_zero():
    with pytest.raises(ValueError, match=r"^--lead: '2D' is longer than 1 day$"):
        parse_duration("2D", "--lead", most=pd.Timedelta(days=1))
    with pytest.raises(ValueError, match=r"^x: '1000000D' is longer than 366 days$"):
        parse_duration("1000000D", "x", most=pd.Timedelta(days=366))
    assert parse_duration("0h", "--confirm-for", zero=True) == pd.Timedelta(0)
    with pytest.raises(ValueError, match=r"^--cooldown: '-1h' is negative$"):
        parse_duration("-1h", "--cooldown", zero=True)


def test_a_setting_is_refused_in_the_same_words(monkeypatch):
    monkeypatch.setenv("HEADROOM_SPIKE_RETRAIN_EVERY", "7")
    with pytest.raises(SettingsError) as exc:
        Settings.from_env()
    assert str(exc.value) == "bad setting: HEADROOM_SPIKE_RETRAIN_EVERY='7': '7' has no unit (e.g. 30min, 2h, 7D)"
