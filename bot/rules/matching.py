"""Evaluating compiled rules against one subject's facts (a node, a pool or the cluster).

Matching decides *whether* a rule fires and what it computes (severity, proposals, evidence,
blockers); turning that into words for a person is diagnose's job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from bot.errors import RuleError
from bot.model import Action, Blocker, Severity, Stage
from bot.rules.cel import Activation, EvaluationError, Expression, NotCompiled
from bot.rules.loading import CompiledRule


@dataclass(frozen=True)
class RuleMatch:
    rule: CompiledRule
    subject: str | None
    stage: Stage
    severity: Severity
    actions: list[tuple[Action, bool]]
    evidence: list[str]
    blockers: list[Blocker]
    expected: bool


@dataclass
class MatchResult:
    matches: list[RuleMatch] = field(default_factory=list)
    errors: list[RuleError] = field(default_factory=list)


def _boolean(expression: Expression, activation: Activation) -> bool:
    value = expression.evaluate(activation)
    if not isinstance(value, bool):
        raise EvaluationError(f"expected true or false, got {type(value).__name__} {value!r}")
    return value


def _strings(expression: Expression, activation: Activation) -> list[str]:
    value = expression.evaluate(activation)
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)] if value not in (None, "") else []


def to_blockers(value: Any) -> list[Blocker]:
    """A `blockers` expression's result, which must be a list of blocker maps."""
    if not isinstance(value, list):
        raise EvaluationError(f"expected a list, got {type(value).__name__}")
    blockers = []
    for index, item in enumerate(value):
        try:
            blockers.append(Blocker.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise EvaluationError(f"item {index}: {where}: {first['msg']}") from exc
    return blockers


def with_variables(rule: CompiledRule, activation: Activation) -> Activation:
    """The activation plus the rule's own `variables`, when it defines any."""
    if not rule.variables:
        return activation
    values = {}
    for name, expression in rule.variables:
        try:
            values[name] = expression.evaluate(activation)
        except NotCompiled:
            raise  # it names its field already
        except EvaluationError as exc:
            raise EvaluationError(f"variables.{name}: {exc}") from exc
    return Activation({**activation.data, "variables": values})


def evaluate(
    rule: CompiledRule, activation: Activation, subject: str | None, stage: Stage
) -> RuleMatch | None:
    """One rule on one subject; raises EvaluationError when the rule cannot be evaluated."""
    activation = with_variables(rule, activation)
    if not _boolean(rule.when, activation):
        return None
    expected = bool(rule.spec.expected and stage in rule.spec.expected.stages)
    severity = rule.spec.severity
    actions: list[tuple[Action, bool]] = []
    if expected:
        severity = Severity.INFO
    else:
        for condition, level in rule.severity_overrides:
            if _boolean(condition, activation):
                severity = Severity(level)
                break
        for proposal_when, action, force in rule.proposals:
            if proposal_when is None or _boolean(proposal_when, activation):
                actions.append((Action(action), force))
    evidence = [line for e in rule.evidence for line in _strings(e, activation)]
    try:
        blockers = to_blockers(rule.blockers.evaluate(activation)) if rule.blockers else []
    except NotCompiled:
        raise
    except EvaluationError as exc:
        raise EvaluationError(f"blockers: {exc}") from exc
    return RuleMatch(
        rule=rule,
        subject=subject,
        stage=stage,
        severity=severity,
        actions=actions or [(Action.NONE, False)],
        evidence=evidence,
        blockers=blockers,
        expected=expected,
    )


def match(
    rules: Iterable[CompiledRule],
    data: Mapping[str, Any],
    subject: str | None,
    stage: Stage,
) -> MatchResult:
    """Every applicable rule on one subject; a rule that fails is reported, the rest go on."""
    result = MatchResult()
    activation: Activation | None = None
    for rule in rules:
        if not rule.spec.applies_in(stage):
            continue
        if activation is None:
            activation = Activation(data)
        try:
            found = evaluate(rule, activation, subject, stage)
        except NotCompiled as exc:
            # Told as loading would have told it, once: not on every subject it is reached on.
            if exc.first:
                result.errors.append(exc.error)
            continue
        except EvaluationError as exc:
            result.errors.append(
                RuleError(rule.where, f"on {subject or 'cluster'}: {exc}", rule.id)
            )
            continue
        if found is not None:
            result.matches.append(found)
    result.matches = suppress(result.matches)
    return result


def suppress(matches: list[RuleMatch]) -> list[RuleMatch]:
    """Drop the matches that a better-fitting rule on the same subject explains."""
    fired = {m.rule.id for m in matches if not m.expected}
    return [m for m in matches if not fired.intersection(m.rule.spec.suppressed_by)]
