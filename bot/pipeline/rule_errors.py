"""Rules that could not be evaluated, as the diagnosis passes tell them: in the log and in
`gpubot_rule_errors_total`.

Why it exists: every pass evaluates every rule again, so a rule that fails on a subject fails
on every pass; told each time, one broken expression would fill the log and inflate the
counter by the number of passes instead of the number of subjects it fails on.

What it must never do: stop a pass (a failing rule is a finding about the rules, not a reason
to diagnose nothing), or tell the same failure twice while it keeps failing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bot.errors import RuleError
from bot.process.telemetry import Telemetry

log = logging.getLogger("gpubot.passes")
"""The passes' logger, as before this module was cut out of them: operators filter on it."""


class RuleErrors:
    """Owns the (rule, what failed where) pairs that failed in the last pass, so each is told
    once while it keeps failing. It must never hold pairs from before the last pass: a
    failure that comes back after a pass without it is told again."""

    def __init__(self, telemetry: Telemetry | None = None) -> None:
        self.telemetry = telemetry
        self._failing: set[tuple[str, str]] = set()

    def tell(self, errors: Sequence[RuleError]) -> None:
        """A rule that starts failing on subjects is one log line (however many subjects)
        and counts each subject once while it keeps failing."""
        failing = {(e.rule_id or "?", e.message) for e in errors}
        new: dict[str, list[str]] = {}
        for rule, message in sorted(failing - self._failing):
            new.setdefault(rule, []).append(message)
        for rule, messages in new.items():
            more = f" (and {len(messages) - 1} more subject(s))" if len(messages) > 1 else ""
            log.warning("rule %s could not be evaluated %s%s", rule, messages[0], more)
            if self.telemetry is not None:
                self.telemetry.rule_errors.labels(rule=rule).inc(len(messages))
        self._failing = failing
