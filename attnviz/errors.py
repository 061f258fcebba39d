"""Errors as data: what was wrong, in which field, and what is allowed.

`SpecError` is a `ValueError` (so `except ValueError` keeps working) that
carries `field`, `value` and `allowed`, so a user interface can put the
message next to the control it names without parsing the text.
"""

from __future__ import annotations

from typing import Any


def shown(value: Any, limit: int = 80) -> str:
    """`repr(value)`, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class SpecError(ValueError):
    """A bad value: `field` got `value`; `allowed` says what would be accepted.

    The message reads "{prefix}{field}: got {value}; allowed: {allowed}."
    (prefix "AttentionSpec." for spec fields). `value_text` replaces the
    repr of the value where the value itself is too large to show.
    """

    def __init__(
        self, field: str, value: Any, allowed: str, *, prefix: str = "", value_text: str | None = None
    ):
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{prefix}{field}: got {value_text or shown(value)}; allowed: {allowed}.")


class BudgetError(SpecError):
    """A run over its memory budget; `need` and `budget` in bytes."""

    def __init__(self, message: str, need: int, budget: int):
        self.field, self.value, self.allowed = "memory_budget", budget, message
        self.need, self.budget = need, budget
        ValueError.__init__(self, message)
