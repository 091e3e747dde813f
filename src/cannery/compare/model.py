"""A difference between an original and its replacement, as every category reports it."""

from __future__ import annotations

from dataclasses import dataclass, field

ADDED, REMOVED, CHANGED, MOVED = "added", "removed", "changed", "moved"


@dataclass
class Difference:
    """One item of one category that is not the same on both sides.

    ``item`` is the stable name a compare-accepted.toml entry matches (``apt:wget``, ``PATH``,
    ``torch``); ``original``/``new`` are the values shown (None: absent on that side).
    """

    category: str
    item: str
    change: str  # added | removed | changed | moved
    original: str | None = None
    new: str | None = None
    note: str = ""
    arches: list[str] = field(default_factory=list)  # empty: every architecture compared
    why: str | None = None  # the accepted list's reason, when accepted

    @property
    def accepted(self) -> bool:
        return self.why is not None

    def key(self) -> tuple[str, str, str, str | None, str | None, str]:
        return (self.category, self.item, self.change, self.original, self.new, self.note)

    def as_json(self) -> dict[str, object]:
        return {"category": self.category, "item": self.item, "change": self.change,
                "original": self.original, "new": self.new, "note": self.note,
                "arches": self.arches, "accepted": self.accepted, "why": self.why}


def mapping_diff(category: str, original: dict[str, str], new: dict[str, str],
                 note: str = "") -> list[Difference]:
    """Items present on one side only, and items whose value differs."""
    out: list[Difference] = []
    for key in original:
        if key not in new:
            out.append(Difference(category, key, REMOVED, original[key], None, note))
        elif original[key] != new[key]:
            out.append(Difference(category, key, CHANGED, original[key], new[key], note))
    for key in new:
        if key not in original:
            out.append(Difference(category, key, ADDED, None, new[key], note))
    return out


def common_order(xs: list[str], ys: list[str]) -> set[str]:
    """The entries of a longest common subsequence of ``xs`` and ``ys`` (items unique): what
    keeps its relative order; the rest moved."""
    n, m = len(xs), len(ys)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            table[i][j] = (table[i + 1][j + 1] + 1 if xs[i] == ys[j]
                           else max(table[i + 1][j], table[i][j + 1]))
    keep: set[str] = set()
    i = j = 0
    while i < n and j < m:
        if xs[i] == ys[j]:
            keep.add(xs[i])
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return keep
