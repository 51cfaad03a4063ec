"""What every event of ``events.py`` is made of: ``EventBase`` (the ``name``, ``turn_id`` and
``n`` each one has, and the ``data()`` / ``from_data()`` pair each one writes), and the
checked reads its ``from_data`` does of a payload's fields.

Each read returns the field's value with its type, or raises ``TypeError`` (the wrong kind of
value) or ``ValueError`` (a value outside those allowed) saying what it got; ``decode`` turns
either, and a ``KeyError`` for a missing field, into ``InvalidValue``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias, TypeVar, get_args

E = TypeVar("E", bound="EventBase")


@dataclass(slots=True)
class EventBase:
    """One event of a turn (SPEC §8); ``name`` is its type on the wire, one per class."""

    name: ClassVar[str]
    turn_id: str = field(default="", kw_only=True)
    n: int = field(default=0, kw_only=True)

    def data(self) -> dict[str, Any]:
        """The SPEC §8 payload of this event."""
        raise NotImplementedError

    @classmethod
    def from_data(cls: type[E], data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> E:
        """The event a payload describes (``KeyError``, ``TypeError`` or ``ValueError`` when
        it does not describe one; ``decode`` turns those into ``InvalidValue``)."""
        raise NotImplementedError


def one_of(value: Any, allowed: tuple[str, ...], name: str) -> Any:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def as_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, not {value!r}")
    return value


def as_str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {value!r}")
    return value


def opt_str(value: Any) -> str | None:
    return None if value is None else as_str(value)


def opt_dict(value: Any, what: str) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise TypeError(f"{what} must be an object, not {value!r}")
    return value


def as_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, not {value!r}")
    return value


def opt_int(value: Any) -> int | None:
    return None if value is None else as_int(value)


def as_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, not {value!r}")
    return float(value)


__all__ = ["EventBase", "as_bool", "as_int", "as_number", "as_str", "one_of", "opt_dict", "opt_int", "opt_str"]


BudgetScope: TypeAlias = Literal["turn", "session", "user_day"]
SCOPES: tuple[str, ...] = get_args(BudgetScope)


@dataclass(frozen=True, slots=True)
class BudgetReached:
    """Where a budget stood when it stopped a turn: the scope whose ceiling was reached, what
    it spent, its ceiling (with what was granted before), and what approving adds."""

    scope: BudgetScope = "turn"
    spent_tokens: int = 0
    spent_nano_usd: int = 0
    limit_tokens: int | None = None
    limit_nano_usd: int | None = None
    extra_tokens: int | None = None
    """Approving lets the scope spend this many more tokens (None: no token ceiling)."""
    extra_nano_usd: int | None = None

    def data(self) -> dict[str, Any]:
        return {"scope": self.scope, "spent_tokens": self.spent_tokens, "spent_nano_usd": self.spent_nano_usd,
                "limit_tokens": self.limit_tokens, "limit_nano_usd": self.limit_nano_usd,
                "extra_tokens": self.extra_tokens, "extra_nano_usd": self.extra_nano_usd}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> BudgetReached:
        return cls(scope=one_of(data["scope"], SCOPES, "scope"), spent_tokens=as_int(data["spent_tokens"]),
                   spent_nano_usd=as_int(data["spent_nano_usd"]), limit_tokens=opt_int(data["limit_tokens"]),
                   limit_nano_usd=opt_int(data["limit_nano_usd"]), extra_tokens=opt_int(data["extra_tokens"]),
                   extra_nano_usd=opt_int(data["extra_nano_usd"]))
