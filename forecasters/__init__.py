"""headroom forecasters: the pure forecasting core (no I/O).

Models are reached by name through :mod:`forecasters.registry`; importing this
package registers all of them (heavy libraries are imported lazily).
"""
from forecasters import baselines, hybrid, lgbm, lstm, prophet_model  # noqa: F401  (registers models)

from forecasters import ensemble  # noqa: F401  # isort: skip  (registered last: after its members)
from forecasters.backtest import cross_validation
from forecasters.base import FORECAST_COLUMNS, BaseForecaster, Forecaster, NotFittedError
from forecasters.lgbm import LGBMParams
from forecasters.metrics import evaluate
from forecasters.prophet_model import ProphetParams
from forecasters.registry import available, create, get
from forecasters.serialize import dumps, loads
from forecasters.validation import HistoryError, validate_history

__all__ = [
    "FORECAST_COLUMNS",
    "BaseForecaster",
    "Forecaster",
    "HistoryError",
    "LGBMParams",
    "NotFittedError",
    "ProphetParams",
    "available",
    "cross_validation",
    "dumps",
    "evaluate",
    "loads",
    "create",
    "get",
    "validate_history",
]
