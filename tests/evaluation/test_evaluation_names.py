"""Each kind of number is written one way wherever a user reads it (reid.evaluation.names)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from reid.evaluation.names import count, distance, far_percent, frame_rate, loss, percent, timestamp


def test_each_kind_of_number_has_its_fixed_form():
    assert percent(0.27914) == "27.91%" and percent(1.0) == "100.00%" and percent(float("nan")) == "nan"
    assert far_percent(0.0009973) == "0.0997%" and far_percent(0.0) == "0.0000%"
    assert distance(0.966822) == "0.9668" and distance(0.9667) == "0.9667" and distance(1) == "1.0000"
    assert count(3237) == "3,237" and count(12) == "12"
    assert loss(5.95341) == "5.9534"
    assert frame_rate(8.5) == "8.5 frames/s"
    assert percent("hand\x1bedited") == "hand\\x1bedited"


def test_a_distance_over_the_threshold_never_prints_at_or_under_it():
    threshold, value = 0.9667, 0.966822
    assert value > threshold and distance(value) > distance(threshold)


def test_every_date_is_iso_8601_utc_to_the_second():
    expected = "2026-12-06T12:04:43+00:00"
    assert timestamp("2026-12-06T12:04:43.123+00:00") == expected
    assert timestamp("2026-12-06T13:04:43+01:00") == expected
    assert timestamp(datetime(2026, 12, 6, 12, 4, 43)) == expected
    assert timestamp(datetime(2026, 12, 6, 7, 4, 43, tzinfo=timezone(timedelta(hours=-5)))) == expected
    assert timestamp(datetime(2026, 12, 6, 12, 4, 43, tzinfo=timezone.utc).timestamp()) == expected
    assert timestamp("not a date") == "not a date"
