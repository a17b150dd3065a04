"""Model prices: a table shipped with the package, overridden per model by the settings."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from importlib import resources

from bzzz.config import CostSettings

logger = logging.getLogger(__name__)

NANOS_PER_USD = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million input and output tokens."""

    input: float
    output: float

    def cost_nanos(self, prompt_tokens: int, completion_tokens: int) -> int:
        """The cost of a call in billionths of a USD (exact integers add up in the ledger)."""
        # tokens x USD-per-million x 1000 = nano-USD; rounding once per call keeps it exact.
        return round(prompt_tokens * self.input * 1000 + completion_tokens * self.output * 1000)


def shipped_prices() -> dict[str, Price]:
    """The price table shipped in ``pricing.json``."""
    text = resources.files("bzzz.llm").joinpath("pricing.json").read_text(encoding="utf-8")
    table = json.loads(text)["models"]
    return {name: Price(float(p["input"]), float(p["output"])) for name, p in table.items()}


class PriceTable:
    """Prices by model; an unknown model costs the fallback price (0 unless configured: a
    local model is free) and is named once in the log."""

    def __init__(self, settings: CostSettings) -> None:
        self._prices = shipped_prices()
        for name, price in settings.pricing.items():
            self._prices[name] = Price(price.input, price.output)
        self._fallback = Price(settings.fallback_price.input, settings.fallback_price.output)
        self._warned: set[str] = set()

    def price(self, model: str) -> Price:
        """The price of ``model`` (a dated snapshot uses its family's price)."""
        found = self._prices.get(model) or self._family(model)
        if found is not None:
            return found
        if model not in self._warned:
            self._warned.add(model)
            logger.warning(
                "no price for model %s: its calls cost the fallback price (USD %s in, %s out "
                "per million tokens); set cost.pricing.%s to price it",
                model,
                self._fallback.input,
                self._fallback.output,
                model,
            )
        return self._fallback

    def _family(self, model: str) -> Price | None:
        # "gpt-4o-2024-08-06" is priced as "gpt-4o": the longest known prefix wins.
        best = max((n for n in self._prices if model.startswith(n + "-")), key=len, default=None)
        return self._prices[best] if best else None

    def cost_nanos(self, model: str, prompt_tokens: int, completion_tokens: int) -> int:
        """What a call costs, nano-USD."""
        return self.price(model).cost_nanos(prompt_tokens, completion_tokens)
