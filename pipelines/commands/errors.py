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
