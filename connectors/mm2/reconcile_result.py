"""What reconciliation found in one partition (pure data: importable without pyspark)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mirrorline.connectors.mm2.offset_map import Run


@dataclass
class PartitionResult:
    """What reconciliation found in one source partition and its copy."""

    topic: str
    partition: int
    source: int = 0
    target: int = 0
    matched: int = 0
    missing: int = 0
    missing_tail: int = 0
    duplicated: int = 0
    unexpected: int = 0
    out_of_order: int = 0
    first_missing: int | None = None
    last_missing: int | None = None
    runs: list[Run] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """The figures as a dict (stored with the map, printed as JSON)."""
        return {"source": self.source, "target": self.target, "matched": self.matched, "missing": self.missing,
                "missing_tail": self.missing_tail, "duplicated": self.duplicated, "unexpected": self.unexpected,
                "out_of_order": self.out_of_order}
