"""Representative tool functions shared by the benchmarks (no future import: peers see real types)."""

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field


class Address(BaseModel):
    street: str
    city: str
    zip_code: str | None = None


class Item(BaseModel):
    sku: str
    price: float
    quantity: int = 1


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def get_weather(
    city: Annotated[str, Field(description="City name")],
    unit: Literal["celsius", "fahrenheit"] = "celsius",
    days: int = 1,
) -> dict[str, float]:
    """Current weather for a city."""
    return {"temperature": 21.0}


def create_order(
    customer: str,
    address: Address,
    items: list[Item],
    priority: Literal["low", "high"] = "low",
    notes: str | None = None,
    gift: bool = False,
    coupon: str | None = None,
    deliver_after: int = 0,
    tags: list[str] = [],  # noqa: B006 - a literal default, as users write it
    metadata: dict[str, str] | None = None,
) -> dict[str, str]:
    """Create an order with ten parameters, two of them nested models."""
    return {"status": "created"}


TOOLS: dict[str, Callable[..., Any]] = {
    "add (2 params)": add,
    "get_weather (3 params)": get_weather,
    "create_order (10, nested)": create_order,
}

ADD_JSON = '{"a": 1, "b": 2}'
ORDER_JSON = (
    '{"customer": "Ada", "address": {"street": "1 Main St", "city": "Paris"},'
    ' "items": [{"sku": "A1", "price": 9.5, "quantity": 2}, {"sku": "B2", "price": 3.0}],'
    ' "priority": "high", "notes": "ring twice", "gift": true, "coupon": null,'
    ' "deliver_after": 3, "tags": ["x", "y"], "metadata": {"source": "web"}}'
)
