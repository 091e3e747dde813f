"""One verify check's outcome; formatters see only these."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Check:
    name: str  # e.g. "platforms", "env ASCEND_HOME_PATH", "import fastops"
    ok: bool
    detail: str = ""
    platform: str | None = None

    def to_json(self) -> dict[str, object]:
        return asdict(self)
