"""Drill files: a scenario on the simulated cluster, scripted over time, and what the on-call
must see while it runs.

Why it exists: the runbook's prevention section asks for regular rehearsals of node reboot,
driver rollback and MIG restore, "to prove the documents and the automation really work"; and
a bot is judged by what it says over an hour, not in one pass. A drill states both: the
faults, repairs, alerts (as Alertmanager sends them), approvals by named people and waits,
and the incidents, messages, proposals and outcomes that must follow — in order, in time.

What it must never do: depend on gpubot's internals (a drill names rules, actions, nodes and
texts a person reads, nothing else), or accept a file it cannot run: every field is checked
here, with `file:line` in the error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

from bot.errors import InputError
from bot.model import Action
from bot.rules.loading import validate_model
from bot.yamlfiles import load_located

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|min)?$")


def seconds(value: Any) -> float:
    """A duration as a drill writes it: 20, "20s", "1.5 s", "2m", "300ms"."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = _DURATION.match(str(value).strip())
    if match is None:
        raise ValueError(f"not a duration: {value!r} (say 20s, 2m or 300ms)")
    number, unit = float(match.group(1)), match.group(2) or "s"
    return number * {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0}[unit]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


Seconds = Annotated[float, BeforeValidator(seconds)]
"""A duration in a drill file, in seconds."""


class Fault(_Strict):
    """Make a fault happen (gpusim's faults: xid, ecc-dbe, zero-capacity, ...); the alerts it
    makes Prometheus fire reach the webhook `alert_after` later (Alertmanager's group_wait),
    or never when `alert_after` is null."""

    fault: str
    node: str
    params: dict[str, Any] = Field(default_factory=dict)
    alert_after: Seconds | None = 10.0


class Repair(_Strict):
    """Take a fault away as the components that mend it would; the alerts it had fired
    resolve `alert_after` later (Alertmanager's send_resolved), or never when null."""

    repair: str
    node: str
    params: dict[str, Any] = Field(default_factory=dict)
    alert_after: Seconds | None = 10.0


class Decide(_Strict):
    action: Action
    node: str
    as_: str = Field(alias="as")
    force: bool = False

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Approve(_Strict):
    """A named person approves the open request for this action on this node, as a click
    would on the serving replica."""

    approve: Decide


class Deny(_Strict):
    deny: Decide


class ByHand(_Strict):
    """A person acting outside gpubot: `kubectl cordon NODE` or `kubectl uncordon NODE`."""

    kubectl: Literal["cordon", "uncordon"]
    node: str


class AlertSpec(_Strict):
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    status: Literal["firing", "resolved"] = "firing"
    expr: str | None = None
    """The PromQL that raised it (its generatorURL), when the mapping reads metric names."""


class Alert(_Strict):
    """An alert as another rule set raises it (labels, annotations, expression), POSTed to the
    webhook as Alertmanager sends it: how alerts gpubot did not write are rehearsed."""

    alert: AlertSpec


class Create(_Strict):
    """An object (a Pod, a PodDisruptionBudget, ...) created through the API, as
    `kubectl create -f` would: the API server's defaults apply, the controllers see it."""

    create: dict[str, Any]

    @model_validator(mode="after")
    def _named(self) -> Create:
        meta = self.create.get("metadata")
        if not self.create.get("kind") or not isinstance(meta, dict) or not meta.get("name"):
            raise ValueError("create: needs kind and metadata.name")
        return self


class Wait(_Strict):
    wait: Seconds


_KINDS = ("diagnosis", "proposal", "action", "gate", "resolved", "reoffered", "told", "said")


def _shown(value: Any) -> str:
    return str(value.value) if isinstance(value, Action) else str(value)


class Expectation(_Strict):
    """Something the on-call sees. Exactly one of the kinds; `node` narrows it."""

    diagnosis: str | None = None
    """A diagnosis of this rule posted (or a message revised to it)."""
    proposal: Action | None = None
    """Buttons for this action offered (in a diagnosis, a revision or asked again)."""
    action: Action | None = None
    """This action's result told; `outcome` narrows it (acted, refused, failed, ...)."""
    outcome: str | None = None
    gate: Literal["passed", "failed"] | None = None
    resolved: bool | None = None
    """The node's incident resolved (its summary told)."""
    reoffered: Action | None = None
    """A refused request of this action offered again with new buttons."""
    told: str | None = None
    """What an approver was answered when they clicked: acted, refused, not-allowed, ..."""
    said: str | None = None
    """This text in a message, thread line or notice."""
    node: str | None = None

    @model_validator(mode="after")
    def _one(self) -> Expectation:
        kinds = [k for k in _KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"give exactly one of {', '.join(_KINDS)} (got {kinds or 'none'})")
        if self.outcome is not None and self.action is None:
            raise ValueError("outcome narrows action: give action too")
        return self

    def describe(self) -> str:
        parts = [
            f"{k} {_shown(getattr(self, k))}"
            for k in (*_KINDS, "outcome")
            if getattr(self, k) is not None
        ]
        return " ".join(parts) + (f" on {self.node}" if self.node else "")


class WaitFor(_Strict):
    """Go on once the on-call has seen this, or after `within` (then the check fails)."""

    wait_for: Expectation
    within: Seconds = 60.0


_STEP_KEYS = (
    "fault",
    "repair",
    "alert",
    "approve",
    "deny",
    "kubectl",
    "create",
    "wait_for",
    "wait",
)


def _step_kind(raw: Any) -> str | None:
    """A step is told by its first key (`fault:`, `approve:`, ...), so an error speaks of
    that step's fields, not of every other kind a step could have been."""
    if isinstance(raw, dict):
        return next((k for k in _STEP_KEYS if k in raw), None)
    return next((k for k in _STEP_KEYS if hasattr(raw, k)), None)


Step = Annotated[
    Annotated[Fault, Tag("fault")]
    | Annotated[Repair, Tag("repair")]
    | Annotated[Alert, Tag("alert")]
    | Annotated[Approve, Tag("approve")]
    | Annotated[Deny, Tag("deny")]
    | Annotated[ByHand, Tag("kubectl")]
    | Annotated[Create, Tag("create")]
    | Annotated[WaitFor, Tag("wait_for")]
    | Annotated[Wait, Tag("wait")],
    Discriminator(
        _step_kind,
        custom_error_type="step",
        custom_error_message="a step starts with one of: " + ", ".join(_STEP_KEYS),
    ),
]


class First(_Strict):
    """The first diagnosis posted about the node of the drill's first fault: the right one."""

    rule: str
    proposal: Action | None = None


class Expect(_Strict):
    incidents: int | None = None
    """How many incidents the drill leaves (one problem, one incident)."""
    first: First | None = None
    messages: int | None = None
    """How many diagnosis messages were posted in the channel (revisions are not new
    messages, nor a node's diagnosis posted in its pool-wide incident's thread)."""
    reopened: int | None = None
    """How many reopen cycles, over every incident (a steady problem: 0)."""
    wrong_proposal_window: Seconds | None = None
    """At most this many seconds during which buttons of another action than `first`'s
    proposal could be clicked on that node (0: never)."""
    sequence: list[Expectation] = Field(default_factory=list)
    """What the on-call sees, in this order (other things may come between)."""
    never: list[Expectation] = Field(default_factory=list)
    """What must not happen at any time."""
    digest: list[str] = Field(default_factory=list)
    """Texts the daily digest, taken at the end, must hold."""


class Cluster(_Strict):
    """The simulated pool: `gpu_nodes` 8-GPU nodes gpu-a1, gpu-a2, ... under training jobs."""

    gpu_nodes: int = Field(default=4, ge=1, le=64)
    pods_per_node: int = Field(default=2, ge=1, le=20)
    mig_nodes: list[str] = Field(default_factory=list)
    """Nodes partitioned with MIG (all-1g.10gb) before the drill starts."""


class Drill(_Strict):
    drill: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    about: str
    """What it rehearses, for the person reading the table."""
    cluster: Cluster = Field(default_factory=Cluster)
    settings: dict[str, Any] = Field(default_factory=dict)
    """Settings over the operator's own (`--config`), e.g. shorter windows to compress time."""
    script: list[Step] = Field(min_length=1)
    expect: Expect


def load_drill(path: Path) -> Drill:
    located = load_located(path)
    if not isinstance(located.data, dict):
        raise InputError(str(path), "expected a mapping with drill:, script: and expect:")
    drill: Drill = validate_model(Drill, located.data, located, ())
    return drill


def drill_files(path: Path) -> list[Path]:
    """A drill file, or every `*.yaml` of a folder."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError(str(path), "no such drill file or folder")
    found = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
    if not found:
        raise InputError(str(path), "no drill files (*.yaml) in this folder")
    return found
