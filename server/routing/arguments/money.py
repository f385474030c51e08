"""The words a request writes money with: one table for every reader that asks.

A currency's word ("dollars", "euros", "bucks", "sterling") or its code in any case ("usd",
"EUR") after an amount says the amount is money ("500 dollars", "a 2,500 dollar deductible"), a
description that prices in one says its property holds money ("Price in US dollars"), and the
word names a currency: its ISO 4217 code, or `DOLLAR` where whose dollar is said by the words
before it ("Canadian dollars"). "pound" is no money word: it may be a weight.

>>> [money_word(w) for w in ("Dollars", "bucks", "EUR", "pounds", "kg")]
['$', '$', 'EUR', None, None]
>>> bool(MONEY_WORD.search("the fee, in us dollars"))
True
"""

from __future__ import annotations

import re

DOLLAR = "$"  # a dollar: the US's unless the words before it name another country's
_WORDS = {
    "dollar": DOLLAR, "dollars": DOLLAR, "buck": DOLLAR, "bucks": DOLLAR,
    "euro": "EUR", "euros": "EUR", "sterling": "GBP", "yen": "JPY", "yuan": "CNY",
    "renminbi": "CNY",
    "usd": "USD", "eur": "EUR", "gbp": "GBP", "jpy": "JPY", "cad": "CAD", "aud": "AUD",
}
# a money word standing alone, in any case
MONEY_WORD = re.compile(r"\b(?:" + "|".join(sorted(_WORDS, key=len, reverse=True)) + r")\b",
                        re.IGNORECASE)


def money_word(word: str) -> str | None:
    """The currency `word` names (an ISO 4217 code, or DOLLAR), None where it names none."""
    return _WORDS.get(word.lower())
