"""The planner's policy from a TOML file (``headroom plan --config`` or
``HEADROOM_PLAN_CONFIG``), validated at the edge: an unknown key or a bad value is an
error that names it. ``data/samples/plan.toml`` lists every key with its default."""
from __future__ import annotations

import logging
import tomllib
from pathlib import Path
from typing import Annotated, Literal

import pandas as pd
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pipelines.runtime.durations import parse_duration
from planner.allocation import AllocationPolicy, Split, candidate_splits
from planner.cost import CostPolicy, LocationCost, OfferPolicy
from planner.plan import PlanPolicy
from planner.prescale import PrescalePolicy
from planner.reservations import ReservationPolicy
from planner.spot import SpotPolicy

log = logging.getLogger(__name__)


class PlanConfigError(ValueError):
    """The plan configuration file is unreadable or invalid."""


# a number is a TOML number (not "0.5" nor true) and finite (TOML allows inf and nan); those that
# scale a cost have an upper bound too, far past any real value, so no cost overflows to inf
Num = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Int = Annotated[int, Field(strict=True)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Location(_Strict):
    storage_surcharge: Num | None = Field(default=None, ge=0, le=100)
    network_amplification: Num | None = Field(default=None, ge=1, le=100)
    idle_penalty: Num | None = Field(default=None, ge=0, le=1e6)


class _Costs(_Strict):
    hours_per_month: Num | None = Field(default=None, ge=1, le=744)  # an hour to 31 days
    private: _Location | None = None
    public: _Location | None = None
    edge: _Location | None = None


class _Split(_Strict):
    private: Num = Field(ge=0, le=1)
    public: Num = Field(ge=0, le=1)
    edge: Num = Field(ge=0, le=1)


class _Bound(BaseModel):
    lo: Num = Field(ge=0, le=1)
    hi: Num = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> _Bound:
        if self.lo > self.hi:
            raise ValueError(f"the lower bound {self.lo} is above the upper bound {self.hi}")
        return self


class _Allocation(_Strict):
    default_split: _Split | None = None
    # at least 0.01: the tuner searches a grid of about 1/step^2 splits (1e-9 never ended)
    step: Num | None = Field(default=None, ge=0.01, le=0.5)
    provision_quantile: Num | None = Field(default=None, gt=0, le=1)
    fill: Literal["layered", "proportional"] | None = None
    scenarios: tuple[Annotated[Num, Field(gt=0, le=1000)], ...] | None = Field(default=None, min_length=1)
    min_savings: Num | None = Field(default=None, ge=0, lt=1)
    bounds: dict[Literal["private", "public", "edge"], tuple[Num, Num]] | None = None

    @field_validator("bounds")
    @classmethod
    def _bounds(cls, value: dict | None) -> dict | None:
        for loc, (lo, hi) in (value or {}).items():
            try:
                _Bound(lo=lo, hi=hi)
            except ValidationError as exc:
                raise ValueError(f"{loc}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None
        return value


class _Offers(_Strict):
    min_tflops_ratio: Num | None = Field(default=None, ge=0)
    min_memory_ratio: Num | None = Field(default=None, ge=0)
    regions: tuple[Annotated[str, Field(pattern=r"\S")], ...] | None = Field(default=None, min_length=1)
    any_region: Annotated[bool, Field(strict=True)] | None = None  # true or false, not 1 nor "yes"
    max_size_ratio: Num | None = Field(default=None, gt=0)


class _Reservations(_Strict):
    terms: tuple[Literal["1y", "3y"], ...] | None = None

    @field_validator("terms")
    @classmethod
    def _once(cls, value: tuple | None) -> tuple | None:
        if value is not None and len(set(value)) < len(value):
            raise ValueError(f"a term is named twice in {list(value)}")
        return value
    min_monthly_savings: Num | None = Field(default=None, ge=0, le=1e12)


MAX_DURATION = pd.Timedelta(days=366)
MAX_LEAD = pd.Timedelta(days=1)  # the forecasts pre-scaling reads look 24 hours ahead


def _positive_duration(value: str | None) -> str | None:
    """A duration option: None, or a positive duration with a unit of at most 366 days."""
    if value is not None:
        parse_duration(value, most=MAX_DURATION)
    return value


def _lead(value: str | None) -> str | None:
    if value is not None:
        parse_duration(value, most=MAX_LEAD)
    return value


class _Prescale(_Strict):
    shortage_cost: Num | None = Field(default=None, gt=0, le=1e6)
    idle_cost: Num | None = Field(default=None, gt=0, le=1e6)
    lead: str | None = None
    stabilization: str | None = None
    refresh: str | None = None
    calibration: str | None = None
    min_instances: Int | None = Field(default=None, ge=0, le=1_000_000)
    instance_units: Num | None = Field(default=None, gt=0, le=1e9)

    _durations = field_validator("stabilization", "refresh", "calibration")(_positive_duration)
    _lead = field_validator("lead")(_lead)


class _Spot(_Strict):
    interruptible_share: Num | None = Field(default=None, ge=0, le=1)
    lookback: str | None = None
    max_spike_probability: Num | None = Field(default=None, gt=0, le=1)
    min_discount: Num | None = Field(default=None, ge=0, lt=1)

    _durations = field_validator("lookback")(_positive_duration)


class _PlanConfig(_Strict):
    costs: _Costs = _Costs()
    offers: _Offers = _Offers()
    allocation: _Allocation = _Allocation()
    reservations: _Reservations = _Reservations()
    prescale: _Prescale = _Prescale()
    spot: _Spot = _Spot()


def _set(model: BaseModel | None) -> dict:
    return {} if model is None else model.model_dump(exclude_none=True)


def _location(default: LocationCost, given: _Location | None) -> LocationCost:
    return LocationCost(**{**default.__dict__, **_set(given)})


def policy_from_mapping(raw: dict, source: str = "plan config") -> PlanPolicy:
    """A :class:`PlanPolicy` from a parsed mapping; defaults for what it leaves out."""
    try:
        cfg = _PlanConfig.model_validate(raw)
        base = PlanPolicy()
        costs = CostPolicy(
            private=_location(base.costs.private, cfg.costs.private),
            public=_location(base.costs.public, cfg.costs.public),
            edge=_location(base.costs.edge, cfg.costs.edge),
            hours_per_month=(base.costs.hours_per_month if cfg.costs.hours_per_month is None
                             else cfg.costs.hours_per_month),
        )
        alloc = _set(cfg.allocation)
        split = alloc.pop("default_split", None)
        if "bounds" in alloc:  # a file may bound only some locations
            alloc["bounds"] = {**base.allocation.bounds, **alloc["bounds"]}
        try:
            allocation = AllocationPolicy(**{**base.allocation.__dict__, **alloc})
        except ValueError as exc:  # its messages start with the field: step ..., bounds ...
            raise ValueError(f"allocation.{exc}") from None
        try:
            candidate_splits(allocation)  # a grid with no split in bounds fails here, not after the work
        except ValueError as exc:
            raise ValueError(f"allocation.step / allocation.bounds: {exc}") from None
        try:
            default_split = Split(**split) if split else base.default_split
        except ValueError as exc:
            raise ValueError(f"allocation.default_split: {exc}") from None
        outside = [loc for loc, (lo, hi) in allocation.bounds.items()
                   if not lo - 1e-9 <= default_split.share(loc) <= hi + 1e-9]
        if outside:  # allowed (the default is the reference a re-tune must beat), but said
            log.warning("%s: allocation.default_split %s is outside [allocation.bounds] for %s: it is kept where no "
                        "split within the bounds saves min_savings against it", source, default_split.label(),
                        ", ".join(outside))
        return PlanPolicy(
            costs=costs,
            offers=OfferPolicy(**{**base.offers.__dict__, **_set(cfg.offers)}),
            allocation=allocation,
            reservations=ReservationPolicy(**{**base.reservations.__dict__, **_set(cfg.reservations)}),
            prescale=PrescalePolicy(**{**base.prescale.__dict__, **_set(cfg.prescale)}),
            spot=SpotPolicy(**{**base.spot.__dict__, **_set(cfg.spot)}),
            default_split=default_split,
        )
    except ValidationError as exc:
        errors = exc.errors()
        # a list whose item failed is also "too short after validation": the item says it all
        errors = [e for e in errors if not (e["type"] == "too_short" and any(
            len(o["loc"]) > len(e["loc"]) and o["loc"][:len(e["loc"])] == e["loc"] for o in errors))]
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
                             for e in errors)
        raise PlanConfigError(f"{source}: {problems}") from None
    except ValueError as exc:
        raise PlanConfigError(f"{source}: {exc}") from None


def load_plan_policy(path: str | Path | None) -> PlanPolicy:
    """The policy in the TOML file at ``path``, or the defaults when ``path`` is None."""
    if path is None:
        return PlanPolicy()
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8-sig"))  # a byte-order mark (Windows editors) is no error
    except FileNotFoundError:
        raise PlanConfigError(f"{p}: no such plan config file") from None
    except IsADirectoryError:
        raise PlanConfigError(f"{p}: a folder, not a plan config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanConfigError(f"{p}: unreadable plan config ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise PlanConfigError(f"{p}: not valid TOML ({exc})") from None
    except RecursionError:  # arrays inside arrays, thousands deep: tomllib recurses per level
        raise PlanConfigError(f"{p}: not a plan config (values nested too deep to read)") from None
    return policy_from_mapping(raw, str(p))
