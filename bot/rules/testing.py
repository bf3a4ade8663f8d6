"""`gpubot rules test`: rule unit tests in YAML, in the spirit of `promtool test rules`.

A test names a base snapshot (kubectl JSON), edits it object by object (JSON merge patch,
add, delete), adds alerts, fixes `now`, and lists exactly the diagnoses it expects. Any
diagnosis not listed is a failure too: a rule that fires where it should not is as much a
bug as one that stays silent.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from bot.errors import InputError
from bot.facts.snapshots import read_objects_file
from bot.kube_objects import merge_patch, name_of, namespace_of
from bot.model import Action, Diagnosis, Lang, Severity, Stage
from bot.rules.loading import validate_model
from bot.yamlfiles import load_located


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Edit(_Strict):
    """One change to the base snapshot: merge into, add, or delete one object."""

    kind: str | None = None
    name: str | None = None
    namespace: str = ""
    merge: dict[str, Any] | None = None
    delete: bool = False
    add: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_change(self) -> Edit:
        changes = [self.merge is not None, self.delete, self.add is not None]
        if sum(changes) != 1:
            raise ValueError("give exactly one of merge, delete, add")
        if self.add is None and not (self.kind and self.name):
            raise ValueError("merge and delete need kind and name")
        return self


class Expected(_Strict):
    rule: str
    node: str | None = None
    pool: str | None = None
    stage: Stage | None = None
    severity: Severity | None = None
    proposals: list[Action] | None = None
    blockers: list[str] | None = None
    """Blocker kinds that must all be named."""
    evidence_contains: list[str] = Field(default_factory=list)


class RuleTest(_Strict):
    name: str
    now: AwareDatetime
    snapshot: str
    edits: list[Edit] = Field(default_factory=list)
    alerts: list[dict[str, Any]] = Field(default_factory=list)
    """Alerts as Alertmanager sends them (labels, annotations, status...)."""
    lang: Lang = Lang.EN
    about: list[str] = Field(default_factory=list)
    """The rule ids this test is written for (firing or deliberately not firing)."""
    demo: bool = False
    """Also shown by `gpubot demo`."""
    expect: list[Expected]


class RuleTestFile(_Strict):
    rules_dir: str | None = None
    tests: list[RuleTest] = Field(min_length=1)


@dataclass
class TestOutcome:
    name: str
    where: str
    failures: list[str] = field(default_factory=list)
    diagnoses: list[Diagnosis] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def load_test_file(path: Path) -> tuple[RuleTestFile, Callable[[int], str]]:
    located = load_located(path)
    if not isinstance(located.data, Mapping):
        raise InputError(str(path), "expected a mapping with `tests:`")
    parsed: RuleTestFile = validate_model(RuleTestFile, located.data, located, ())
    return parsed, lambda index: located.where(("tests", index))


def _find(items: list[dict[str, Any]], edit: Edit) -> int:
    for index, item in enumerate(items):
        if (
            item.get("kind") == edit.kind
            and name_of(item) == edit.name
            and namespace_of(item) == edit.namespace
        ):
            return index
    where = f"{edit.kind} {edit.namespace + '/' if edit.namespace else ''}{edit.name}"
    raise InputError("edits", f"no {where} in the base snapshot")


def apply_edits(raw: Mapping[str, Any], edits: list[Edit]) -> dict[str, Any]:
    items: list[dict[str, Any]] = copy.deepcopy(list(raw["items"]))
    for edit in edits:
        if edit.add is not None:
            items.append(copy.deepcopy(edit.add))
            continue
        index = _find(items, edit)
        if edit.delete:
            items.pop(index)
        elif edit.merge is not None:
            items[index] = merge_patch(items[index], edit.merge)
    return {**raw, "items": items}


_snapshot_cache: dict[Path, dict[str, Any]] = {}


def base_snapshot(path: Path) -> dict[str, Any]:
    """The base snapshot as a List (kubectl's JSON or YAML, read once per run)."""
    if path not in _snapshot_cache:
        _snapshot_cache[path] = {"kind": "List", "items": read_objects_file(path)}
    return _snapshot_cache[path]


def check(test: RuleTest, diagnoses: list[Diagnosis]) -> list[str]:
    failures = []
    remaining = list(diagnoses)
    for want in test.expect:
        hit = next(
            (
                d
                for d in remaining
                if d.rule == want.rule
                and d.node == want.node
                and (want.pool is None or d.pool == want.pool)
            ),
            None,
        )
        label = f"{want.rule} on {want.node or want.pool or 'cluster'}"
        if hit is None:
            failures.append(f"expected {label}, it did not fire")
            continue
        remaining.remove(hit)
        if want.stage is not None and hit.stage != want.stage:
            failures.append(f"{label}: stage {hit.stage.value}, expected {want.stage.value}")
        if want.severity is not None and hit.severity != want.severity:
            failures.append(
                f"{label}: severity {hit.severity.value}, expected {want.severity.value}"
            )
        if want.proposals is not None:
            got = [p.action for p in hit.proposals]
            if got != want.proposals:
                wanted = [a.value for a in want.proposals]
                failures.append(f"{label}: proposals {[a.value for a in got]}, expected {wanted}")
        if want.blockers is not None:
            kinds = {b.kind for b in hit.blockers}
            missing = [k for k in want.blockers if k not in kinds]
            if missing:
                failures.append(f"{label}: blockers {sorted(kinds)} lack {missing}")
        text = "\n".join(hit.evidence)
        for needle in want.evidence_contains:
            if needle not in text:
                failures.append(f"{label}: evidence lacks {needle!r}: {hit.evidence}")
    for extra in remaining:
        failures.append(f"unexpected {extra.rule} on {extra.node or extra.pool or 'cluster'}")
    return failures
