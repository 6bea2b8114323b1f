"""Name registry: every forecaster is reachable by its ``name``."""
from __future__ import annotations

from forecasters.base import BaseForecaster

_REGISTRY: dict[str, type[BaseForecaster]] = {}


def register(cls: type[BaseForecaster]) -> type[BaseForecaster]:
    """Class decorator: add a forecaster under ``cls.name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"forecaster name {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    return cls


def available() -> list[str]:
    """Registered names, in registration order."""
    return list(_REGISTRY)


def get(name: str) -> type[BaseForecaster]:
    """The class registered under ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown forecaster {name!r}; choose from {', '.join(_REGISTRY)}") from None


def create(
    name: str,
    horizon: int = 24,
    freq: str | None = "h",
    season_length: int = 24,
    seed: int = 0,
) -> BaseForecaster:
    """A forecaster with the common parameters set and model defaults for the rest."""
    cls = get(name)
    model = cls(horizon=horizon, freq=freq, season_length=season_length)
    if "seed" in model.get_params(deep=False):
        model.set_params(seed=seed)
    return model
