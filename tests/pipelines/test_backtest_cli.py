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
        (None, ["--models", "nope"], "unknown model"),
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
