"""Loading rule files: validate, compile every CEL expression, report `file:line: problem`.

A broken rule is reported and left out; it never stops the other rules from loading. With
`compile_all=False` (`gpubot diagnose`) each expression is compiled when first evaluated
instead: one that is not CEL is then reported where it is reached, in the same words, once,
and its rule gives nothing from there on; one never reached is not reported (`rules lint`
compiles them all).

The alert mapping (`alerts.yaml` in the rules directory: which alerts mean which symptom, and
which labels name the node, the GPU and the Xid code) is data beside the rules, not rules:
the rule loader skips it by name, and its schema and loading live here too, below both the
Alertmanager intake that applies it (`bot.sources.alertmanager.understanding`) and `rules
lint` that checks it (`bot.rules.linting`). What this part must never do: decide what an
alert means (that is the intake's), or fail a delivery (a mapping that does not load is the
caller's to report).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
)

from bot.config import ALERTS_FILE
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
    alert_mappings: list[Path] = field(default_factory=list)
    """The alert mapping files found beside the rules (and skipped by the rule loader)."""

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
    """The rule files of a directory (every `*.yaml`/`*.yml` but the alert mapping), or the
    file itself."""
    if path.is_dir():
        found = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
        return [file for file in found if file.name != ALERTS_FILE]
    return [path]


def load_rules(paths: Iterable[Path], *, compile_all: bool = True) -> RuleSet:
    ruleset = RuleSet()
    seen: dict[str, str] = {}
    for path in paths:
        if path.is_dir() and (path / ALERTS_FILE).is_file():
            ruleset.alert_mappings.append(path / ALERTS_FILE)
        for file in rule_files(path):
            ruleset.files.append(file)
            try:
                located = load_located(file)
            except InputError as exc:
                ruleset.errors.append(RuleError(exc.where, exc.message))
                continue
            _load_file(located, ruleset, seen, compile_all)
    return ruleset


def _pydantic_problem(exc: ValidationError, located: LocatedYaml, prefix: Path_) -> RuleError:
    first = exc.errors()[0]
    location: Path_ = (*prefix, *first["loc"])
    dotted = ".".join(str(p) for p in first["loc"])
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown field"
    return RuleError(located.where(location), f"{dotted}: {message}" if dotted else message)


def _load_file(
    located: LocatedYaml, ruleset: RuleSet, seen: dict[str, str], compile_all: bool
) -> None:
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
            compiled = _compile(spec, located, ("rules", index), compile_all)
        except RuleError as exc:
            ruleset.errors.append(exc)
            continue
        seen[spec.id] = where
        ruleset.rules.append(compiled)


def _compile(spec: Rule, located: LocatedYaml, at: Path_, compile_all: bool) -> CompiledRule:
    def expr(source: str, *sub: str | int) -> Expression:
        return Expression(
            source,
            deferred=not compile_all,
            where=located.where((*at, *sub)),
            field=".".join(str(p) for p in sub),
            rule_id=spec.id,
        )

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


# ---- the alert mapping (rules/alerts.yaml) ---------------------------------------------------
# The header comment of rules/alerts.yaml is the spec of how an alert is read; these models
# are its schema. `bot.sources.alertmanager.understanding` applies it.

UNDERSTOOD = "gpubot.understood"
"""Signal annotation: how gpubot read an alert it did not write ("Xid 79 read from the summary
of GpuXidError"). Absent on gpubot's own alerts, read as they are."""
SYMPTOM = "gpubot.symptom"
"""Signal annotation: the mapping's symptom of the alert, or `unknown`."""
EVIDENCE_ONLY = "gpubot.evidence_only"
"""Signal annotation, "true": no rule reads this alert (no mapping names it, its symptom has
no `as_alert`, or it is an Xid alert without a code); it is shown as "also firing" on its
node's diagnoses instead."""
POD_REFS = "gpubot.pods"
"""Signal annotation: pods ("namespace/name", space-separated) whose node is the alert's node,
when its node labels gave only an address or nothing (`resolve_signal_nodes` reads it)."""
ASK_PROMETHEUS = "gpubot.xid_from_prometheus"
"""Signal annotation, "true": an Xid alert whose code is not in the payload and may be read
from Prometheus (`understanding.with_prometheus_xids`)."""
UUID = "gpubot.uuid"
"""Signal annotation: the GPU's UUID as the alert names it, lowercase, without `GPU-`."""

XidSource = Literal["labels", "text", "prometheus"]
AlertScope = Literal["gpu", "node", "cluster"]
ValueKind = Literal[
    "xid_code", "count", "celsius", "flag", "bitmask", "status", "watts", "seconds", "timestamp"
]


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from exc
    return pattern


Regex = Annotated[str, AfterValidator(_compiles)]
Label = Annotated[str, Field(min_length=1)]
PodLabels = tuple[Label, Label]
"""(namespace label, pod label)."""


_DEFAULT_XID_FROM: tuple[XidSource, ...] = ("labels", "text")


class _MappingPart(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SymptomSpec(_MappingPart):
    """One thing an alert can mean, and the gpubot alert name the rules know it by."""

    as_alert: str | None
    """The alert name the shipped rules read (`a.name`); null: evidence only."""
    rules: list[str] = Field(default_factory=list)
    """The rules whose story it belongs to (lint checks they exist)."""
    about: str


class MappingDefaults(_MappingPart):
    node_labels: list[Label]
    pod_labels: list[PodLabels] = Field(default_factory=list)
    gpu_labels: list[Label] = Field(default_factory=list)
    uuid_labels: list[Label] = Field(default_factory=list)
    xid_labels: list[Label] = Field(default_factory=list)
    xid_from: list[XidSource] = Field(default_factory=lambda: list(_DEFAULT_XID_FROM))


class AlertEntry(_MappingPart):
    """Alert names of one rule set that mean one symptom. Each list, when given, replaces
    the default one."""

    names: list[Label] = Field(min_length=1)
    symptom: str
    scope: AlertScope
    source: str = Field(min_length=1)
    """Where it comes from: a repository, path and commit, or a URL, that was read."""
    node_labels: list[Label] | None = None
    pod_labels: list[PodLabels] | None = None
    gpu_labels: list[Label] | None = None
    uuid_labels: list[Label] | None = None
    xid_labels: list[Label] | None = None
    xid_from: list[XidSource] | None = None


class MetricEntry(_MappingPart):
    """A metric an alert's expression may select, and what it means."""

    symptom: str
    value_is: ValueKind | None = None
    context: bool = False
    """Utilisation and the like: counts only when no other metric of the expression does."""
    xid_labels: list[Label] | None = None


class NamePatternsApplyWhen(_MappingPart):
    name: Regex
    labels: list[Label] = Field(default_factory=list)


class NamePattern(_MappingPart):
    pattern: Regex
    symptom: str


class AlertMapping(_MappingPart):
    """rules/alerts.yaml: which alerts mean which symptom, and where their node, GPU and Xid
    code are. Compiled once when loaded (the patterns, the name index)."""

    version: Literal[1]
    symptoms: dict[str, SymptomSpec]
    defaults: MappingDefaults
    xid_text_patterns: list[Regex] = Field(default_factory=list)
    alerts: list[AlertEntry] = Field(default_factory=list)
    metrics: dict[str, MetricEntry] = Field(default_factory=dict)
    name_patterns_apply_when: NamePatternsApplyWhen | None = None
    name_patterns: list[NamePattern] = Field(default_factory=list)

    _by_name: dict[str, AlertEntry] = PrivateAttr(default_factory=dict)
    _xid_text: list[re.Pattern[str]] = PrivateAttr(default_factory=list)
    _name_patterns: list[tuple[re.Pattern[str], NamePattern]] = PrivateAttr(default_factory=list)
    _gpu_looking: re.Pattern[str] | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        for entry in self.alerts:
            for name in entry.names:
                self._by_name.setdefault(name, entry)  # the first entry listing it wins
        self._xid_text = [re.compile(p) for p in self.xid_text_patterns]
        self._name_patterns = [(re.compile(p.pattern), p) for p in self.name_patterns]
        when = self.name_patterns_apply_when
        self._gpu_looking = re.compile(when.name) if when is not None else None

    def entry(self, alertname: str) -> AlertEntry | None:
        return self._by_name.get(alertname)

    @property
    def xid_text(self) -> list[re.Pattern[str]]:
        return self._xid_text

    def name_pattern(self, alertname: str) -> NamePattern | None:
        return next((p for rx, p in self._name_patterns if rx.search(alertname)), None)

    def gpu_looking(self, alertname: str, labels: Mapping[str, str]) -> bool:
        """Whether name patterns may read this alert: a GPU-looking name or label."""
        when = self.name_patterns_apply_when
        if when is None or self._gpu_looking is None:
            return True
        return bool(self._gpu_looking.search(alertname)) or any(k in labels for k in when.labels)

    def as_alert(self, symptom: str) -> str | None:
        spec = self.symptoms.get(symptom)
        return spec.as_alert if spec is not None else None


def read_alert_mapping(path: Path) -> tuple[AlertMapping | None, list[RuleError]]:
    """The mapping in `path`, or None and every problem that keeps it from loading
    (`file:line: what`): YAML, schema, symptoms named but not defined, a text pattern
    without a group for the code."""
    try:
        located = load_located(path)
    except InputError as exc:
        return None, [RuleError(exc.where, exc.message)]
    if not isinstance(located.data, Mapping):
        return None, [RuleError(located.where(()), "expected the alert mapping (a mapping)")]
    try:
        mapping = AlertMapping.model_validate(located.data)
    except ValidationError as exc:
        return None, [_pydantic_problem(exc, located, ())]
    problems = _mapping_references(mapping, located)
    return (None if problems else mapping), problems


def _mapping_references(mapping: AlertMapping, located: LocatedYaml) -> list[RuleError]:
    problems = []
    known = set(mapping.symptoms)

    def check(symptom: str, at: Path_) -> None:
        if symptom not in known:
            problems.append(
                RuleError(located.where(at), f"symptom {symptom!r} is not one of `symptoms`")
            )

    for index, entry in enumerate(mapping.alerts):
        check(entry.symptom, ("alerts", index, "symptom"))
    for name, metric in mapping.metrics.items():
        check(metric.symptom, ("metrics", name))
    for index, pattern in enumerate(mapping.name_patterns):
        check(pattern.symptom, ("name_patterns", index))
    for index, text in enumerate(mapping.xid_text_patterns):
        if re.compile(text).groups < 1:
            problems.append(
                RuleError(
                    located.where(("xid_text_patterns", index)),
                    "xid_text_patterns: needs a group for the code",
                )
            )
    return problems


_mapping_cache: dict[tuple[Path, int, int], AlertMapping] = {}


def load_alert_mapping(path: Path) -> AlertMapping:
    """The mapping in `path`, read once (again only when the file changes), or an
    `InputError` naming the first problem."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise InputError(str(path), exc.strerror or str(exc)) from exc
    key = (path.resolve(), stat.st_mtime_ns, stat.st_size)
    cached = _mapping_cache.get(key)
    if cached is not None:
        return cached
    mapping, problems = read_alert_mapping(path)
    if mapping is None:
        first = problems[0] if problems else RuleError(str(path), "could not be read")
        raise InputError(first.where, first.message)
    _mapping_cache[key] = mapping
    return mapping
