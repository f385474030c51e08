"""Catalog builders for the taxonomy, query-lint and tree-builder tests: topics whose clusters
are known, and the embedder they use (the doubles themselves live in doubles.py)."""

from __future__ import annotations

from typing import Any

from doubles import WordEmbedder

TOPICS = {  # topic -> its words: flat catalogs whose clusters are known
    "weather": ["forecast", "rain", "wind", "storm", "humidity", "temperature"],
    "banking": ["account", "loan", "deposit", "payment", "card", "mortgage"],
    "music": ["song", "album", "playlist", "lyrics", "artist", "concert"],
    "health": ["patient", "symptom", "doctor", "medication", "vaccine", "clinic"],
    "travel": ["flight", "hotel", "passport", "luggage", "airport", "itinerary"],
    "sports": ["match", "score", "league", "player", "coach", "stadium"],
    "cooking": ["recipe", "oven", "ingredient", "dessert", "spice", "kitchen"],
    "space": ["planet", "orbit", "rocket", "telescope", "satellite", "galaxy"],
}


def topic_embedder() -> WordEmbedder:
    """Random word vectors in 64 dimensions: texts that share words are close, not equal."""
    return WordEmbedder(64, vectors="random")


def leaf(name: str, description: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": description, **extra}


def router(name: str, description: str, *children: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": description, "children": list(children)}
