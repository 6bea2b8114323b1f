"""The report's fixed prose: the glossary of its terms and what the pre-scale schedule sizes.

Kept apart from :mod:`pipelines.report.html` (the rendering) so the words can be read and
edited in one place.
"""
from __future__ import annotations

# the glossary: (anchor, term, the table columns it explains, one plain line: what it is, what good is)
GLOSSARY = (
    ("wape", "WAPE", ("wape",), "weighted absolute percentage error: the forecast's absolute errors over the "
     "actual demand, both summed over the backtest (0.10: off by 10% of the demand). Lower is better, 0 is perfect."),
    ("mase", "MASE", ("mase",), "mean absolute scaled error: the forecast's mean absolute error over that of the "
     "seasonal naive forecast (the same hour one day earlier) within the history it was fit on. Lower is better; "
     "below 1 does not by itself mean beating that baseline out of sample (seasonal naive itself scores near 1): "
     "compare models' MASE with each other."),
    ("smape", "sMAPE", ("smape",), "symmetric mean absolute percentage error, in percent (0 to 200): each hour's "
     "error over the mean of actual and forecast. Lower is better; it swings where demand is near 0, so WAPE is "
     "the steadier guide."),
    ("coverage", "coverage", ("coverage_80", "coverage_95"), "the share of backtest hours whose actual demand fell "
     "inside the forecast's 80% (95%) band. Good is close to 0.80 (0.95): well below, the bands are too narrow "
     "and pre-scaling is caught short; well above, they are too wide and it over-provisions."),
    ("msis", "MSIS", ("msis",), "mean scaled interval score of the 95% band: its width plus a penalty for each "
     "actual outside it, scaled like MASE. Lower is better; compare it between models on the same data."),
    ("band", "80% / 95% band", (), "the range the forecast expects demand to fall in, 80% (95%) of the hours."),
    ("upper", "forecast_upper, reactive_margin", ("forecast_upper", "reactive_margin"), "the capacity pre-scaling "
     "plans for at that hour: the forecast mean plus reactive_margin, the quantile of how far demand recently ran "
     "above the scaler's own short-term prediction. Live, the rule re-runs at every refresh on the latest "
     "readings, so the margin covers the error over its lead time, not over the day: it can sit below the 80% "
     "band. The schedule is what the rule would do if demand followed the forecast."),
    ("backtest", "backtest", ("windows", "all_models_wape"), "the models forecast the last windows of history as if "
     "they had not seen them, and are scored on what happened; the champion is the model with the lowest WAPE. "
     "windows: how many (each one horizon long); all_models_wape: every model's WAPE on the same windows, lowest "
     "first: a champion that wins by a hair over few windows could as well be the next one."),
    ("split", "split (3-5-2)", ("private", "public", "edge"), "the share of the month's demand (unit-hours) run "
     "in the private cloud, on public on-demand and at the edge; 3-5-2 is the default 30/50/20. Private and edge "
     "machines carry the bottom of the demand curve, public the peaks (with fill = proportional, each location "
     "takes its share of every hour)."),
    ("carried", "carried_private, carried_public, carried_edge", ("carried_private", "carried_public",
     "carried_edge"), "the share of the demand's unit-hours each location really serves: machines come whole, so "
     "one private machine bigger than its share's layer carries more than the share, and public less."),
    ("retuned", "retuned, tuned_this_run", ("retuned", "tuned_this_run"), "retuned: the split is not the default "
     "(the tuner moved it); tuned_this_run: this plan run chose the split (the month's first run, or plan "
     "--retune), otherwise this month's earlier choice was kept and only re-priced."),
    ("savings", "savings_vs_default, expected_savings", ("savings_vs_default", "expected_savings"), "what the plan "
     "(a split, or the running fleet) saves per month against the default split, on the demand path (the "
     "lookback's history and the forecast after it), and averaged over the demand scenarios (what the choice "
     "rests on). Higher is better; below 0 it costs more than the default."),
    ("idle", "idle penalty", ("idle_penalty",), "the charge for capacity bought but not used, per idle unit-hour "
     "as a share of its price (power, cooling, what it could have run). Lower is better."),
    ("spill", "spill_units", ("spill_units",), "unit-hours per month run on public on-demand instead of their "
     "location: a share whose location has no offer (and, with fill = proportional, what private and edge "
     "capacity could not carry)."),
    ("fleet", "current_fleet_cost", ("current_fleet_cost",), "the same demand on the capacity running now, "
     "priced as the pool's private machines (any excess on public on-demand): what to compare a bill with."),
    ("reserve", "coverage_quantile, expected_utilization, break_even", ("coverage_quantile", "expected_utilization",
     "break_even_utilization", "break_even_months"),
     "a reservation covers this quantile of the hourly public instance count (1 - reserved/on-demand price), "
     "and its instances run this share of their hours; it is recommended only above its break-even "
     "utilization (reserved/on-demand price). break_even_months: months of the on-demand spend it replaces "
     "that pay for its whole term."),
    ("recommended", "recommended, reason", ("recommended", "reason"), "the cheapest of the running fleet, the "
     "default split and the tuned split on the same demand is recommended; the others say what they cost more, "
     "and why a split cannot beat the running fleet (the allocation bounds, a location without an offer)."),
    ("oos", "out_of_sample_savings, backtest_split", ("out_of_sample_savings", "in_sample_savings",
     "backtest_split"), "what re-tuning saved against the default split on demand it had not seen: "
     "backtest_split (in tenths: 4.5-5.5-0 is 45/55/0) is tuned on the older half of the history (at most a "
     "month) and priced on the newer half (in sample: priced on the half it was tuned on). It is another split "
     "than the tuned one, which is tuned on all of the demand path."),
    ("spike", "p_spike", ("p_spike",), "the spike model's probability that the spot market's price spikes within "
     "its horizon; a market at or above the alert threshold is not chosen. Lower is better."),
)
GLOSSARY_ANCHORS = {col: anchor for anchor, _, cols, _ in GLOSSARY for col in cols}

# what the pre-scale schedule sizes (planner.plan.PRESCALE_APPLIES_TO): said where its actions are listed
PRESCALE_SCOPE = (
    '<p class="note">The schedule applies to each pool\'s running nodes: it starts from the capacity they '
    "reported at the data cutoff and adds or removes whole nodes of the pool's size (units_per_instance) to "
    "carry the pool's whole forecast demand. It does not follow the split above: there, private and edge "
    "capacity is bought for the month and public on-demand follows the load hour by hour in its own instance "
    "type. The running fleet's cost there counts every running node all month; these scale-downs would lower "
    "it.</p>")
