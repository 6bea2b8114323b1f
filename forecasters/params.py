"""A model's hyperparameters grouped in frozen dataclasses (``LGBMParams``, ``ProphetParams``),
spelled out field by field for ``flat_params`` and the pickled artifact, and gathered back."""
from __future__ import annotations

import dataclasses
from typing import Any


def flatten(values: dict[str, Any], groups: dict[str, Any]) -> dict[str, Any]:
    """``values`` with each group's dataclass replaced, in its place, by its fields."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in groups and isinstance(value, type(groups[key])):
            out.update((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
        else:
            out[key] = value
    return out


def nest(values: dict[str, Any], groups: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`flatten`: each group's fields gathered back into its dataclass,
    placed where its first field was; a field not given keeps the model's default."""
    owner = {f.name: g for g, default in groups.items() if g not in values for f in dataclasses.fields(default)}
    given: dict[str, dict[str, Any]] = {}
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in owner:
            given.setdefault(owner[key], {})[key] = value
            out.setdefault(owner[key], None)
        else:
            out[key] = value
    for g, default in groups.items():
        if g not in values:
            out[g] = dataclasses.replace(default, **given.get(g, {}))
    return out
