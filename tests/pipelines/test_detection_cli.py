"""``headroom bursts|faults|spikes evaluate`` end to end on tiny files."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pipelines.cli import main
from tests.anomaly.synthetic import fleet_telemetry, spot_prices, tidal_series


def test_the_default_refit_period_runs_on_a_series_coarser_than_a_day(tmp_path: Path, capsys):
    """The check that refuses a refit period under the series' step refused the default (1D)
    on a 2-day series, which ran before; a period asked for below the step is still refused."""
    import numpy as np

    ds = pd.date_range("2020-01-01", periods=300, freq="2D")
    y = 50 + 10 * np.sin(np.arange(300) * 2 * np.pi / 7) + np.random.default_rng(1).normal(0, 1, 300)
    y[250:256] += 60
    pd.DataFrame({"unique_id": "a", "ds": ds, "y": y}).to_csv(tmp_path / "two_day.csv", index=False)
    (tmp_path / "w.json").write_text(json.dumps({"a": [[str(ds[249]), str(ds[257])]]}))
    base = ["bursts", "evaluate", "--input", str(tmp_path / "two_day.csv"), "--windows", str(tmp_path / "w.json"),
            "--season-length", "7", "--train-fraction", "0.5"]
    assert main(base) == 0
    assert main([*base, "--recalibrate-every", "12h"]) == 2
    assert "--recalibrate-every 12h is shorter than the series' step (2d)" in capsys.readouterr().err


def test_bursts_evaluate_writes_the_metrics_csv(tmp_path: Path, capsys):
    series = pd.concat([tidal_series("a", days=21, seed=1),
                        tidal_series("b", days=21, seed=2, shift_at=24 * 17, shift=50.0)])
    series.to_csv(tmp_path / "s.csv", index=False)
    start = pd.Timestamp("2026-01-05") + pd.Timedelta(hours=24 * 17)
    (tmp_path / "w.json").write_text(json.dumps({"b": [[str(start), str(start + pd.Timedelta(hours=12))]]}))
    out = tmp_path / "m.csv"
    rc = main(["bursts", "evaluate", "--input", str(tmp_path / "s.csv"), "--windows", str(tmp_path / "w.json"),
               "--season-length", "24", "--train-fraction", "0.5", "--target-arl", "30D", "--out", str(out)])
    assert rc == 0
    m = pd.read_csv(out).set_index("detector")
    assert list(m.reset_index().columns) == ["detector", "windows", "detected", "detection_rate", "false_alarms",
                                             "false_alarms_per_week", "median_delay_points", "p90_delay_points",
                                             "delay_from"]
    assert list(m.index) == ["cusum", "threshold_3sigma", "pelt"]
    assert m.loc["cusum", "detected"] == 1
    assert "cusum" in capsys.readouterr().out


@pytest.mark.parametrize("folds", [[], ["--threshold-folds", "device"]])
def test_faults_evaluate(tmp_path: Path, folds: list[str]):
    tel, fails = fleet_telemetry()
    tel.to_csv(tmp_path / "t.csv", index=False)
    fails.to_csv(tmp_path / "f.csv", index=False)
    out = tmp_path / "m.csv"
    rc = main(["faults", "evaluate", "--telemetry", str(tmp_path / "t.csv"), "--failures", str(tmp_path / "f.csv"),
               "--lead", "30m", "--horizon", "6h", *folds, "--out", str(out)])
    assert rc == 0
    m = pd.read_csv(out)
    assert list(m.columns) == ["events", "caught", "recall", "alerts", "precision", "median_lead_hours",
                               "false_alarms_per_device_week", "auc", "threshold", "threshold_rule"]
    assert len(m) == 1 and m.loc[0, "events"] == 3


def test_faults_evaluate_device_split(tmp_path: Path, capsys):
    """Every device held out once, by a model of the others: all six failures are scored."""
    tel, fails = fleet_telemetry()
    tel.to_csv(tmp_path / "t.csv", index=False)
    fails.to_csv(tmp_path / "f.csv", index=False)
    out = tmp_path / "m.csv"
    rc = main(["faults", "evaluate", "--telemetry", str(tmp_path / "t.csv"), "--failures", str(tmp_path / "f.csv"),
               "--lead", "30m", "--horizon", "6h", "--split", "device", "--device-folds", "3", "--out", str(out)])
    assert rc == 0
    m = pd.read_csv(out)
    assert m.loc[0, "events"] == len(fails) and m.loc[0, "caught"] >= 4
    err = capsys.readouterr().err
    assert err.count("settings of held-out") == 3


def test_more_device_folds_than_devices_is_said(tmp_path: Path, capsys):
    """20 folds of 10 machines ran as 10, silently; it is said, and each device is a fold."""
    tel, fails = fleet_telemetry(devices=3)
    tel.to_csv(tmp_path / "t.csv", index=False)
    fails.to_csv(tmp_path / "f.csv", index=False)
    rc = main(["faults", "evaluate", "--telemetry", str(tmp_path / "t.csv"), "--failures", str(tmp_path / "f.csv"),
               "--lead", "30m", "--horizon", "6h", "--split", "device", "--device-folds", "5"])
    assert rc == 0
    err = capsys.readouterr().err
    assert "note: --device-folds 5 is more than the 3 device(s) in" in err and err.count("settings of held-out") == 3


def test_spikes_evaluate(tmp_path: Path):
    spot_prices().to_csv(tmp_path / "p.csv", index=False)
    pd.DataFrame({"provider": ["aws"], "region": ["us-east-1"], "instance_type": ["g5.xlarge"],
                  "on_demand_price": [3.0]}).to_csv(tmp_path / "od.csv", index=False)
    out = tmp_path / "m.csv"
    rc = main(["spikes", "evaluate", "--prices", str(tmp_path / "p.csv"), "--on-demand", str(tmp_path / "od.csv"),
               "--horizon", "3h", "--k", "2", "--out", str(out)])
    assert rc == 0
    m = pd.read_csv(out)
    assert list(m.columns) == ["model", "auc", "base_rate", "threshold", "precision", "recall", "f1", "alerts",
                               "positives", "n", "threshold_rule"]
    assert list(m["model"]) == ["headroom", "persistence"]
    assert (m["precision"].isna() == m["alerts"].eq(0)).all()  # no alert: 0 of 0, not 0.0


def test_one_class_of_spike_labels_gets_the_advice_that_fits_it(tmp_path: Path, capsys):
    """A spike ahead of every hour (here: an on-demand price under every spot price) was told
    to try a lower --k or a longer --horizon, which only make it so more."""
    prices = spot_prices()
    prices.to_csv(tmp_path / "p.csv", index=False)
    pd.DataFrame({"provider": ["aws"], "region": ["us-east-1"], "instance_type": ["g5.xlarge"],
                  "on_demand_price": [1e-6]}).to_csv(tmp_path / "od.csv", index=False)
    argv = ["spikes", "evaluate", "--prices", str(tmp_path / "p.csv"), "--horizon", "3h"]
    assert main([*argv, "--on-demand", str(tmp_path / "od.csv")]) == 2
    err = capsys.readouterr().err
    assert "every training hour has a spike ahead" in err and "try a higher --k or a shorter --horizon" in err
    prices.assign(price=1.0).to_csv(tmp_path / "flat.csv", index=False)
    assert main(["spikes", "evaluate", "--prices", str(tmp_path / "flat.csv"), "--horizon", "3h"]) == 2
    err = capsys.readouterr().err
    assert "every training hour has no spike ahead" in err and "try a lower --k or a longer --horizon" in err


def test_a_model_that_raised_no_alert_shows_no_precision() -> None:
    from pipelines.commands.spikes import metric_lines

    rows = pd.DataFrame([{"model": "persistence", "auc": float("nan"), "base_rate": 0.1, "threshold": 2.0,
                          "precision": float("nan"), "recall": 0.0, "f1": 0.0, "alerts": 0, "positives": 3, "n": 30,
                          "threshold_rule": "target_precision"}])
    lines = metric_lines(rows, 0.8)
    assert "nan" not in " ".join(lines) and lines[-1] == "  precision is - where a model raised no alert (0 of 0)"


def test_spikes_evaluate_says_its_figures_in_text_or_json(tmp_path: Path, capsys):
    spot_prices().to_csv(tmp_path / "p.csv", index=False)
    argv = ["spikes", "evaluate", "--prices", str(tmp_path / "p.csv"), "--horizon", "3h", "--target-precision", "0.9"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "base rate" in text and "thresholds for precision 0.9 on the training span" in text
    assert "headroom" in text and "persistence" in text and "threshold rule" in text
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in rows] == ["headroom", "persistence"]
    assert {"auc", "base_rate", "threshold", "precision", "recall", "f1", "alerts", "threshold_rule"} <= set(rows[0])
    assert main([*argv[:-1], "1.5"]) == 2
    assert "--target-precision must be in (0, 1]" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["bursts", "evaluate", "--input", "{tmp}/missing.csv", "--windows", "{tmp}/w.json"],
    ["spikes", "evaluate", "--prices", "{tmp}/bad.csv"],
    ["faults", "evaluate", "--telemetry", "{tmp}/bad.csv", "--failures", "{tmp}/bad.csv"],
])
def test_unusable_input_exits_2_with_the_file_named(tmp_path: Path, capsys, argv: list[str]):
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    (tmp_path / "w.json").write_text("{}")
    rc = main([a.format(tmp=tmp_path) for a in argv])
    assert rc == 2
    err = capsys.readouterr().err
    assert "error" in err and str(tmp_path) in err


def test_detect_without_a_warehouse_exits_2(tmp_path: Path, capsys):
    rc = main(["detect", "--db", str(tmp_path / "none.duckdb")])
    assert rc == 2
    assert "no warehouse" in capsys.readouterr().err


def test_detect_rejects_unknown_detector(tmp_path: Path, capsys):
    rc = main(["detect", "--db", str(tmp_path / "none.duckdb"), "--detectors", "bursts,crystal-ball"])
    assert rc == 2
    assert "crystal-ball" in capsys.readouterr().err


def test_evaluate_inputs_that_cannot_mean_anything_are_refused(tmp_path: Path, capsys):
    """Windows that name no series, a window that ends before it starts, a non-numeric
    sensor value (file, line and column named), and thresholds out of range: exit 2."""
    tidal_series("a", days=8, seed=1).to_csv(tmp_path / "s.csv", index=False)
    (tmp_path / "w.json").write_text(json.dumps({"a.csv": [["2026-01-06", "2026-01-07"]]}))
    (tmp_path / "back.json").write_text(json.dumps({"a": [["2026-01-07", "2026-01-06"]]}))
    pdm = "datetime,machineID,volt,rotate\n2015-01-01 06:00:00,1,170.2,450\n2015-01-01 07:00:00,1,abc,451\n"
    (tmp_path / "pdm.csv").write_text(pdm)
    tel, fails = fleet_telemetry()
    tel.to_csv(tmp_path / "t.csv", index=False)
    fails.to_csv(tmp_path / "f.csv", index=False)
    cases = [
        (["bursts", "evaluate", "--input", f"{tmp_path}/s.csv", "--windows", f"{tmp_path}/w.json"],
         "no window key names a series"),
        (["bursts", "evaluate", "--input", f"{tmp_path}/s.csv", "--windows", f"{tmp_path}/back.json"],
         "ends before it starts"),
        (["faults", "evaluate", "--telemetry", f"{tmp_path}/pdm.csv", "--failures", f"{tmp_path}/f.csv"],
         "line 3, column 'volt': 'abc' is not a finite number"),
        (["faults", "evaluate", "--telemetry", f"{tmp_path}/t.csv", "--failures", f"{tmp_path}/f.csv",
          "--target-precision", "1.5"], "--target-precision must be in (0, 1]"),
        (["faults", "evaluate", "--telemetry", f"{tmp_path}/t.csv", "--failures", f"{tmp_path}/f.csv",
          "--cost-ratio", "0"], "--cost-ratio must be > 0"),
        # a bare number would be nanoseconds to pandas; NaN is no duration
        (["faults", "evaluate", "--telemetry", f"{tmp_path}/t.csv", "--failures", f"{tmp_path}/f.csv",
          "--lead", "30"], "--lead: '30' has no unit"),
        (["faults", "evaluate", "--telemetry", f"{tmp_path}/t.csv", "--failures", f"{tmp_path}/f.csv",
          "--horizon", "nan"], "--horizon: 'nan' is not a duration"),
        (["bursts", "evaluate", "--input", f"{tmp_path}/s.csv", "--windows", f"{tmp_path}/ok.json",
          "--target-arl", "30"], "--target-arl: '30' has no unit"),
        (["bursts", "evaluate", "--input", f"{tmp_path}/s.csv", "--windows", f"{tmp_path}/ok.json",
          "--recalibrate-every", "0s"], "--recalibrate-every: '0s' is not a positive duration"),
        # a refit per minute of an hourly series ran for hours, each refit alike
        (["bursts", "evaluate", "--input", f"{tmp_path}/s.csv", "--windows", f"{tmp_path}/ok.json",
          "--recalibrate-every", "1min"], "--recalibrate-every 1min is shorter than the series' step (1h)"),
        (["bursts", "evaluate", "--input", f"{tmp_path}/s.csv", "--windows", f"{tmp_path}/ok.json",
          "--clear-after", "1"], "--clear-after: '1' has no unit"),
        (["bursts", "evaluate", "--input", f"{tmp_path}/s.csv", "--windows", f"{tmp_path}/ok.json",
          "--confirm-for", "3"], "--confirm-for: '3' has no unit"),
        (["bursts", "evaluate", "--input", f"{tmp_path}/s.csv", "--windows", f"{tmp_path}/ints.json"],
         "1 is not a timestamp string"),
        (["bursts", "evaluate", "--input", f"{tmp_path}/dup.csv", "--windows", f"{tmp_path}/ok.json"],
         "line 4: series point (unique_id=a, ds=2026-01-01 01:00:00) appears twice with different values"),
        (["bursts", "evaluate", "--input", f"{tmp_path}/inf.csv", "--windows", f"{tmp_path}/ok.json"],
         "line 3, column 'y': 'inf' is not a finite number"),
        (["bursts", "evaluate", "--input", f"{tmp_path}/badts.csv", "--windows", f"{tmp_path}/ok.json"],
         "line 3, column 'ds': unparseable timestamp 'soon'"),
        (["bursts", "evaluate", "--input", f"{tmp_path}/empty.csv", "--windows", f"{tmp_path}/ok.json"],
         "empty.csv: no rows"),
        (["spikes", "evaluate", "--prices", f"{tmp_path}/prices.csv", "--test-fraction", "0"],
         "--test-fraction must be between 0 and 1"),
        (["spikes", "evaluate", "--prices", f"{tmp_path}/prices.csv", "--horizon", "90m"],
         "not a whole number of grid steps"),
        (["spikes", "evaluate", "--prices", f"{tmp_path}/prices.csv", "--k", "nan"], "k must be > 1"),
        (["spikes", "evaluate", "--prices", f"{tmp_path}/twice.csv"],
         "line 3: spot price (ts=2026-01-01 00:00:00, provider=aws, zone=z1a"),
        # a price history no longer than the horizon: no training hour has a label yet
        (["spikes", "evaluate", "--prices", f"{tmp_path}/prices.csv", "--horizon", "6h"],
         "no training hour has a known label"),
        (["faults", "evaluate", "--telemetry", f"{tmp_path}/t.csv", "--failures", f"{tmp_path}/f.csv",
          "--test-devices", "2"], "--test-devices is the share of devices held out, in (0, 1); got 2"),
        (["faults", "evaluate", "--telemetry", f"{tmp_path}/t.csv", "--failures", f"{tmp_path}/f.csv",
          "--test-devices=-0.5"], "in (0, 1); got -0.5"),
        (["bursts", "evaluate", "--input", f"{tmp_path}/s.csv", "--windows", f"{tmp_path}/twice.json"],
         "'a' is given twice with different values"),
    ]
    (tmp_path / "twice.json").write_text('{"a": [["2026-01-06", "2026-01-07"]], "a": []}')
    (tmp_path / "ok.json").write_text(json.dumps({"a": [["2026-01-06", "2026-01-07"]]}))
    (tmp_path / "ints.json").write_text(json.dumps({"a": [[1, 2]]}))
    (tmp_path / "dup.csv").write_text("unique_id,ds,y\na,2026-01-01 00:00,1\na,2026-01-01 01:00,2\n"
                                      "a,2026-01-01 01:00,3\na,2026-01-01 00:00,1\n")
    (tmp_path / "inf.csv").write_text("unique_id,ds,y\na,2026-01-01 00:00,1\na,2026-01-01 01:00,inf\n")
    (tmp_path / "badts.csv").write_text("unique_id,ds,y\na,2026-01-01 00:00,1\na,soon,2\n")
    (tmp_path / "empty.csv").write_text("unique_id,ds,y\n")
    head = "ts,provider,region,zone,instance_type,product,price\n"
    (tmp_path / "prices.csv").write_text(head + "2026-01-01 00:00,aws,r1,z1a,m5,Linux,0.1\n")
    (tmp_path / "twice.csv").write_text(head + "2026-01-01 00:00,aws,r1,z1a,m5,Linux,0.1\n"
                                        "2026-01-01 00:00,aws,r1,z1a,m5,Linux,0.2\n")
    for argv, message in cases:
        assert main(argv) == 2, argv
        assert message in capsys.readouterr().err, argv


def test_a_time_without_offset_is_utc_whatever_rows_before_it_hold(tmp_path: Path, caplog):
    """As ingest reads them: pandas' ISO8601 parse gave a plain time the offset of an earlier
    row (02:00 read as 00:00, and a false duplicate). Zone names are read too; an empty value
    is left out and said."""
    from pipelines.ingest.tables import read_telemetry

    (tmp_path / "t.csv").write_text("ts,device_id,node_id,metric,value\n"
                                    "2026-01-05T02:00:00+02:00,d0,n0,gpu_temp,40\n"
                                    "2026-01-05T02:00:00,d0,n0,gpu_temp,41\n"
                                    "2026-01-05 04:00:00 CET,d0,n0,gpu_temp,42\n"
                                    "2026-01-05T05:00:00Z,d0,n0,gpu_temp,\n")
    got = read_telemetry(tmp_path / "t.csv")
    assert got["ts"].astype(str).tolist() == ["2026-01-05 00:00:00", "2026-01-05 02:00:00", "2026-01-05 03:00:00"]
    assert got["value"].tolist() == [40.0, 41.0, 42.0]
    assert "1 reading(s) with an empty value (or 'nan') left out, such as line 5" in caplog.text


def test_window_bounds_with_an_offset_are_read_as_utc(tmp_path: Path):
    """NAB windows are naive; the same instants written with an offset or Z mean the same."""
    from pipelines.ingest.tables import read_windows

    (tmp_path / "naive.json").write_text(json.dumps({"a": [["2026-01-06 13:00", "2026-01-07 01:00"]]}))
    (tmp_path / "tz.json").write_text(json.dumps({"a": [["2026-01-06T15:00:00+02:00", "2026-01-07T01:00:00Z"]]}))
    assert read_windows(tmp_path / "tz.json") == read_windows(tmp_path / "naive.json")


@pytest.mark.parametrize(("price", "said"), [
    ("abc", "line 3, column 'on_demand_price': 'abc' is not a finite number"),
    ("-5", "line 3, column 'on_demand_price': -5.0 is not a positive price"),
    ("dup", "line 3: on-demand price (provider=aws, region=us-east-1, instance_type=g5.xlarge) appears twice"),
])
def test_a_bad_on_demand_price_is_refused_with_its_line(tmp_path: Path, capsys, price: str, said: str):
    spot_prices().to_csv(tmp_path / "p.csv", index=False)
    rows = ["provider,region,instance_type,on_demand_price", "aws,us-east-1,g5.xlarge,3.0",
            f"aws,us-east-1,{'g5.xlarge,50.0' if price == 'dup' else 'p5.48xlarge,' + price}"]
    (tmp_path / "od.csv").write_text("\n".join(rows) + "\n")
    rc = main(["spikes", "evaluate", "--prices", str(tmp_path / "p.csv"), "--on-demand", str(tmp_path / "od.csv")])
    assert rc == 2
    assert said in capsys.readouterr().err


def test_spot_markets_without_an_on_demand_price_are_named(tmp_path: Path, capsys):
    spot_prices().to_csv(tmp_path / "p.csv", index=False)
    (tmp_path / "od.csv").write_text("provider,region,instance_type,on_demand_price\naws,us-east-1,m5.large,0.1\n")
    assert main(["spikes", "evaluate", "--prices", str(tmp_path / "p.csv"), "--on-demand",
                 str(tmp_path / "od.csv"), "--horizon", "3h"]) == 0
    assert "no on-demand price for 1 of 1 spot market(s) (aws/us-east-1/g5.xlarge)" in capsys.readouterr().err


@pytest.mark.parametrize(("windows", "said"), [
    ({"a": ["2026-01-20"]}, "expected [start, end] pairs, got '2026-01-20'"),
    ({"a": [["now", "today"]]}, "'now' is not a timestamp string"),
])
def test_window_lists_that_are_not_date_pairs_are_refused(tmp_path: Path, capsys, windows, said):
    tidal_series("a", days=21, seed=1).to_csv(tmp_path / "s.csv", index=False)
    (tmp_path / "w.json").write_text(json.dumps(windows))
    assert main(["bursts", "evaluate", "--input", str(tmp_path / "s.csv"), "--windows", str(tmp_path / "w.json")]) == 2
    assert said in capsys.readouterr().err


def test_a_window_in_the_calibration_share_is_said_and_fractions_name_their_option(tmp_path: Path, capsys, caplog):
    tidal_series("a", days=21, seed=1).to_csv(tmp_path / "s.csv", index=False)
    start = pd.Timestamp("2026-01-05") + pd.Timedelta(days=1)
    (tmp_path / "w.json").write_text(json.dumps({"a": [[str(start), str(start + pd.Timedelta(hours=6))]]}))
    args = ["bursts", "evaluate", "--input", str(tmp_path / "s.csv"), "--windows", str(tmp_path / "w.json")]
    assert main(args) == 0
    assert "1 window(s) lie in the first --train-fraction 0.15 of their series" in caplog.text
    assert main([*args, "--train-fraction", "1.5"]) == 2
    assert "--train-fraction must be between 0 and 1" in capsys.readouterr().err
    tel, fails = fleet_telemetry()
    tel.to_csv(tmp_path / "t.csv", index=False)
    fails.to_csv(tmp_path / "f.csv", index=False)
    assert main(["faults", "evaluate", "--telemetry", str(tmp_path / "t.csv"), "--failures", str(tmp_path / "f.csv"),
                 "--test-fraction", "0"]) == 2
    assert main(["faults", "evaluate", "--telemetry", str(tmp_path / "t.csv"), "--failures", str(tmp_path / "f.csv"),
                 "--lead", "24h", "--horizon", "1h"]) == 2
    err = capsys.readouterr().err
    assert "--test-fraction must be between 0 and 1" in err and "horizon (1h) must be longer than lead (1d)" in err


def test_a_series_too_short_to_calibrate_is_left_out_of_every_detector_and_named(tmp_path: Path, caplog):
    """One short series among long ones: the evaluation scores the others (its window is
    not counted for any detector) and says which series was left out and why; when every
    series is too short, exit 2 with the reason."""
    start = pd.Timestamp("2026-01-05") + pd.Timedelta(hours=24 * 17)
    series = pd.concat([tidal_series("long", days=21, seed=1, shift_at=24 * 17, shift=50.0),
                        tidal_series("short", days=2, seed=2)])
    series.to_csv(tmp_path / "s.csv", index=False)
    win = [[str(start), str(start + pd.Timedelta(hours=12))]]
    (tmp_path / "w.json").write_text(json.dumps({"long": win, "short": [["2026-01-06", "2026-01-06 06:00"]]}))
    out = tmp_path / "m.csv"
    args = ["bursts", "evaluate", "--input", str(tmp_path / "s.csv"), "--windows", str(tmp_path / "w.json"),
            "--train-fraction", "0.5", "--target-arl", "30D"]
    assert main([*args, "--out", str(out)]) == 0
    m = pd.read_csv(out).set_index("detector")
    assert (m["windows"] == 1).all() and m.loc["cusum", "detected"] == 1
    assert "1 series cannot be calibrated" in caplog.text and "'short'" in caplog.text
    series[series["unique_id"] == "short"].to_csv(tmp_path / "s.csv", index=False)
    assert main(args) == 2


def test_an_evaluated_row_dated_a_century_ahead_names_its_line(tmp_path: Path, capsys):
    """One price (or reading) typed as 2126: the test span became 262,967 market-hours of
    nothing, 2 min 40 s and 1.5 GB, exit 0 with "use a larger --test-fraction"."""
    prices = spot_prices()
    stray = prices.iloc[[0]].assign(ts="2126-01-01T00:30:00Z")
    pd.concat([prices, stray]).to_csv(tmp_path / "p.csv", index=False)
    tel, fails = fleet_telemetry()
    pd.concat([tel, tel.iloc[[0]].assign(ts="2126-01-01 00:30")]).to_csv(tmp_path / "t.csv", index=False)
    fails.to_csv(tmp_path / "f.csv", index=False)
    for argv, line in ((["spikes", "evaluate", "--prices", str(tmp_path / "p.csv")], len(prices) + 2),
                       (["faults", "evaluate", "--telemetry", str(tmp_path / "t.csv"), "--failures",
                         str(tmp_path / "f.csv")], len(tel) + 2)):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"line {line}, column 'ts': 2126-01-01 00:30 stands" in err, err
    # a reading a year too early, on the first data row: named too (it stretched the split as
    # far, and the evaluation failed with "nothing to learn", naming no row)
    early = tel.assign(ts=tel["ts"].astype(str))
    early.loc[early.index[0], "ts"] = "2025-01-01 00:30"
    early.to_csv(tmp_path / "t_early.csv", index=False)
    assert main(["faults", "evaluate", "--telemetry", str(tmp_path / "t_early.csv"), "--failures",
                 str(tmp_path / "f.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "line 2, column 'ts': 2025-01-01 00:30 stands" in err, err
    assert "days before every other time" in err
