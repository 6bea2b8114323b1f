"""How the benchmarks read the public data: M4's official test part (the same split as
holding out the training part's last 48 points; one-line errors for a file that does not
match), and every file of a kind in a folder read as one table."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks import m4
from benchmarks.public_files import pdm_telemetry, union_csv


def _write_wide(path: Path, series: dict[str, np.ndarray]) -> None:
    """An M4 wide CSV: V1 the id, V2.. the values, shorter series padded with empty cells."""
    width = max(len(y) for y in series.values())
    rows = [[u, *y, *([np.nan] * (width - len(y)))] for u, y in series.items()]
    pd.DataFrame(rows, columns=[f"V{i + 1}" for i in range(width + 1)]).to_csv(path, index=False)


@pytest.fixture
def m4_root(tmp_path: Path) -> tuple[Path, Path, Path]:
    rng = np.random.default_rng(0)
    full = {f"H{i}": 50 + 10 * np.sin(np.arange(n) * 2 * np.pi / 24) + rng.normal(0, 1, n)
            for i, n in ((1, 200), (2, 260), (3, 230))}
    whole = tmp_path / "whole"
    (whole / m4.FILE.parent).mkdir(parents=True)
    _write_wide(whole / m4.FILE, full)
    cut = tmp_path / "cut"
    (cut / m4.FILE.parent).mkdir(parents=True)
    _write_wide(cut / m4.FILE, {u: y[:-m4.H] for u, y in full.items()})
    test_file = tmp_path / "Hourly-test.csv"
    _write_wide(test_file, {u: y[-m4.H:] for u, y in full.items()})
    return whole, cut, test_file


def test_official_test_part_is_the_same_split_as_the_held_out_points(m4_root):
    whole, cut, test_file = m4_root
    train_a, test_a = m4.load(whole)
    train_b, test_b = m4.load(cut, test_file)
    pd.testing.assert_frame_equal(train_a, train_b)
    pd.testing.assert_frame_equal(test_a, test_b, check_exact=False, rtol=1e-12)
    assert len(test_b) == 3 * m4.H


def test_official_test_file_that_does_not_match_is_one_line_naming_the_series(m4_root, tmp_path):
    _, cut, _ = m4_root
    short = tmp_path / "short.csv"
    _write_wide(short, {"H1": np.ones(m4.H), "H2": np.ones(m4.H - 1), "H3": np.ones(m4.H)})
    with pytest.raises(ValueError, match=r"short\.csv: series H2 has 47 test values, not 48"):
        m4.load(cut, short)
    missing = tmp_path / "missing.csv"
    _write_wide(missing, {"H1": np.ones(m4.H), "H2": np.ones(m4.H)})
    with pytest.raises(ValueError, match=r"missing\.csv: series H3 of the training part has no row"):
        m4.load(cut, missing)
    extra = tmp_path / "extra.csv"
    _write_wide(extra, {u: np.ones(m4.H) for u in ("H1", "H2", "H3", "H9")})
    with pytest.raises(ValueError, match=r"extra\.csv: series H9 is not in the training part"):
        m4.load(cut, extra)
    twice = tmp_path / "twice.csv"
    _write_wide(twice, {"H1": np.ones(m4.H), "H2": np.ones(m4.H), "H3": np.ones(m4.H)})
    with twice.open("a") as f:
        f.write("H2," + ",".join(["2"] * m4.H) + "\n")
    with pytest.raises(ValueError, match=r"twice\.csv: series H2 has two rows"):
        m4.load(cut, twice)


def test_files_of_a_kind_are_read_as_one_table_a_repeated_row_once(tmp_path):
    # a larger slice copied beside the one here: its rows that the smaller one has too, with
    # the time written another way, are read once (the first file's by name)
    pd.DataFrame({"datetime": ["2015-01-01 06:00:00", "2015-01-01 07:00:00"], "machineID": [1, 1],
                  "volt": [170.0, 171.0]}).to_csv(tmp_path / "PdM_telemetry_a.csv", index=False)
    pd.DataFrame({"datetime": ["2015-01-01T07:00:00.000000", "2015-01-01T06:00:00.000000",
                               "2015-01-01T06:00:00.000000"], "machineID": [1, 2, 1],
                  "volt": [999.0, 160.0, 999.0]}).to_csv(tmp_path / "PdM_telemetry_b.csv.gz", index=False)
    pd.DataFrame({"datetime": ["2015-01-02T06:00:00.000000"], "machineID": [1],
                  "failure": ["comp1"]}).to_csv(tmp_path / "PdM_failures.csv", index=False)
    data, files = union_csv(tmp_path, "PdM_telemetry*.csv*", ["machineID"], "datetime")
    assert [f.name for f in files] == ["PdM_telemetry_a.csv", "PdM_telemetry_b.csv.gz"]
    assert sorted(zip(data["machineID"], data["volt"])) == [(1, 170.0), (1, 171.0), (2, 160.0)]
    assert str(data["datetime"].dt.tz) == "UTC"  # one type of time, whatever each file wrote
    # the union is written beside copies of the folder's other files (convert reads them there)
    path = pdm_telemetry(tmp_path, tmp_path / "tmp")
    union = pd.read_csv(path)
    assert sorted(union["datetime"]) == ["2015-01-01 06:00:00", "2015-01-01 06:00:00", "2015-01-01 07:00:00"]
    assert (path.parent / "PdM_failures.csv").read_text() == (tmp_path / "PdM_failures.csv").read_text()
    assert not (path.parent / "PdM_telemetry_a.csv").exists()
    with pytest.raises(FileNotFoundError, match="no file matches nothing"):
        union_csv(tmp_path, "nothing*", [], "datetime")


def test_pdm_drift_episodes_find_a_two_day_drift_and_nothing_in_noise():
    from benchmarks.pdm_signatures import episodes

    rng = np.random.default_rng(1)
    ts = pd.date_range("2015-01-01 06:00", periods=24 * 30, freq="h")
    frame = pd.DataFrame({"datetime": ts, "machineID": 1, **{s: rng.normal(100, 10, len(ts))
                                                             for s in ("volt", "rotate", "pressure", "vibration")}})
    drift = (ts >= "2015-01-10 06:00") & (ts < "2015-01-12 06:00")
    frame.loc[drift, "volt"] += 25  # 2.5 standard deviations for two days
    frame.loc[drift, "rotate"] += 25  # rotate drifts down before a failure: up is no episode
    found = episodes(frame, enter=0.9, peak=1.2, min_hours=12)
    assert list(found["sensor"]) == ["volt"]
    row = found.iloc[0]
    assert pd.Timestamp("2015-01-10 12:00") <= row["start"] <= pd.Timestamp("2015-01-11 06:00")
    assert pd.Timestamp("2015-01-12 06:00") <= row["end"] <= pd.Timestamp("2015-01-13 06:00")


@pytest.mark.parametrize("script", ["forecast_accuracy", "detection", "decisions", "spot", "forecast_speed"])
def test_an_unknown_suite_stops_a_benchmark_before_it_runs_anything(script: str, tmp_path: Path) -> None:
    """forecast_accuracy ran `m4` and then died on `bogus` with a traceback (the others refused)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / f"{script}.py"), "--suites", "m4,bogus",
                           "--datasets", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=root)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "bogus" in proc.stderr.strip().splitlines()[-1] and not proc.stdout.strip()
