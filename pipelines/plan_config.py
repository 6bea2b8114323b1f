"""The planner's policy from a TOML file (``headroom plan --config`` or
``HEADROOM_PLAN_CONFIG``), validated at the edge: an unknown key or a bad value is an
error that names it. ``data/samples/plan.toml`` lists every key with its default."""
from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from planner.allocation import AllocationPolicy, Split
from planner.cost import CostPolicy, LocationCost
from planner.plan import PlanPolicy
from planner.prescale import PrescalePolicy
from planner.reservations import ReservationPolicy


class PlanConfigError(ValueError):
    """The plan configuration file is unreadable or invalid."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Location(_Strict):
    storage_surcharge: float | None = None
    network_amplification: float | None = None
    idle_penalty: float | None = None


class _Costs(_Strict):
    hours_per_month: float | None = None
    private: _Location | None = None
    public: _Location | None = None
    edge: _Location | None = None


class _Split(_Strict):
    private: float
    public: float
    edge: float


class _Allocation(_Strict):
    default_split: _Split | None = None
    step: float | None = None
    provision_quantile: float | None = None
    scenarios: tuple[float, ...] | None = None
    min_savings: float | None = None
    bounds: dict[str, tuple[float, float]] | None = None


class _Reservations(_Strict):
    terms: tuple[str, ...] | None = None
    min_monthly_savings: float | None = None


class _Prescale(_Strict):
    band: str | None = None
    headroom: float | None = None
    lead_steps: int | None = None
    hysteresis: float | None = None
    down_steps: int | None = None
    min_instances: int | None = None


class _PlanConfig(_Strict):
    costs: _Costs = _Costs()
    allocation: _Allocation = _Allocation()
    reservations: _Reservations = _Reservations()
    prescale: _Prescale = _Prescale()


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
            hours_per_month=cfg.costs.hours_per_month or base.costs.hours_per_month,
        )
        alloc = _set(cfg.allocation)
        split = alloc.pop("default_split", None)
        allocation = AllocationPolicy(**{**base.allocation.__dict__, **alloc})
        return PlanPolicy(
            costs=costs,
            allocation=allocation,
            reservations=ReservationPolicy(**{**base.reservations.__dict__, **_set(cfg.reservations)}),
            prescale=PrescalePolicy(**{**base.prescale.__dict__, **_set(cfg.prescale)}),
            default_split=Split(**split) if split else base.default_split,
        )
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise PlanConfigError(f"{source}: {problems}") from None
    except ValueError as exc:
        raise PlanConfigError(f"{source}: {exc}") from None


def load_plan_policy(path: str | Path | None) -> PlanPolicy:
    """The policy in the TOML file at ``path``, or the defaults when ``path`` is None."""
    if path is None:
        return PlanPolicy()
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlanConfigError(f"{p}: no such plan config file") from None
    except tomllib.TOMLDecodeError as exc:
        raise PlanConfigError(f"{p}: not valid TOML ({exc})") from None
    return policy_from_mapping(raw, str(p))
