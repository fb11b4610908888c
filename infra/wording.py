"""How the twin's lines count things: "1 partition", "2 partitions"."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and `noun`, in the plural unless `n` is one (`plural` when adding an s will not do)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
