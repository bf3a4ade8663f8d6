"""gpubot's own errors, converted once at the edge (CLI exit code, HTTP status).

GpubotError
├── InputError      bad input from a person or a peer: a retry with the same input fails
│                   the same way; the CLI exits 2, HTTP answers 4xx
└── RuleError       one rule is broken (schema, CEL, evaluation); the other rules go on
"""

from __future__ import annotations


class GpubotError(Exception):
    pass


class InputError(GpubotError):
    """Malformed file, payload or argument; `where` is `file:line` or a field path."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


class RuleError(GpubotError):
    def __init__(self, where: str, message: str, rule_id: str | None = None) -> None:
        prefix = f"{where}: " if where else ""
        rule = f"rule {rule_id}: " if rule_id else ""
        super().__init__(f"{prefix}{rule}{message}")
        self.where = where
        self.message = message
        self.rule_id = rule_id
