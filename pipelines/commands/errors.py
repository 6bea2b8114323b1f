"""What a command raises to stop with a message and an exit code instead of a traceback."""
from __future__ import annotations


class CliError(Exception):
    """A user-facing error: printed without a traceback, with an exit code."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def check_fraction(value: float, option: str, meaning: str) -> None:
    """A share given on the command line must lie strictly between 0 and 1."""
    if not 0 < value < 1:
        raise CliError(f"{option} must be between 0 and 1 ({meaning}), got {value}", 2)


def check_seed(seed: int, models: bool = True) -> None:
    """A random seed given on the command line: numpy takes none below 0; a seed that also
    seeds the models (``models``) must fit them: torch takes none past 2**63, and LightGBM
    folds one past 2**31 onto a smaller one (2**32 is seed 0)."""
    if seed < 0:
        raise CliError(f"--seed must be >= 0, got {seed}", 2)
    if models and seed >= 2**31:
        raise CliError(f"--seed must be in 0..{2**31 - 1} (the models' seeds), got {seed}", 2)


def model_names(text: str | None, default: list[str] | None) -> list[str] | None:
    """The models of a ``--models`` list (comma-separated), ``default`` when none is given; an
    unknown name, or a list with no name, is an error naming the models there are."""
    import forecasters

    if text is None:
        return default
    names = [n.strip() for n in text.split(",") if n.strip()]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # each would be fitted and stored again under another run
        raise CliError(f"--models: {', '.join(twice)} named twice", 2)
    unknown = [n for n in names if n not in forecasters.available()]
    if unknown or not names:
        what = f"unknown model(s) {', '.join(unknown)}" if unknown else f"no model named in {text!r}"
        raise CliError(f"--models: {what}; choose from {','.join(forecasters.available())}", 2)
    return names
