"""Where the repository's shipped data is, and the moment the rule-test snapshots describe."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "rules"
HEALTHY = RULES / "tests" / "snapshots" / "healthy.json"
NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
