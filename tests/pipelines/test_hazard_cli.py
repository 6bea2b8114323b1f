"""``headroom faults hazard`` end to end on tiny lifetime files."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pipelines.cli import main
from tests.anomaly.test_hazard import weibull_lives


def _contract(tmp_path: Path, n: int = 400) -> Path:
    lives = weibull_lives(n=n)
    f = pd.DataFrame({"device_id": lives["device_id"], "install": lives["install"].astype(str),
                      "remove": lives["remove"].astype(str), "failed": lives["failed"].astype(int),
                      "failure_type": lives["failure_type"]})
    f.loc[~lives["failed"] & (lives["remove"] == lives["remove"].max()), "remove"] = ""  # still in service
    f.to_csv(tmp_path / "lives.csv", index=False)
    return tmp_path / "lives.csv"


def test_hazard_for_a_fleet_file_json_and_bands_csv(tmp_path: Path, capsys):
    path = _contract(tmp_path)
    pd.DataFrame({"device_id": ["x", "y", "z"], "age_days": [100.0, 700.0, 1000.0]}).to_csv(tmp_path / "fleet.csv",
                                                                                          index=False)
    out = tmp_path / "bands.csv"
    rc = main(["faults", "hazard", "--lifetimes", str(path), "--fleet", str(tmp_path / "fleet.csv"),
               "--horizon", "90D", "--json", "--out", str(out)])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    by_mode = {f["mode"]: f for f in doc["forecast"]["by_mode"]}
    assert set(by_mode) == {"any", "DBE", "OTB"} and by_mode["any"]["devices"] == 3
    assert 0 < by_mode["any"]["expected"] < 3 and by_mode["any"]["lo"] <= by_mode["any"]["hi"] <= 3
    w = {r["mode"]: r for r in doc["weibull"]}
    assert 1.8 < w["any"]["shape"] < 3.5
    bands = pd.read_csv(out)
    assert list(bands.columns[:5]) == ["mode", "age_lo_days", "age_hi_days", "events", "device_years"]
    assert bands.loc[bands["mode"] == "any", "events"].sum() == doc["weibull"][0]["events"]


def test_hazard_text_for_the_devices_still_in_service(tmp_path: Path, capsys):
    path = _contract(tmp_path)
    with open(path, "a") as fh:  # a life that ends before it starts: a reject, not a failure of the run
        fh.write("bad1,2021-05-01,2021-04-01,0,\n")
    assert main(["faults", "hazard", "--lifetimes", str(path)]) == 0
    text = capsys.readouterr().out
    assert "1 removed before it was installed" in text
    assert "expected failures in the next 30D for the" in text and " devices in service at 2022-" in text


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys):
    path = _contract(tmp_path, n=50)
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace(lines[3].split(",")[1], "not-a-date")
    path.write_text("\n".join(lines) + "\n")
    assert main(["faults", "hazard", "--lifetimes", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "line 4, column 'install'" in err and "Traceback" not in err
    pd.DataFrame({"device_id": ["x"], "age_days": [-3]}).to_csv(tmp_path / "fleet.csv", index=False)
    assert main(["faults", "hazard", "--lifetimes", str(_contract(tmp_path, 50)), "--fleet",
                 str(tmp_path / "fleet.csv")]) == 2
    assert "line 2, column 'age_days'" in capsys.readouterr().err
    assert main(["faults", "hazard", "--lifetimes", str(tmp_path / "none.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["faults", "hazard", "--lifetimes", str(_contract(tmp_path, 50)), "--horizon", "500ns"]) == 2
    assert capsys.readouterr().err.strip().endswith("--horizon: '500ns' is under a second")


def test_faults_evaluate_prints_what_the_age_hazard_expects(tmp_path: Path, capsys):
    """--lifetimes with --devices: beside the scored failures and alerts, the count the fleet's
    age hazard expects of the scored devices over the scored span; without --devices, exit 2."""
    from tests.anomaly.synthetic import fleet_telemetry

    lives = _contract(tmp_path)
    tel, fails = fleet_telemetry()
    tel.to_csv(tmp_path / "t.csv", index=False)
    fails.to_csv(tmp_path / "f.csv", index=False)
    ids = sorted(tel["device_id"].unique())
    pd.DataFrame({"device_id": ids, "age_days": [2000.0] * len(ids)}).to_csv(tmp_path / "d.csv", index=False)
    argv = ["faults", "evaluate", "--telemetry", str(tmp_path / "t.csv"), "--failures", str(tmp_path / "f.csv"),
            "--lifetimes", str(lives)]
    assert main([*argv, "--devices", str(tmp_path / "d.csv")]) == 0
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("fleet hazard"))
    assert f"the {len(ids)} scored device(s)" in line and "observed 3, alerts" in line
    expected = float(line.split(" expect ")[1].split()[0])
    assert 0 < expected < len(ids)
    assert main(argv) == 2
    assert "--lifetimes needs --devices" in capsys.readouterr().err


@pytest.mark.slow
def test_faults_score_prints_what_the_age_hazard_expects(prefect_harness, db_path: Path, tmp_path: Path, capsys):
    """faults score --lifetimes --devices: after the run, the failures the fleet's age hazard
    expects over the next horizon beside the alerts fired; each file alone is exit 2, before any work."""
    from pipelines.store import warehouse
    from pipelines.synth.fleet import generate_fleet
    from tests.pipelines.test_detect_flow import load

    fleet = generate_fleet(nodes=4, days=10, seed=3)
    with warehouse.open_warehouse(db_path) as con:
        load(con, fleet)
    ids = sorted(fleet["telemetry"]["device_id"].unique())
    pd.DataFrame({"device_id": ids, "age_days": [2000.0] * len(ids)}).to_csv(tmp_path / "d.csv", index=False)
    score = ["faults", "score", "--db", str(db_path)]
    lives = ["--lifetimes", str(_contract(tmp_path))]
    devices = ["--devices", str(tmp_path / "d.csv")]
    assert main([*score, *lives]) == 2
    assert "--lifetimes needs --devices" in capsys.readouterr().err
    assert main([*score, *devices]) == 2
    assert "only serves --lifetimes" in capsys.readouterr().err
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT count(*) FROM models").fetchone()[0] == 0  # refused before any work
    assert main([*score, *lives, *devices]) == 0
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("fleet hazard"))
    assert f"the {len(ids)} device(s) of" in line and "in the next 24h" in line and "this run fired" in line
    expected = float(line.split(" expect ")[1].split()[0])
    assert 0 < expected < len(ids)


def test_one_failure_has_no_weibull_fit_and_the_forecast_says_so(tmp_path: Path, capsys):
    """With one failure age the Weibull likelihood grows without end as the shape does (it
    printed a shape of 2e20 and forecast a certain failure): no fit, and --model weibull
    forecasts that mode with the piecewise hazard, said."""
    (tmp_path / "l.csv").write_text("device_id,install,remove,failed\nd1,2024-01-01,2025-01-01,1\n"
                                    "d2,2024-01-01,,0\n")
    assert main(["faults", "hazard", "--lifetimes", str(tmp_path / "l.csv"), "--model", "weibull", "--json"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert doc["weibull"][0]["shape"] is None and doc["weibull"][0]["events"] == 1
    assert {f["model"] for f in doc["forecast"]["by_mode"]} == {"piecewise"}
    assert all(f["expected"] < 0.5 for f in doc["forecast"]["by_mode"])
    assert "no Weibull fit for any, failure" in out.err


def test_a_fleet_file_is_one_age_per_device_never_negative_and_not_a_folder(tmp_path: Path, capsys):
    """A device twice with different ages (which would win?) or a negative age is refused with
    its line; a folder given as the file says so; the band table shows the raw rate its
    interval is of beside the smoothed one."""
    path = _contract(tmp_path)
    fleet = tmp_path / "fleet.csv"
    for body, said in (("x1,100\nx1,200\n", "line 3: device (device_id=x1) appears twice with different values"),
                       ("x1,100\nx2,-4\n", "line 3, column 'age_days': negative age -4")):
        fleet.write_text("device_id,age_days\n" + body)
        assert main(["faults", "hazard", "--lifetimes", str(path), "--fleet", str(fleet)]) == 2
        assert said in capsys.readouterr().err
    fleet.write_text("device_id,age_days\nx1,100\nx1,100\n")  # an exact repeat is one device
    assert main(["faults", "hazard", "--lifetimes", str(path), "--fleet", str(fleet)]) == 0
    out = capsys.readouterr().out
    assert "the 1 devices of" in out and "afr_raw" in out and "nan%" not in out
    assert main(["faults", "hazard", "--lifetimes", str(tmp_path)]) == 2
    assert "a folder, not a file" in capsys.readouterr().err


def test_faults_evaluate_takes_one_threshold_rule(tmp_path: Path, capsys):
    """--cost-ratio with --target-precision dropped the precision target without a word."""
    with pytest.raises(SystemExit) as done:
        main(["faults", "evaluate", "--telemetry", "t.csv", "--failures", "f.csv", "--cost-ratio", "5",
              "--target-precision", "0.9"])
    assert done.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
