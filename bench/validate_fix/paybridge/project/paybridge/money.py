"""Money as integer minor units with an ISO 4217 currency (docs/adr/0001)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal

EXPONENTS = {"EUR": 2, "USD": 2, "GBP": 2, "JPY": 0}


def currency_exponent(currency: str) -> int:
    return EXPONENTS[currency]


@dataclass(frozen=True)
class Money:
    amount_minor: int
    currency: str

    def convert(self, rate: Decimal, to: str) -> Money:
        scale = Decimal(10) ** (currency_exponent(to) - currency_exponent(self.currency))
        value = (Decimal(self.amount_minor) * rate * scale).quantize(Decimal(1), rounding=ROUND_HALF_EVEN)
        return Money(int(value), to)
