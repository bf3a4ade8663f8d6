"""What a rule file may contain. Unknown fields are errors: a typo must not silently disable
half a rule. Every text a person reads exists in both languages."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.model import Action, Lang, Severity, Stage


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Text(_Strict):
    zh: str = Field(min_length=1)
    en: str = Field(min_length=1)

    def __call__(self, lang: Lang) -> str:
        return self.zh if lang is Lang.ZH else self.en


class TextList(_Strict):
    zh: list[str] = Field(min_length=1)
    en: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _same_length(self) -> TextList:
        if len(self.zh) != len(self.en):
            raise ValueError(f"zh has {len(self.zh)} items but en has {len(self.en)}")
        return self

    def __call__(self, lang: Lang) -> list[str]:
        return self.zh if lang is Lang.ZH else self.en


class RunbookStepSpec(_Strict):
    text: Text
    commands: list[str] = Field(default_factory=list)


class ProposalSpec(_Strict):
    action: Action
    when: str | None = None
    """CEL: propose this action only when true; absent means always."""
    force: bool = False


class SeverityOverride(_Strict):
    when: str
    severity: Severity


class ExpectedSpec(_Strict):
    """Stages in which the symptom is the planned effect of a change: report, never alarm."""

    stages: list[Stage] = Field(min_length=1)
    note: Text


class Rule(_Strict):
    id: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    scope: Literal["node", "pool", "cluster"] = "node"
    stages: list[Stage | Literal["any"]] = Field(min_length=1)
    stage: Stage | None = None
    """The stage reported by pool and cluster rules, which have no single node."""
    severity: Severity
    severity_overrides: list[SeverityOverride] = Field(default_factory=list)
    variables: dict[str, str] = Field(default_factory=dict)
    """Named CEL expressions over the standard variables, evaluated once per subject and
    read as `variables.NAME` by the rule's other expressions (as in Kubernetes'
    ValidatingAdmissionPolicy): one definition instead of the same filter six times."""
    when: str = Field(min_length=1)
    after_node_rules: bool = False
    """Evaluate after the other node rules, with `findings` holding the ids that fired."""
    halts_node_remediation: bool = False
    """A pool rule that, when it fires, withdraws node proposals for `pool.widespread` rules."""
    expected: ExpectedSpec | None = None
    suppressed_by: list[str] = Field(default_factory=list)
    """Rule ids that explain this symptom better: when one fires on the same subject, this
    rule's diagnosis is dropped (e.g. capacity short after Xid 79 is the fell-off-bus story),
    and an open incident of this rule is superseded in place by theirs."""
    same_problem_as: list[str] = Field(default_factory=list)
    """Rule ids that tell the same problem from another angle (a pending pod, with or without
    an eviction behind it): an open incident of one carries on as the other."""
    settles: bool = False
    """A better-informed diagnosis often follows this one (the watch sees the lost GPU before
    the alert saying why arrives): its proposals are held for `thresholds.settle_s`."""
    evidence: list[str] = Field(default_factory=list)
    """CEL expressions, each giving a string or a list of strings."""
    blockers: str | None = None
    """CEL expression giving the node's blockers to list (e.g. `node.blockers`)."""
    title: Text
    diagnosis: Text
    causes: TextList
    check_first: Text
    runbook: list[RunbookStepSpec] = Field(min_length=1)
    rollback: Text
    proposals: list[ProposalSpec] = Field(min_length=1)

    @field_validator("variables")
    @classmethod
    def _identifiers(cls, variables: dict[str, str]) -> dict[str, str]:
        for name in variables:
            if not name.isidentifier():
                raise ValueError(f"variable name {name!r} is not an identifier")
        return variables

    @field_validator("stages")
    @classmethod
    def _any_alone(cls, stages: list[Stage | str]) -> list[Stage | str]:
        if "any" in stages and len(stages) > 1:
            raise ValueError("'any' cannot be combined with other stages")
        return stages

    def applies_in(self, stage: Stage) -> bool:
        return (
            "any" in self.stages
            or stage in self.stages
            or bool(self.expected and stage in self.expected.stages)
        )


class XidEntry(_Strict):
    codes: list[int] = Field(min_length=1)
    family: Literal["generic", "ecc", "nvlink", "bus"] = "generic"
    """Which story the Xid belongs to: ecc (gpu-ecc-error while an ECC alert fires), nvlink
    (nvlink-error), bus (gpu-fell-off-bus), generic (gpu-xid-error)."""
    meaning: Text
    action: Text
    proposal: Action
    severity: Severity
    fatal: bool = False
    """Treated as fatal by EKS node repair."""
    marks_unhealthy: bool = True
    """The device plugin marks the GPU unhealthy (it skips 13, 31, 43, 45, 68, 109)."""


class UnknownXid(_Strict):
    meaning: Text
    action: Text
    proposal: Action
    severity: Severity


class XidCatalog(_Strict):
    entries: list[XidEntry] = Field(min_length=1)
    unknown: UnknownXid


class RuleFile(_Strict):
    rules: list[Rule] = Field(default_factory=list)
    xid_catalog: XidCatalog | None = None
