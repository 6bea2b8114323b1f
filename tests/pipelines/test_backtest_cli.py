"""``headroom backtest`` end to end on small files."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.cli import main
from tests.forecasters.conftest import make_panel


def test_backtest_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "series.csv"
    make_panel(length=24 * 10).to_csv(src, index=False)
    out = tmp_path / "m.csv"
    code = main(["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
                 "--models", "seasonal_naive,lgbm", "--windows", "2", "--out", str(out)])
    assert code == 0
    table = pd.read_csv(out)
    assert list(table.columns) == ["model", "smape", "mase", "wape", "coverage_80", "coverage_95", "seconds"]
    assert table["model"].tolist() == ["seasonal_naive", "lgbm"]
    assert ((table["smape"] >= 0) & (table["smape"] <= 200)).all()
    assert "seasonal_naive" in capsys.readouterr().out


def test_backtest_parquet_integer_steps(tmp_path: Path) -> None:
    src = tmp_path / "series.parquet"
    make_panel(length=24 * 10, freq=None).to_parquet(src)
    out = tmp_path / "m.csv"
    assert main(["backtest", "--input", str(src), "--horizon", "24", "--season-length", "24",
                 "--models", "seasonal_naive", "--out", str(out)]) == 0
    row = pd.read_csv(out).iloc[0]
    # the M4 setting: one window, the last H points; seasonal naive on a daily series
    assert np.isfinite(row["mase"]) and row["mase"] < 2


@pytest.mark.parametrize(
    ("frame", "args", "message"),
    [
        (pd.DataFrame({"unique_id": ["a"], "y": [1.0]}), [], "missing column"),
        (None, ["--models", "nope"], "--models: unknown model"),
        (None, ["--models", ""], "--models: no model named in ''"),
        (None, ["--models", "seasonal_naive,lgbm,seasonal_naive"], "--models: seasonal_naive named twice"),
        (None, ["--models", "lgbm", "--seed", "-1"], "--seed must be >= 0, got -1"),  # lgbm's traceback
        (None, ["--models", "lstm", "--seed", str(2**64)], r"--seed must be in 0..2147483647 \(the models' seeds\), got 1844"),
        (make_panel(length=20), [], "too short|at least"),
    ],
)
def test_backtest_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], frame, args, message) -> None:
    src = tmp_path / "series.csv"
    (make_panel(length=24 * 10) if frame is None else frame).to_csv(src, index=False)
    code = main(["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
                 "--models", "seasonal_naive", *args])
    assert code == 2
    import re
    assert re.search(message, capsys.readouterr().err)


def _panel_with(col: str, row: int, value: object) -> pd.DataFrame:
    frame = make_panel(length=24 * 10).astype({col: object})
    frame.loc[row, col] = value
    return frame


@pytest.mark.parametrize(
    ("frame", "freq", "message"),
    [
        (_panel_with("y", 40, "abc"), "h", "line 42, column y: 'abc' is not a number"),
        (_panel_with("y", 40, "1e400"), "h", "line 42, column y: '1e400' is not a finite number"),
        (make_panel(length=24 * 10, freq=None).assign(ds=lambda f: f["ds"] + 0.5), None,
         "line 2, column ds: 0.5 is not an integer step"),  # not numpy's np.float64(0.5)
        (_panel_with("ds", 7, None), "h", "line 9, column ds: empty"),
        (_panel_with("unique_id", 3, None), "h", "line 5, column unique_id: empty"),
        (_panel_with("ds", 5, "soon"), "h", "line 7, column ds: 'soon' is not a timestamp"),
        (make_panel(length=24 * 10, freq=None), "h", "integer steps, not timestamps; omit --freq"),
    ],
)
def test_backtest_bad_cells_name_line_and_column(tmp_path: Path, capsys, frame, freq, message) -> None:
    src = tmp_path / "series.parquet" if "integer steps, not" in message else tmp_path / "series.csv"
    frame.to_parquet(src) if src.suffix == ".parquet" else frame.to_csv(src, index=False)
    code = main(["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24",
                 *(["--freq", freq] if freq else []), "--models", "seasonal_naive"])
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_bad_cell_after_blank_lines_or_a_quoted_newline_names_its_line(tmp_path: Path, capsys) -> None:
    for body in ("a,1,1\n\n  \na,2,zz\n", 'a,1,1\n"a\nb",2,1\na,2,zz\n'):
        path = tmp_path / "s.csv"
        path.write_text("unique_id,ds,y\n" + body)
        assert main(["backtest", "--input", str(path), "--models", "seasonal_naive", "--horizon", "1",
                     "--season-length", "1"]) == 2
        assert "s.csv: line 5, column y: 'zz' is not a number" in capsys.readouterr().err


def test_backtest_timestamps_need_freq_and_step_must_be_positive(tmp_path: Path, capsys) -> None:
    src = tmp_path / "series.parquet"
    make_panel(length=24 * 10).to_parquet(src)  # datetime64 ds: not to be read as nanoseconds
    assert main(["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24",
                 "--models", "seasonal_naive"]) == 2
    assert "ds holds timestamps; pass --freq" in capsys.readouterr().err
    assert main(["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
                 "--models", "seasonal_naive", "--windows", "2", "--step", "0"]) == 2
    assert "--step must be >= 1" in capsys.readouterr().err


def test_python_dash_m_reports_errors_without_a_traceback(tmp_path: Path) -> None:
    """`python -m pipelines.cli` runs cli.py as __main__: its CliError must still be caught."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "backtest", "--input", str(tmp_path / "none.csv"),
                           "--horizon", "12", "--season-length", "24", "--models", "seasonal_naive"],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 2
    assert "no such file" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_default_models_too_long_for_the_data_are_left_out(tmp_path: Path, capsys, caplog) -> None:
    """8 days of hourly data: lstm needs more (191 points before a 24-hour window), so with
    the default model list it is left out (and said); named with --models it is an error, exit 2."""
    n = 24 * 8
    ds = pd.date_range("2026-01-01", periods=n, freq="h")
    y = 10 + 3 * np.sin(2 * np.pi * np.arange(n) / 24) + np.random.default_rng(0).normal(0, 0.3, n)
    pd.DataFrame({"unique_id": "a", "ds": ds, "y": y}).to_csv(tmp_path / "s.csv", index=False)
    base = ["backtest", "--input", str(tmp_path / "s.csv"), "--horizon", "24", "--season-length", "24",
            "--freq", "h", "--windows", "1", "--out", str(tmp_path / "m.csv")]
    with caplog.at_level("WARNING"):
        assert main(base) == 0
    ran = pd.read_csv(tmp_path / "m.csv")["model"].tolist()
    assert "lstm" not in ran and "seasonal_naive" in ran and "lstm left out" in caplog.text
    assert main([*base, "--models", "seasonal_naive,lstm"]) == 2
    assert "lstm" in capsys.readouterr().err


def test_series_names_are_read_as_written(tmp_path: Path) -> None:
    """'007', '7' and 'NA' are three series, not the number 7 twice and a missing name."""
    src = tmp_path / "ids.csv"
    base = make_panel(n_series=1, length=24 * 10)
    pd.concat([base.assign(unique_id=uid, y=base["y"] + k) for k, uid in enumerate(["007", "7", "NA"])]
              ).to_csv(src, index=False)
    from pipelines.commands.backtest import read_series

    assert sorted(read_series(src, "h")["unique_id"].unique()) == ["007", "7", "NA"]
    assert main(["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
                 "--models", "seasonal_naive"]) == 0


def test_an_out_path_that_cannot_be_written_is_said_before_the_work(tmp_path: Path, capsys) -> None:
    src = tmp_path / "series.csv"
    make_panel(length=24 * 10).to_csv(src, index=False)
    for out, said in ((tmp_path, "it is a folder"), (src / "m.csv", "is a file, not a folder")):
        code = main(["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
                     "--models", "seasonal_naive", "--out", str(out)])
        err = capsys.readouterr()
        assert code == 2 and said in err.err and "Traceback" not in err.err
        assert "seasonal_naive" not in err.out  # nothing was run


def test_the_points_a_short_series_needs_are_enough(tmp_path: Path, capsys) -> None:
    """The error's "need at least N" is the whole requirement: N points then run."""
    import re

    src = tmp_path / "series.csv"
    for name in ("seasonal_naive", "lgbm", "ets"):
        make_panel(n_series=1, length=20).to_csv(src, index=False)
        args = ["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
                "--models", name, "--windows", "2"]
        assert main(args) == 2
        need = int(re.search(r"need at least (\d+)", capsys.readouterr().err).group(1))
        make_panel(n_series=1, length=need).to_csv(src, index=False)
        assert main(args) == 0, name
        make_panel(n_series=1, length=need - 1).to_csv(src, index=False)
        assert main(args) == 2
        capsys.readouterr()


def test_backtest_fills_gaps_as_real_exports_have_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Hours missing (and one empty y) are filled from a day before and counted; a gap over a day
    names the series and the span, exit 2; --fill-gaps none keeps a gap an error."""
    panel = make_panel(length=24 * 10)
    gappy = panel.drop(index=panel.index[[50, 51, 52, 130]])
    gappy.loc[gappy.index[200], "y"] = np.nan
    src = tmp_path / "gappy.csv"
    gappy.to_csv(src, index=False)
    base = ["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
            "--models", "seasonal_naive,lgbm"]
    assert main(base) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "filled 5 missing point(s)" in out and "lgbm" in out
    assert main([*base, "--fill-gaps", "none"]) == 2
    assert "headroom backtest: error:" in capsys.readouterr().err
    uid = panel["unique_id"].iloc[0]
    long_gap = panel.drop(index=panel.index[(panel["unique_id"] == uid).to_numpy()][30:60])
    long_gap.to_csv(src, index=False)
    assert main(base) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"series '{uid}': 30 missing steps from" in err


def test_a_filled_point_is_not_scored_and_an_off_grid_row_is_not_dropped(tmp_path: Path, capsys) -> None:
    """Hours missing inside the test window are filled (the series stays whole) but their
    forecasts are not scored: seasonal naive's scores are the same whatever fills them. A row
    off the hourly grid is an error under filling too, not a row dropped without a word."""
    panel = make_panel(length=24 * 10)
    uid = panel["unique_id"].iloc[0]
    rows = np.flatnonzero((panel["unique_id"] == uid).to_numpy())
    src = tmp_path / "gappy.csv"
    panel.drop(index=panel.index[rows[-5:-2]]).to_csv(src, index=False)  # inside the last 12 hours
    tables = []
    for how in ("seasonal", "zero", "interpolate"):
        out = tmp_path / f"{how}.csv"
        assert main(["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
                     "--models", "seasonal_naive", "--fill-gaps", how, "--out", str(out)]) == 0
        assert "filled 3 missing point(s)" in capsys.readouterr().out
        tables.append(pd.read_csv(out).drop(columns="seconds"))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    pd.testing.assert_frame_equal(tables[0], tables[2])
    off = panel.astype({"ds": object})
    off.loc[rows[7], "ds"] = pd.Timestamp(panel.loc[rows[7], "ds"]) + pd.Timedelta(minutes=30)
    off.to_csv(src, index=False)
    assert main(["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
                 "--models", "seasonal_naive"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"series '{uid}': timestamp" in err and "off the series' 'h' grid" in err


def test_inf_a_folder_and_out_onto_input_are_one_line_errors(tmp_path: Path, capsys) -> None:
    src = tmp_path / "series.csv"
    _panel_with("y", 40, "inf").to_csv(src, index=False)
    base = ["backtest", "--horizon", "12", "--season-length", "24", "--freq", "h", "--models", "seasonal_naive"]
    assert main([*base, "--input", str(src)]) == 2
    assert "line 42, column y: inf is not a finite number" in capsys.readouterr().err
    assert main([*base, "--input", str(tmp_path)]) == 2
    assert "is a folder, not a file" in capsys.readouterr().err
    make_panel(length=24 * 10).to_csv(src, index=False)
    before = src.read_bytes()
    assert main([*base, "--input", str(src), "--out", str(tmp_path / "." / src.name)]) == 2
    assert "is the input --input" in capsys.readouterr().err
    assert src.read_bytes() == before


def test_a_series_a_model_cannot_fit_is_skipped_for_that_model(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """One series of 60 points, too short for lgbm with calibration: lgbm skips it (one line
    naming both) and still scores the others; the backtest goes on with every model."""
    panel = make_panel(length=24 * 10)
    uid = panel["unique_id"].iloc[0]
    short = panel[(panel["unique_id"] != uid) | (panel.groupby("unique_id").cumcount() >= 24 * 10 - 60)]
    src = tmp_path / "short.csv"
    short.to_csv(src, index=False)
    code = main(["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
                 "--models", "seasonal_naive,lgbm"])
    out = capsys.readouterr().out
    assert code == 0
    assert f"lgbm: series {uid} skipped" in out
    table = [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0] in ("seasonal_naive",
                                                                                                    "lgbm")]
    assert table == ["seasonal_naive", "lgbm"]


def test_a_file_that_is_not_utf8_or_not_comma_separated_says_so(tmp_path: Path, capsys) -> None:
    import bz2

    body = "unique_id,ds,y\na,1,1\ncaf\u00e9,2,1\n".encode("latin-1")
    latin, packed, old_mac = tmp_path / "latin.csv", tmp_path / "latin.csv.bz2", tmp_path / "cr.csv"
    latin.write_bytes(body)
    packed.write_bytes(bz2.compress(body))  # the line of the text, not of the compressed bytes
    old_mac.write_bytes(body.replace(b"\n", b"\r"))
    semi = tmp_path / "semi.csv"
    semi.write_text("unique_id;ds;y\na;1;1\n")
    for path, message in ((latin, "latin.csv: line 3: not UTF-8 text (byte 0xe9); save the file as UTF-8"),
                          (packed, "latin.csv.bz2: line 3: not UTF-8 text (byte 0xe9)"),
                          (old_mac, "cr.csv: line 3: not UTF-8 text (byte 0xe9)"),
                          (semi, "the file is separated by semicolons; headroom reads comma-separated CSV")):
        assert main(["backtest", "--input", str(path), "--horizon", "1", "--season-length", "1",
                     "--models", "seasonal_naive"]) == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize("fill", ["seasonal", "none"])
def test_placeholder_rows_at_a_series_ends_are_left_out_not_filled_and_scored(tmp_path: Path, capsys,
                                                                             caplog, fill: str) -> None:
    """An export ending in rows with no value: every test point was a filled one, and the
    scores of nothing gave a traceback. They are left out (said in a line); the series ends at
    its last reading, which the last window then tests. With ``--fill-gaps none`` too (it
    refused them as missing values)."""
    panel = make_panel(length=24 * 10)
    trailing = panel.copy()
    trailing.loc[trailing.groupby("unique_id").cumcount(ascending=False) < 12, "y"] = np.nan
    src = tmp_path / "trail.csv"
    trailing.to_csv(src, index=False)
    out = tmp_path / "t.csv"
    argv = ["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
            "--models", "seasonal_naive", "--fill-gaps", fill, "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    assert "12 row(s) with no value before its first reading or after its last left out" in caplog.text
    cut = panel[panel.groupby("unique_id").cumcount(ascending=False) >= 12]
    cut.to_csv(src, index=False)
    assert main([*argv[:-1], str(tmp_path / "cut.csv")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out).drop(columns="seconds"),
                                  pd.read_csv(tmp_path / "cut.csv").drop(columns="seconds"))


def test_when_no_series_is_long_enough_the_error_says_all_were_left_out(tmp_path: Path, capsys) -> None:
    panel = make_panel(length=24 * 10)
    src = tmp_path / "p.csv"
    panel.to_csv(src, index=False)
    assert main(["backtest", "--input", str(src), "--horizon", "24", "--season-length", "1000", "--freq", "h",
                 "--models", "seasonal_naive"]) == 2
    err = capsys.readouterr().err.strip()
    others = sorted(panel["unique_id"].unique())[:-1]
    assert len(err.splitlines()) == 1 and "were left out before it as unfit too" in err
    assert all(repr(u) in err for u in others[:5]), err


def test_day_first_dates_a_repeated_column_and_an_open_quote_are_named(tmp_path: Path, capsys) -> None:
    """dd/mm dates were read row by row (01/02 as January 2nd, 13/02 as February 13th) and
    reported as a month of missing steps the file does not have; a second y was ignored; an open
    quote was named by pandas' 0-based row."""
    panel = make_panel(length=24 * 30)
    one = panel[panel["unique_id"] == panel["unique_id"].iloc[0]].reset_index(drop=True)
    src = tmp_path / "in.csv"
    argv = ["backtest", "--input", str(src), "--horizon", "24", "--season-length", "24", "--freq", "h",
            "--models", "seasonal_naive"]
    one.assign(ds=pd.to_datetime(one["ds"]).dt.strftime("%d/%m/%Y %H:%M")).to_csv(src, index=False)
    assert main(argv) == 2
    first_13th = int(np.flatnonzero(pd.to_datetime(one["ds"]).dt.day.to_numpy() == 13)[0]) + 2  # + header, 1-based
    assert f"line {first_13th}, column ds: " in capsys.readouterr().err
    one.assign(ds=pd.to_datetime(one["ds"]).dt.strftime("%m/%d/%Y %H:%M")).to_csv(src, index=False)
    assert main(argv) == 0  # one consistent format, whichever: read
    capsys.readouterr()
    lines = one.to_csv(index=False).splitlines()
    src.write_text("\n".join([lines[0] + ",y"] + [x + ",1" for x in lines[1:]]) + "\n")
    assert main(argv) == 2 and "column y appears twice in the header" in capsys.readouterr().err
    lines[300] = '"' + lines[300]
    src.write_text("\n".join(lines) + "\n")
    assert main(argv) == 2 and ": line 301: unterminated quote" in capsys.readouterr().err


def test_a_row_repeated_as_it_was_is_read_once_and_two_values_are_named(tmp_path: Path, capsys, caplog) -> None:
    """An export that overlaps itself repeats rows: "series 't1': duplicate ds ...", exit 2, no
    line. Ingest reads such a repeat once; a time with two values names the second's line."""
    panel = make_panel(length=24 * 10)
    src = tmp_path / "p.csv"
    pd.concat([panel, panel.iloc[[5]]]).to_csv(src, index=False)
    argv = ["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
            "--models", "seasonal_naive"]
    assert main(argv) == 0, capsys.readouterr().err
    assert "1 repeated row(s) (the same series, time and y) read once" in caplog.text
    pd.concat([panel, panel.iloc[[5]].assign(y=panel["y"].iloc[5] + 1)]).to_csv(src, index=False)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"line {len(panel) + 2}: series" in err and "a second time" in err, err


@pytest.mark.parametrize("suffix", ["csv", "hours.csv", "parquet"])
def test_daily_rows_at_local_midnight_cross_a_dst_change(tmp_path: Path, suffix: str) -> None:
    # read as UTC, local midnight moved from 23:00 to 22:00 at the change: "off the 'D' grid";
    # hours.csv: offsets of hours alone, as PostgreSQL writes them (2024-03-31 00:00:00+01)
    days = pd.date_range("2024-02-01", "2024-05-15", freq="D", tz="Europe/Berlin")
    y = 100 + 20 * np.sin(2 * np.pi * np.arange(len(days)) / 7)
    src = tmp_path / f"daily.{suffix}"
    if suffix.endswith("csv"):
        ds = [d.isoformat()[:-3] if suffix == "hours.csv" else d.isoformat() for d in days]
        pd.DataFrame({"unique_id": "shop", "ds": ds, "y": y}).to_csv(src, index=False)
    else:
        pd.DataFrame({"unique_id": "shop", "ds": days, "y": y}).to_parquet(src)
    out = tmp_path / "m.csv"
    assert main(["backtest", "--input", str(src), "--horizon", "7", "--season-length", "7", "--freq", "D",
                 "--models", "seasonal_naive", "--out", str(out)]) == 0
    assert pd.read_csv(out)["wape"].iloc[0] == pytest.approx(0, abs=1e-6)  # a weekly cycle, met exactly


def test_basic_iso_dates_typed_y_and_one_series_blanks(tmp_path: Path, capsys) -> None:
    """20240101 (ISO 8601 basic) was refused as integer steps under --freq D; a Parquet y of
    timestamps scored as epoch nanoseconds; --fill-gaps none gave series a the file's blanks."""
    days = pd.date_range("2024-01-01", periods=120, freq="D")
    y = 10.0 + np.arange(120) % 7
    basic = tmp_path / "basic.csv"
    pd.DataFrame({"unique_id": "x", "ds": days.strftime("%Y%m%d"), "y": y}).to_csv(basic, index=False)
    out = tmp_path / "m.csv"
    assert main(["backtest", "--input", str(basic), "--horizon", "7", "--season-length", "7", "--freq", "D",
                 "--models", "seasonal_naive", "--out", str(out)]) == 0
    assert pd.read_csv(out)["wape"].iloc[0] == pytest.approx(0, abs=1e-6)
    capsys.readouterr()
    typed = tmp_path / "typed.parquet"
    pd.DataFrame({"unique_id": "x", "ds": days, "y": days}).to_parquet(typed)
    assert main(["backtest", "--input", str(typed), "--horizon", "7", "--season-length", "7", "--freq", "D",
                 "--models", "seasonal_naive"]) == 2
    assert "row 1, column y: '2024-01-01 00:00:00' is not a number (the column holds datetime64" in capsys.readouterr().err
    blanks = tmp_path / "blanks.csv"
    hours = pd.date_range("2024-01-01", periods=10, freq="h")
    pd.DataFrame({"unique_id": ["a"] * 10 + ["b"] * 10, "ds": list(hours) * 2,
                  "y": [0, 1, 2, None, 4, 5, 6, 7, 8, 9] + [0, 1, None, None, None, None, None, 7, 8, 9]}
                 ).to_csv(blanks, index=False)
    assert main(["backtest", "--input", str(blanks), "--horizon", "1", "--season-length", "1", "--freq", "h",
                 "--models", "seasonal_naive", "--fill-gaps", "none"]) == 2
    assert "series 'a': y has 1 missing or non-finite value(s), the first at 2024-01-01 03:00:00" in \
        capsys.readouterr().err
