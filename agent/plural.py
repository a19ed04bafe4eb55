"""Counted nouns in what people read: "1 iteration", "3 iterations" (never "1 iterations")."""

from __future__ import annotations


def count(n: int, noun: str, many: str | None = None) -> str:
    """'1 candidate', '0 candidates', '2 launches' (count(2, 'launch', 'launches'))."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"
