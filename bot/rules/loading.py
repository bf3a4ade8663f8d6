"""Loading rule files: validate, compile every CEL expression, report `file:line: problem`.

A broken rule is reported and left out; it never stops the other rules from loading.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from bot.errors import InputError, RuleError
from bot.rules.cel import Expression
from bot.rules.schema import Rule, RuleFile, XidCatalog
from bot.yamlfiles import LocatedYaml, Path_, load_located


@dataclass(frozen=True)
class CompiledRule:
    spec: Rule
    where: str
    when: Expression
    severity_overrides: list[tuple[Expression, str]]
    proposals: list[tuple[Expression | None, str, bool]]
    """(condition, action, force) for each proposal the rule may make."""
    evidence: list[Expression]
    blockers: Expression | None
    variables: list[tuple[str, Expression]]

    @property
    def id(self) -> str:
        return self.spec.id


@dataclass
class RuleSet:
    rules: list[CompiledRule] = field(default_factory=list)
    xid_catalog: XidCatalog | None = None
    errors: list[RuleError] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    def spec(self, rule_id: str) -> Rule | None:
        return next((r.spec for r in self.rules if r.spec.id == rule_id), None)

    def replaces(self, rule_id: str) -> set[str]:
        """The rules whose open incident a diagnosis of `rule_id` takes over: those it
        explains better (their `suppressed_by` names it) and those of the same problem."""
        found = {r.spec.id for r in self.rules if rule_id in r.spec.suppressed_by}
        return (found | self.same_problem(rule_id)) - {rule_id}

    def same_problem(self, rule_id: str) -> set[str]:
        """Rules telling the same problem as `rule_id` from another angle (both directions)."""
        found = {r.spec.id for r in self.rules if rule_id in r.spec.same_problem_as}
        spec = self.spec(rule_id)
        return (found | set(spec.same_problem_as if spec else ())) - {rule_id}

    def explained_by(self, rule_id: str) -> set[str]:
        """The rules that tell `rule_id`'s problem better: while an incident of one is open on
        a subject, a diagnosis of `rule_id` there is that incident's, not a new one."""
        spec = self.spec(rule_id)
        return set(spec.suppressed_by) if spec is not None else set()


def rule_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
    return [path]


def load_rules(paths: Iterable[Path]) -> RuleSet:
    ruleset = RuleSet()
    seen: dict[str, str] = {}
    for path in paths:
        for file in rule_files(path):
            ruleset.files.append(file)
            try:
                located = load_located(file)
            except InputError as exc:
                ruleset.errors.append(RuleError(exc.where, exc.message))
                continue
            _load_file(located, ruleset, seen)
    return ruleset


def _pydantic_problem(exc: ValidationError, located: LocatedYaml, prefix: Path_) -> RuleError:
    first = exc.errors()[0]
    location: Path_ = (*prefix, *first["loc"])
    dotted = ".".join(str(p) for p in first["loc"])
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown field"
    return RuleError(located.where(location), f"{dotted}: {message}" if dotted else message)


def _load_file(located: LocatedYaml, ruleset: RuleSet, seen: dict[str, str]) -> None:
    data = located.data
    if data is None:
        return
    if not isinstance(data, Mapping):
        ruleset.errors.append(RuleError(located.where(()), "expected a mapping with `rules:`"))
        return
    unknown = set(data) - set(RuleFile.model_fields)
    for key in sorted(unknown):
        ruleset.errors.append(RuleError(located.where((key,)), f"{key}: unknown field"))
    if "xid_catalog" in data:
        try:
            catalog = XidCatalog.model_validate(data["xid_catalog"])
        except ValidationError as exc:
            ruleset.errors.append(_pydantic_problem(exc, located, ("xid_catalog",)))
        else:
            if ruleset.xid_catalog is not None:
                ruleset.errors.append(
                    RuleError(located.where(("xid_catalog",)), "a second xid_catalog")
                )
            else:
                ruleset.xid_catalog = catalog
    raw_rules = data.get("rules") or []
    if not isinstance(raw_rules, list):
        ruleset.errors.append(RuleError(located.where(("rules",)), "rules: expected a list"))
        return
    for index, raw in enumerate(raw_rules):
        rule_id = raw.get("id") if isinstance(raw, Mapping) else None
        try:
            spec = Rule.model_validate(raw)
        except ValidationError as exc:
            error = _pydantic_problem(exc, located, ("rules", index))
            ruleset.errors.append(RuleError(error.where, error.message, rule_id))
            continue
        where = located.where(("rules", index))
        if spec.id in seen:
            ruleset.errors.append(
                RuleError(where, f"duplicate id, first defined at {seen[spec.id]}", spec.id)
            )
            continue
        try:
            compiled = _compile(spec, located, ("rules", index))
        except RuleError as exc:
            ruleset.errors.append(exc)
            continue
        seen[spec.id] = where
        ruleset.rules.append(compiled)


def _expression(source: str, located: LocatedYaml, at: Path_, rule_id: str) -> Expression:
    try:
        return Expression(source)
    except RuleError as exc:
        field_name = ".".join(str(p) for p in at[2:])
        raise RuleError(located.where(at), f"{field_name}: {exc.message}", rule_id) from exc


def _compile(spec: Rule, located: LocatedYaml, at: Path_) -> CompiledRule:
    def expr(source: str, *sub: str | int) -> Expression:
        return _expression(source, located, (*at, *sub), spec.id)

    return CompiledRule(
        spec=spec,
        where=located.where(at),
        when=expr(spec.when, "when"),
        severity_overrides=[
            (expr(o.when, "severity_overrides", i, "when"), o.severity.value)
            for i, o in enumerate(spec.severity_overrides)
        ],
        proposals=[
            (
                expr(p.when, "proposals", i, "when") if p.when else None,
                p.action.value,
                p.force,
            )
            for i, p in enumerate(spec.proposals)
        ],
        evidence=[expr(e, "evidence", i) for i, e in enumerate(spec.evidence)],
        blockers=expr(spec.blockers, "blockers") if spec.blockers else None,
        variables=[
            (name, expr(source, "variables", name)) for name, source in spec.variables.items()
        ],
    )


def validate_model(model: type[BaseModel], raw: Any, located: LocatedYaml, at: Path_) -> Any:
    """Validate part of a located file, turning the first problem into an InputError."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        error = _pydantic_problem(exc, located, at)
        raise InputError(error.where, error.message) from exc
