"""Every supported parameter type, with nested models and defaults."""

from __future__ import annotations

import datetime
import decimal
import enum
import pathlib
import uuid
from dataclasses import dataclass

from pydantic import BaseModel
from typing_extensions import NotRequired, TypedDict

from agenthost import tool


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Address(BaseModel):
    """Where to deliver."""

    street: str
    city: str


@dataclass
class Window:
    start: datetime.datetime
    end: datetime.datetime | None = None


class Options(TypedDict):
    gift_wrap: bool
    note: NotRequired[str]


@tool
def create_order(
    items: list[str],
    address: Address,
    window: Window,
    options: Options,
    priority: Priority = Priority.LOW,
    quantities: dict[str, int] | None = None,
    tags: set[str] = frozenset(),  # type: ignore[assignment]
    coordinates: tuple[float, float] | None = None,
    total: decimal.Decimal = decimal.Decimal("0"),
    order_id: uuid.UUID | None = None,
    due: datetime.date | None = None,
    receipt_path: pathlib.Path | None = None,
) -> dict[str, str]:
    """Create a delivery order."""
    return {"status": "created", "city": address.city, "priority": priority.value}
