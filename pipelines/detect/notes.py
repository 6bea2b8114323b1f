"""The detect summary's lines on the fault and spike models: none yet, or a threshold that
fell back (what the user should know of the alerts, or of their absence)."""
from __future__ import annotations

from anomaly.fault_features import FaultPolicy
from anomaly.faults import FaultPredictor


def no_fault_model_note(telemetry_rows: int, failures: int) -> str:
    """Why no fault model scores the fleet: what it learns from, and how much the warehouse holds."""
    return (f"no fault model yet: it learns from device telemetry and failures (the warehouse holds {telemetry_rows:,} "
            f"telemetry row(s) and {failures:,} failure(s); a failure must fall a horizon inside the telemetry)")


def no_spike_model_note(price_rows: int, markets: int) -> str:
    """Why no spike model rates the markets: what it learns from, and how much the warehouse holds."""
    return (f"no spike model yet: it learns from spot-price history with both spikes and calm hours in it (the "
            f"warehouse holds {price_rows:,} spot-price row(s) in {markets:,} market(s))")


def fault_threshold_note(model: FaultPredictor | None, policy: FaultPolicy) -> str | None:
    """One line when an alert threshold fell back to the best F1 (target precision out of reach
    on its out-of-fold scores) or a predictor will not alert because no threshold beat chance,
    else None; for the devices the model was trained on and, apart, for devices new to it."""
    if model is None:
        return None
    newer = getattr(model, "new_devices_", None)
    if newer is None:
        return _threshold_note(model, policy)
    said = [whom + text for whom, text in (("for the devices trained on: ", _threshold_note(model, policy)),
                                           ("for devices new to the model: ", _threshold_note(newer, policy))) if text]
    return "; ".join(said) or None


def _threshold_note(model: FaultPredictor | None, policy: FaultPolicy) -> str | None:
    rule = getattr(model, "threshold_rule_", None)
    if model is None or rule not in ("max_f1_fallback", "no_skill"):
        return None
    m = getattr(model, "oof_metrics_", {})
    if rule == "no_skill":
        return (f"not alerting: out of fold, no threshold that catches a failure is right more often than alerts "
                f"at random times would be by luck (chance precision {m.get('chance_precision', float('nan')):.2f}): "
                f"the telemetry does not tell the failing devices apart yet")
    return (f"target precision {policy.target_precision} not reached out of fold; alerting at the best-F1 "
            f"threshold (out-of-fold precision {m.get('precision', float('nan')):.2f}, recall "
            f"{m.get('recall', float('nan')):.2f}) as warnings")
