"""The planner's TOML policy file: defaults, overrides, and errors that name the key."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines import cli
from pipelines.plan.config import PlanConfigError, load_plan_policy, policy_from_mapping
from planner.plan import PlanPolicy

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "plan.toml"


def test_the_sample_file_is_the_defaults() -> None:
    assert load_plan_policy(SAMPLE) == PlanPolicy()
    assert load_plan_policy(None) == PlanPolicy()


def test_a_partial_file_overrides_only_what_it_names() -> None:
    policy = policy_from_mapping({
        "costs": {"public": {"network_amplification": 1.4}},
        "allocation": {"default_split": {"private": 0.5, "public": 0.5, "edge": 0.0}, "min_savings": 0.1},
        "prescale": {"shortage_cost": 19.0, "lead": "10min"},
    })
    base = PlanPolicy()
    assert policy.costs.public.network_amplification == 1.4
    assert policy.offers == base.offers
    assert policy.costs.public.storage_surcharge == base.costs.public.storage_surcharge
    assert policy.costs.private == base.costs.private
    assert (policy.default_split.private, policy.default_split.edge) == (0.5, 0.0)
    assert policy.allocation.min_savings == 0.1 and policy.allocation.step == base.allocation.step
    assert policy.prescale.shortage_cost == 19.0 and policy.prescale.stabilization == base.prescale.stabilization


def test_bounds_for_some_locations_keep_the_others() -> None:
    policy = policy_from_mapping({"allocation": {"bounds": {"private": [0.2, 0.6]}}})
    assert policy.allocation.bounds == {**PlanPolicy().allocation.bounds, "private": (0.2, 0.6)}


def test_the_policy_reaches_the_plan() -> None:
    from planner import make_plan
    from tests.planner.test_planner import catalog

    ds = pd.date_range("2026-01-01", periods=24 * 7, freq="h")
    history = pd.DataFrame({"unique_id": "c/cpu/cpu", "ds": ds, "y": 100 + 50 * np.sin(np.arange(len(ds)) / 4)})
    capacity = pd.DataFrame({"unique_id": ["c/cpu/cpu"], "capacity": [192.0], "units_per_node": [64.0]})
    forecast = history.iloc[0:0].assign(mean=[])
    policy = policy_from_mapping({"allocation": {"default_split": {"private": 0.6, "public": 0.4, "edge": 0.0}}})
    alloc = make_plan(history, forecast, capacity, catalog(), policy)["allocation"].set_index("plan")
    assert alloc.loc["default_3_5_2", ["private", "public", "edge"]].tolist() == [0.6, 0.4, 0.0]


@pytest.mark.parametrize("raw, message", [
    ({"costs": {"private": {"idle_penality": 0.2}}}, "costs.private.idle_penality: Extra inputs are not permitted"),
    ({"prescale": {"lead": "p99"}}, "prescale.lead: 'p99' is not a duration"),
    # a bare number would be nanoseconds; a lead past the forecasts' day; a span pandas cannot hold
    ({"prescale": {"lead": "5"}}, "prescale.lead: '5' has no unit (e.g. 30min, 2h, 7D)"),
    ({"prescale": {"lead": "100000D"}}, "prescale.lead: '100000D' is longer than 1 day"),
    ({"prescale": {"calibration": "1000000D"}}, "prescale.calibration: '1000000D' is longer than 366 days"),
    ({"prescale": {"refresh": "-1h"}}, "prescale.refresh: '-1h' is not a positive duration"),
    ({"offers": {"any_region": 1}}, "offers.any_region: Input should be a valid boolean"),
    ({"costs": {"edge": {"network_amplification": 0.5}}}, "costs.edge.network_amplification: Input should be greater"),
    ({"allocation": {"default_split": {"private": 0.5, "public": 0.6, "edge": 0.1}}},
     "allocation.default_split: split shares must be >= 0 and sum to 1"),
    ({"allocation": {"step": "small"}}, "allocation.step"),
    ({"costs": {"hours_per_month": 0}}, "costs.hours_per_month: Input should be greater than or equal to 1"),
    ({"costs": {"hours_per_month": 1e-300}}, "costs.hours_per_month: Input should be greater than or equal to 1"),
    # a grid of ~1/step^2 splits: 1e-9 never ended
    ({"allocation": {"step": 1e-9}}, "allocation.step: Input should be greater than or equal to 0.01"),
    ({"offers": {"regions": [" "]}}, "offers.regions.0: String should match pattern"),
    ({"reservations": {"terms": ["1y", "1y"]}}, "reservations.terms: a term is named twice"),
    ({"prescale": {"min_instances": 2**63 - 1}}, "prescale.min_instances: Input should be less than or equal to"),
    # finite but past any real value: costs would overflow to inf and NaN
    ({"costs": {"hours_per_month": 1e308}}, "costs.hours_per_month: Input should be less than or equal to 744"),
    ({"costs": {"private": {"idle_penalty": 1e308}}}, "costs.private.idle_penalty: Input should be less than"),
    ({"allocation": {"scenarios": [1e308]}}, "allocation.scenarios.0: Input should be less than or equal to 1000"),
    ({"allocation": {"bounds": {"edge": [0.4, 0.2]}}}, "allocation.bounds: edge: the lower"),
    ({"allocation": {"bounds": {"cloud": [0.1, 0.2]}}}, "allocation.bounds.cloud"),
    ({"allocation": {"min_savings": 2}}, "allocation.min_savings"),
    ({"reservations": {"terms": ["2y"]}}, "reservations.terms.0"),
    ({"allocation": {"bounds": {"private": [0.7, 0.7], "public": [0.7, 0.8]}}},
     "plan.toml: allocation.bounds: no split adds up to 1 (the lower bounds sum to 1.45"),
    ({"allocation": {"step": 0.07}}, "plan.toml: allocation.step must divide 1 into whole steps"),
    ({"allocation": {"step": 0.5}}, "allocation.step / allocation.bounds: no split on the grid of step 0.5"),
    ({"offers": {"min_memory_ratio": -1}}, "offers.min_memory_ratio: Input should be greater than or equal to 0"),
    ({"offers": {"regions": []}}, "offers.regions: Tuple should have at least 1 item"),
    ({"spot": {"interruptible_share": 1.5}}, "spot.interruptible_share: Input should be less than or equal to 1"),
    ({"spot": {"lookback": "a week"}}, "spot.lookback: 'a week' is not a duration"),
    ({"spot": {"max_spike_probability": 0}}, "spot.max_spike_probability: Input should be greater than 0"),
    # TOML has inf and nan; a string or a boolean is not a number either
    ({"costs": {"hours_per_month": float("inf")}}, "costs.hours_per_month: Input should be a finite number"),
    ({"costs": {"edge": {"storage_surcharge": float("nan")}}}, "costs.edge.storage_surcharge: Input should be a finite"),
    ({"costs": {"edge": {"storage_surcharge": True}}}, "costs.edge.storage_surcharge: Input should be a valid number"),
    ({"spot": {"min_discount": "0.5"}}, "spot.min_discount: Input should be a valid number"),
    ({"prescale": {"min_instances": True}}, "prescale.min_instances: Input should be a valid integer"),
])
def test_bad_settings_name_the_key(raw: dict, message: str) -> None:
    with pytest.raises(PlanConfigError, match=re.escape(message)):
        policy_from_mapping(raw, "plan.toml")


@pytest.mark.parametrize(("raw", "message"), [
    ({"offers": {"regions": [1]}}, "plan.toml: offers.regions.0: Input should be a valid string"),
    ({"allocation": {"scenarios": [0]}}, "plan.toml: allocation.scenarios.0: Input should be greater than 0"),
])
def test_a_bad_item_is_not_also_called_a_list_too_short(raw: dict, message: str) -> None:
    """pydantic adds "Tuple should have at least 1 item after validation, not 0" to a
    one-item list whose item failed: false of the list as written."""
    with pytest.raises(PlanConfigError) as err:
        policy_from_mapping(raw, "plan.toml")
    assert str(err.value) == message


def test_a_byte_order_mark_is_no_error(tmp_path: Path) -> None:
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf[spot]\ninterruptible_share = 0.3\n")
    assert load_plan_policy(bom).spot.interruptible_share == 0.3


def test_bad_files_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(PlanConfigError, match="no such plan config file"):
        load_plan_policy(tmp_path / "none.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[costs\nprivate = 1\n")
    with pytest.raises(PlanConfigError, match="not valid TOML"):
        load_plan_policy(broken)
    db = tmp_path / "w.duckdb"
    db.touch()
    assert cli.main(["plan", "--db", str(db), "--config", str(broken)]) == 2
    assert "broken.toml: not valid TOML" in capsys.readouterr().err
    (tmp_path / "bytes.toml").write_bytes(b"\xff\xfe[costs]\n")
    for given, said in ((tmp_path, "a folder, not a plan config file"), (tmp_path / "bytes.toml", "unreadable")):
        assert cli.main(["plan", "--db", str(db), "--config", str(given)]) == 2
        assert said in capsys.readouterr().err


def test_a_bad_configured_policy_stops_run_and_serve_first(tmp_path: Path, monkeypatch, capsys) -> None:
    broken = tmp_path / "plan.toml"
    broken.write_text("[prescale]\nlead = 'p99'\n")
    monkeypatch.setenv("HEADROOM_PLAN_CONFIG", str(broken))
    db = tmp_path / "w.duckdb"
    assert cli.main(["run", "--db", str(db), "--input", str(tmp_path)]) == 2
    assert "plan.toml: prescale.lead" in capsys.readouterr().err
    assert not db.exists()  # stopped before any work
    assert cli.main(["serve", "--list", "--db", str(db), "--input", str(tmp_path)]) == 2


def test_saving_text_says_which_way() -> None:
    from pipelines.plan.planning import saving_text

    assert saving_text(1234.4) == "saves $1,234/month vs the default split"
    assert saving_text(-50.0).startswith("costs $50/month more than the default split")


def test_offer_regions_reach_the_policy() -> None:
    policy = policy_from_mapping({"offers": {"regions": ["us-east-1", "us-central1"], "min_memory_ratio": 0.5}})
    assert policy.offers.regions == ("us-east-1", "us-central1") and policy.offers.min_memory_ratio == 0.5


def test_a_default_split_outside_the_bounds_is_said(caplog: pytest.LogCaptureFixture) -> None:
    raw = {"allocation": {"default_split": {"private": 0.9, "public": 0.05, "edge": 0.05}}}
    policy = policy_from_mapping(raw, "plan.toml")
    assert policy.default_split.private == 0.9  # allowed: the reference a re-tune must beat
    assert "plan.toml: allocation.default_split 9-0.5-0.5 is outside [allocation.bounds] for private, public" \
        in caplog.text
