"""One contract, every detector: estimator conventions the pipelines rely on."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import pytest
from sklearn.base import clone

from anomaly.base import NotFittedError
from anomaly.burst_baselines import PeltDetector, ThresholdDetector
from anomaly.cusum import CusumDetector, CusumPolicy
from anomaly.fault_features import FaultPolicy, build_fault_features
from anomaly.faults import FaultPredictor
from anomaly.spike_features import SpikePolicy, build_spike_frame
from anomaly.spikes import PersistenceSpikeBaseline, SpikePredictor

from .synthetic import fleet_telemetry, spot_prices, tidal_series


@dataclass
class Case:
    make: Callable[[], object]
    fit_args: Callable[[], tuple]
    predict_arg: Callable[[], pd.DataFrame]
    learned: str


def _bursts() -> tuple[pd.DataFrame, pd.DataFrame]:
    f = tidal_series(days=14, shift_at=24 * 12, shift=50.0)
    return f.iloc[: 24 * 10], f.iloc[24 * 10:]


def _faults() -> tuple[pd.DataFrame, pd.DataFrame]:
    tel, fails = fleet_telemetry(devices=4, days=10)
    feats = build_fault_features(tel, FAULT_POLICY)
    return feats, fails


def _spikes() -> pd.DataFrame:
    return build_spike_frame(spot_prices(days=30), SPIKE_POLICY)


FAULT_POLICY = FaultPolicy(n_estimators=20, min_child_samples=5, folds=2)
SPIKE_POLICY = SpikePolicy(n_estimators=20, min_child_samples=10)
BURST_POLICY = CusumPolicy(k=0.5, h=6.0)

CASES = {
    "cusum": Case(lambda: CusumDetector(BURST_POLICY), lambda: (_bursts()[0],), lambda: _bursts()[1], "states_"),
    "cusum_calibrated": Case(lambda: CusumDetector(CusumPolicy(k_grid=(1.0,))), lambda: (_bursts()[0],),
                             lambda: _bursts()[1], "states_"),
    "threshold_3sigma": Case(lambda: ThresholdDetector(), lambda: (_bursts()[0],), lambda: _bursts()[1], "states_"),
    "pelt": Case(lambda: PeltDetector(jump=5), lambda: (_bursts()[0],), lambda: _bursts()[1], "penalties_"),
    "fault_predictor": Case(lambda: FaultPredictor(FAULT_POLICY), _faults, lambda: _faults()[0], "model_"),
    "spike_predictor": Case(lambda: SpikePredictor(SPIKE_POLICY), lambda: (_spikes(),), _spikes, "model_"),
    "spike_persistence": Case(lambda: PersistenceSpikeBaseline(), lambda: (_spikes(),), _spikes, "threshold_"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_detector_contract(name: str) -> None:
    case = CASES[name]
    est = case.make()
    # parameters live in __init__ untouched, nothing is learned there
    params = est.get_params()
    assert not any(k.endswith("_") for k in vars(est))
    assert clone(est).get_params().keys() == params.keys()
    # predict before fit raises a clear error
    with pytest.raises(NotFittedError, match="fit"):
        est.predict(case.predict_arg())
    fit_args = case.fit_args()
    before = [a.copy(deep=True) for a in fit_args]
    assert est.fit(*fit_args) is est  # fit returns self
    for a, b in zip(fit_args, before):
        pd.testing.assert_frame_equal(a, b)  # the caller's frames are unchanged
    assert getattr(est, case.learned) is not None
    frame = case.predict_arg()
    frame_before = frame.copy(deep=True)
    first = est.predict(frame)
    pd.testing.assert_frame_equal(frame, frame_before)
    # fitting again replaces the state and predictions are deterministic
    est.fit(*case.fit_args())
    second = est.predict(frame)
    if isinstance(first, pd.DataFrame):
        pd.testing.assert_frame_equal(first, second)
    else:
        assert (first == second).all()


@pytest.mark.parametrize("span, text", [
    ("462428min", "321d 3h"),  # a model's age, once printed in minutes
    ("49h", "49h"), ("72h", "3d"), ("2h59min", "2h"), ("47min30s", "47min"), ("10s", "0min"),
])
def test_rough_duration_reads_as_an_age(span, text):
    from anomaly.base import rough_duration

    assert rough_duration(span) == text
