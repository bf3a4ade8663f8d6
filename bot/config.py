"""Settings: embedded defaults, overridden by a YAML file, overridden by `GPUBOT_*` env vars.

The defaults are what `gpubot demo` runs on, so they must work with nothing configured.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from bot.errors import InputError
from bot.input_files import Limit
from bot.model import Action, ActionRequest, Lang
from bot.names import CHECKPOINT_ANNOTATION, NAMESPACE, POOL_LABEL
from bot.yamlfiles import load_located

if TYPE_CHECKING:
    from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

ALERTS_FILE = "alerts.yaml"
"""The alert mapping's file name in a rules directory (`bot.rules.loading` skips it)."""

DRAIN_CONCURRENCY = 32
"""How many evictions one drain has in flight at once (`bot.acting.draining.drain`'s
threads), and so how many connections to the API server it uses at once: the Kubernetes
client speaks HTTP/1.1, one connection per request in flight. The client's pool keeps this
many and more (`bot.kube.connecting.KUBE_CONNECTIONS`); a smaller pool closes the rest after
each request, with a urllib3 warning each time. Said once here, below both."""


def bundled_dir(name: str) -> Path:
    """`rules/` or `drills/` beside the package in a checkout; the copy packed into the wheel
    (`bot/_rules`, `bot/_drills`) otherwise."""
    package = Path(__file__).resolve().parent
    for candidate in (package.parent / name, package / f"_{name}"):
        if candidate.is_dir():
            return candidate
    return package.parent / name


def bundled_rules_dir() -> Path:
    return bundled_dir("rules")


class Thresholds(BaseModel):
    """Times are seconds. Each one is a judgement call in the runbook made explicit."""

    model_config = ConfigDict(extra="forbid")

    join_window_s: int = 2 * 3600
    join_grace_s: int = 600
    """A node younger than this is still installing its GPU stack: missing GPUs are normal."""
    not_ready_grace_s: int = 300
    """A node younger than this may be NotReady while its CNI comes up."""
    reboot_window_s: int = 3600
    rejoin_window_s: int = 3600
    drain_stuck_after_s: int = 15 * 60
    crashloop_restarts: int = 5
    crashloop_window_s: int = 600
    """Restarts count as still rising only if the last one ended this recently. kubelet's
    crash-loop back-off tops out at 5 minutes, so a container that has stayed up for twice
    that is no longer looping: its incident can resolve."""
    pending_after_s: int = 5 * 60
    long_grace_s: int = 300
    flap_window_s: int = 6 * 3600
    """A problem back within this long of its resolve reopens the same incident and thread."""
    settle_s: int = 45
    """How long the proposals of a rule that `settles` are held: the alert that says why a GPU
    went missing arrives seconds after the watch saw it go (Alertmanager's group_wait)."""
    resolve_after_s: int = 120
    """A symptom must stay away this long before its incident resolves (hysteresis)."""
    revise_every_s: int = 30
    """An incident's message is revised for a change of what blocks its drain at most once
    in this long (a drain evicting many pods must not edit it at every eviction)."""
    upgrade_stuck_after_s: int = 2 * 3600
    """A driver upgrade state the operator normally leaves in minutes, held longer than this,
    is stuck (the label has no time: see `NodeFacts.upgrade_for_s`)."""
    pool_wide_min_nodes: int = 3
    pool_wide_min_share: float = 0.25


class GpuNodeMarkers(BaseModel):
    """What makes a node a GPU node when its GPU stack is broken and says nothing itself:
    GPU Feature Discovery's `nvidia.com/gpu.*` labels and the `nvidia.com/gpu` capacity are
    written by the stack, so a node whose driver never loaded may have neither. These
    markers do not depend on it (each checked in this order; the first found is said)."""

    model_config = ConfigDict(extra="forbid")

    labels: list[str] = [
        # Node Feature Discovery: an NVIDIA PCI device (vendor 0x10de), with or without its
        # class (0302 3D controller, 0300 VGA); the GPU Operator's must-gather finds GPU
        # nodes by exactly these.
        "feature.node.kubernetes.io/pci-10de.present",
        "feature.node.kubernetes.io/pci-0302_10de.present",
        "feature.node.kubernetes.io/pci-0300_10de.present",
        # Cloud providers' accelerator labels.
        "cloud.google.com/gke-accelerator",
        "k8s.amazonaws.com/accelerator",
        "kubernetes.azure.com/accelerator",
        "karpenter.k8s.aws/instance-gpu-count",
        # The GPU Operator manages the node (deploy labels), whatever its state.
        "nvidia.com/gpu.deploy.*",
    ]
    """Label keys (`*` ends a prefix) whose presence, with a value other than false or 0,
    marks a GPU node."""
    instance_type_labels: list[str] = [
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/instance-type",
    ]
    instance_types: list[str] = [
        r"^(p2|p3|p3dn|p4d|p4de|p5|p5e|p5en|p6|p6e|g3|g3s|g4dn|g5|g6|g6e|gr6|g6f)\.",  # AWS
        r"^Standard_N[CDVG]",  # Azure
        r"^(a2|a3|a4|g2|g4)-",  # Google Cloud
        r"^(BM|VM)\.GPU",  # Oracle Cloud
        r"^gx[23]-",  # IBM Cloud
    ]
    """Regular expressions on the instance type: GPU machine families."""
    taints: list[str] = ["nvidia.com/gpu"]
    """Taint keys GPU node pools carry so only GPU pods land there."""


class ActionPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    users: list[str] = Field(default_factory=list)
    """Chat user ids allowed to approve."""
    groups: list[str] = Field(default_factory=list)
    """User groups whose members may approve (e.g. Slack's `gpu-oncall`)."""
    two_person: bool = False
    allow_self: bool = False
    """May the person who asked also approve?"""


class DenyPolicy(BaseModel):
    """Who may deny any request, besides those who may approve it (and whoever asked)."""

    model_config = ConfigDict(extra="forbid")

    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)


class ApprovalPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cordon: ActionPolicy = Field(default_factory=ActionPolicy)
    drain: ActionPolicy = Field(default_factory=lambda: ActionPolicy(two_person=True))
    uncordon: ActionPolicy = Field(default_factory=ActionPolicy)
    force: ActionPolicy = Field(default_factory=lambda: ActionPolicy(two_person=True))
    """Deleting pods directly (bypassing PodDisruptionBudgets): always its own approvers."""
    uncordon_anyway: ActionPolicy = Field(default_factory=lambda: ActionPolicy(two_person=True))
    """Uncordon although the health gate did not pass."""
    deny: DenyPolicy = Field(default_factory=DenyPolicy)
    """A deny ends a request for good, so it is a decision like an approval: only the people
    who may approve that request, whoever asked for it, and these may deny it."""
    expiry_s: int = 30 * 60

    def for_request(self, request: ActionRequest) -> ActionPolicy:
        if request.action is Action.DRAIN and request.force:
            return self.force
        if request.action is Action.UNCORDON and request.override_gate:
            return self.uncordon_anyway
        return {Action.CORDON: self.cordon, Action.DRAIN: self.drain}.get(
            request.action, self.uncordon
        )


class BlastRadius(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_nodes: int = Field(default=1, ge=0)
    max_share: float = Field(default=0.10, ge=0.0, le=1.0)


class SmokeTestSettings(BaseModel):
    """The health gate's GPU smoke test (runbook step 9, item 2; `bot.gate.smoke_test`):
    a pod on the repaired node lists its GPUs before the uncordon is offered or run."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    """Off by default: it needs an image the nodes can pull and a namespace gpubot may create
    pods in (the Helm chart turns it on and grants that)."""
    image: str = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"
    """A CUDA base image: the NVIDIA runtime mounts nvidia-smi into it (capability `utility`)."""
    namespace: str = NAMESPACE
    timeout_s: float = Field(default=180.0, gt=0)
    """The pod must finish within this (pull, start, nvidia-smi), or the test fails."""
    max_age_s: float = Field(default=600.0, gt=0)
    """A result this recent stands for the node; an older one is run again before it counts."""
    request_all: bool = False
    """Request every expected GPU instead of one with NVIDIA_VISIBLE_DEVICES=all (clusters
    whose runtime ignores that variable in unprivileged pods)."""


class Remediation(BaseModel):
    """Acting on nodes: who approves, how many nodes may be out at once, dry-run."""

    model_config = ConfigDict(extra="forbid")

    approvals: ApprovalPolicy = Field(default_factory=lambda: ApprovalPolicy())
    blast_radius: BlastRadius = Field(default_factory=lambda: BlastRadius())
    dry_run: bool = False
    """Everything but the writes; the timeline says what would have run."""
    checkpoint_annotation: str = CHECKPOINT_ANNOTATION
    """The pod annotation where training jobs record their last checkpoint (RFC 3339)."""
    checkpoint_max_age_s: int = 30 * 60
    drain_timeout_s: float = 15 * 60
    execution_stale_s: float = Field(default=60.0, gt=0)
    """A running action's owner renews its heartbeat every third of this; an execution whose
    heartbeat is older is taken over by the leader (its owner died or lost the lease)."""
    maintenance_taint: bool = True
    smoke_test: SmokeTestSettings = Field(default_factory=lambda: SmokeTestSettings())


class ServeSettings(BaseModel):
    """`gpubot serve`: where it listens and what it trusts."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    """The address to listen on. Loopback by default: a bare `gpubot serve` on a laptop or a
    shared host is not reachable from elsewhere until someone decides it should be. In a
    container, listen on every address (`0.0.0.0`): the Helm chart sets it
    (`helm/gpubot/templates/_helpers.tpl`); with plain `docker run`/`podman run`, set
    `GPUBOT_SERVE__HOST=0.0.0.0`. See docs/hardening.md."""
    port: int = Field(default=8080, ge=0, le=65535)
    bearer_token: SecretStr | None = None
    """The webhook's token (`GPUBOT_SERVE__BEARER_TOKEN`); or read from `bearer_token_file`."""
    bearer_token_file: Path | None = None
    metrics_token: SecretStr | None = None
    """When set, `/metrics` asks for `Authorization: Bearer <token>` (Prometheus'
    `authorization` in its scrape config); open when unset. `/healthz` and `/readyz` stay
    open for probes: they say nothing of where anything is."""
    max_body_bytes: int = Field(default=1024 * 1024, gt=0)
    header_timeout_s: float = Field(default=10.0, gt=0)
    """A connection must send a request's headers within this (of opening, or of the last
    response), or it is closed."""
    body_timeout_s: float = Field(default=10.0, gt=0)
    """A request body not complete within this is answered 408 and its connection closed."""
    keep_alive_s: int = Field(default=5, gt=0)
    """An idle kept-alive connection is closed after this."""
    store_deadline_s: float = Field(default=5.0, gt=0)
    """A webhook delivery the store has not committed within this is answered 503 with
    Retry-After (Alertmanager sends it again) instead of waiting behind a lock."""
    kube_timeout_s: float = Field(default=10.0, gt=0)
    """Each Kubernetes API request's timeout (connect and read; watches read longer)."""
    kube_probe_ttl_s: float = Field(default=5.0, ge=0)
    """`/readyz` asks the Kubernetes API (`GET /version`) at most this often."""
    identity: str | None = None
    """This replica's name in the leader Lease; defaults to the host name and process id."""
    lease_namespace: str = NAMESPACE
    lease_name: str = "gpubot-leader"
    lease_duration_s: float = Field(default=15.0, gt=0)
    renew_deadline_s: float = Field(default=10.0, gt=0)
    retry_period_s: float = Field(default=2.0, gt=0)

    def token(self) -> str | None:
        if self.bearer_token is not None:
            return self.bearer_token.get_secret_value()
        if self.bearer_token_file is not None:
            try:
                return self.bearer_token_file.read_text().strip() or None
            except OSError as exc:
                raise InputError("serve.bearer_token_file", str(exc)) from exc
        return None


class PrometheusSettings(BaseModel):
    """Where DCGM evidence comes from; no URL means no Prometheus evidence."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    node_label: str = "Hostname"
    window_s: int = Field(default=30 * 60, gt=0)
    timeout_s: float = Field(default=3.0, gt=0)


class ScheduleSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    leader_duties_s: float = Field(default=2.0, gt=0)
    expiry_s: float = Field(default=30.0, gt=0)
    sweep_s: float = Field(default=300.0, gt=0)
    drain_watchdog_s: float = Field(default=60.0, gt=0)
    follow_up_s: float = Field(default=5.0, gt=0)
    """How often the leader looks at what time alone changes: held proposals, problems gone
    long enough to resolve, refusals whose reason cleared, repaired nodes to put back."""
    misfire_grace_s: int = Field(default=60, gt=0)
    digest_at: str | None = "09:00"
    """Wall-clock time ("HH:MM") of the daily digest in `digest_tz`; null turns it off."""
    digest_tz: str = "UTC"
    """An IANA time zone, e.g. Asia/Shanghai: the digest keeps its local time across DST."""


class SlackSettings(BaseModel):
    """What the Slack adapter needs (`GPUBOT_SLACK__*`). Secrets never show in a repr. Slack
    is on when `bot_token` is set; without it `gpubot serve` posts to its log (console).

    `mode`: `http` when Slack can reach gpubot (`/slack/events`, signed requests); `socket`
    behind a firewall (an app-level `xapp-` token, no public endpoint)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["http", "socket"] = "http"
    bot_token: SecretStr | None = None
    """`xoxb-...`: chat:write, commands, usergroups:read."""
    signing_secret: SecretStr | None = None
    """Basic Information → Signing Secret: required in `http` mode."""
    app_token: SecretStr | None = None
    """`xapp-...` with connections:write: required in `socket` mode."""
    channel: str = ""
    """Channel id (C...) where diagnoses go; the bot must be a member."""
    command: str = "/gpubot"
    api_url: str = "https://slack.com/api/"
    """The Web API base; tests point it at the Slack double."""
    groups_ttl_s: float = Field(default=60.0, gt=0)
    snooze_s: int = Field(default=3600, gt=0)
    max_body_bytes: int = Field(default=256 * 1024, gt=0)
    timeout_s: int = Field(default=10, gt=0)
    """Each Slack Web API call's timeout (the outbox tries again later)."""


class InputLimits(BaseModel):
    """How large a file handed to a command may be, by kind, in MiB: one over its limit is
    refused at once, in one line naming the setting that raises it (`bot.input_files`).

    Why limits: people diagnose files other people send them, and the readers hold many times
    a file's size (PyYAML some 42 bytes a byte, at about 2 MiB of YAML a CPU second); a
    file big enough to take the machine is refused before it is parsed. Each default is set
    against the real inputs of its kind and what reading them costs (docs/hardening.md,
    "Files handed over")."""

    model_config = ConfigDict(extra="forbid")

    snapshot_mib: int = Field(default=1024, gt=0)
    """A JSON snapshot (kubectl -o json: a file, or standard input). The 5,000-node fleet of
    `benchmarks/fleet.py` (Kubernetes' largest supported cluster size) is 291 MiB, read
    memory-mapped at under twice its size."""
    yaml_snapshot_mib: int = Field(default=32, gt=0)
    """A YAML snapshot: the 500-node fleet is 30 MiB as YAML. kubectl's JSON of the same
    objects is read in a fraction of the memory; the refusal says so."""
    alerts_mib: int = Field(default=16, gt=0)
    """An `--alerts` file (read as YAML, so JSON costs as YAML does): 50,000 alerts are 10.2
    MiB."""
    must_gather_file_mib: int = Field(default=32, gt=0)
    """Each file of a must-gather folder (its YAML, describe text, pod logs); the operand
    pods' YAML grows by some 40 KB a GPU node (about eight pods of 5 KB: an estimate, the
    fixtures in tests/data are trimmed), so this holds some 800 GPU nodes."""
    kernel_log_mib: int = Field(default=256, gt=0)
    """A `--kernel-log`, or a must-gather's bug report, as its text once unpacked (a gzip
    member is unpacked only up to this)."""

    def snapshot(self) -> Limit:
        return Limit("snapshot", self.snapshot_mib, "limits.snapshot_mib")

    def yaml_snapshot(self) -> Limit:
        return Limit(
            "yaml_snapshot",
            self.yaml_snapshot_mib,
            "limits.yaml_snapshot_mib",
            "input.hint.yaml_snapshot",
        )

    def alerts(self) -> Limit:
        return Limit("alerts", self.alerts_mib, "limits.alerts_mib")

    def must_gather_file(self) -> Limit:
        return Limit("must_gather_file", self.must_gather_file_mib, "limits.must_gather_file_mib")

    def kernel_log(self) -> Limit:
        return Limit("kernel_log", self.kernel_log_mib, "limits.kernel_log_mib")


ENV_PREFIX = "GPUBOT_"


class Settings(BaseModel):
    """Every setting with its embedded default. A plain model: `load_settings` layers the
    file and the environment on it with pydantic-settings, imported only when there is a
    file or a `GPUBOT_*` variable to read (it alone imports asyncio, argparse and dotenv:
    about 0.05 s of CPU, an eighth of a 50-node `gpubot diagnose`)."""

    # Defaults are validated, as pydantic-settings validates them.
    model_config = ConfigDict(extra="forbid", validate_default=True)

    lang: Lang = Lang.EN
    cluster: str = "default"
    rules_dir: Path = Field(default_factory=bundled_rules_dir)
    node_labels: list[str] = ["node", "kubernetes_node", "Hostname", "hostname", "instance"]
    """Alert labels that name the node, first match wins; `instance` loses its port. The
    alert mapping (`alerts_file`) names them per rule set: left as shipped, these are tried
    after the mapping's `defaults.node_labels`; set to anything else, before them (an
    entry's own `node_labels` replaces both)."""
    alerts_file: Path | None = None
    """The alert mapping: which alert names, expression metrics and labels mean which symptom,
    node, GPU and Xid code (docs/alerts.md). None: `alerts.yaml` in `rules_dir`, else the
    shipped one. Copy the shipped file to change it: a file given here replaces it whole."""
    pool_labels: list[str] = [
        POOL_LABEL,
        "karpenter.sh/nodepool",
        "cloud.google.com/gke-nodepool",
        "eks.amazonaws.com/nodegroup",
        "kubernetes.azure.com/agentpool",
        "node.kubernetes.io/instance-type",
    ]
    gpu_resource: str = "nvidia.com/gpu"
    gpu_nodes: GpuNodeMarkers = Field(default_factory=GpuNodeMarkers)
    operator_namespaces: list[str] = [
        "gpu-operator",
        "nvidia-gpu-operator",
        "gpu-operator-resources",
        "kube-system",
        "nvidia-device-plugin",
    ]
    """Where GPU components usually live: the GPU Operator's namespace (Helm's convention,
    OpenShift's, operator 1.x's operands) and the standalone device plugin's. Components are
    recognised by what they are in any namespace; these name the namespace in a runbook
    command when no pod of the component is on the node to take it from."""
    thresholds: Thresholds = Field(default_factory=Thresholds)
    remediation: Remediation = Field(default_factory=Remediation)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    schedule: ScheduleSettings = Field(default_factory=ScheduleSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    store_url: str = "sqlite:///gpubot.db"
    """SQLite (a file) by default; postgresql://... for production and replicas."""
    limits: InputLimits = Field(default_factory=InputLimits)
    """How large a file handed to `gpubot diagnose` or `alerts explain` may be, by kind."""

    def alert_mapping_file(self) -> Path:
        """The alert mapping to use: `alerts_file`, else the rules directory's, else the
        shipped one."""
        if self.alerts_file is not None:
            return self.alerts_file
        beside_rules = self.rules_dir / ALERTS_FILE
        return beside_rules if beside_rules.is_file() else bundled_rules_dir() / ALERTS_FILE


CONFIG_ENV = "GPUBOT_CONFIG"
"""The settings file when `--config` is not given."""


def default_settings_file() -> Path:
    """Where `gpubot init` writes the settings and every command looks last:
    `$XDG_CONFIG_HOME/gpubot/settings.yaml`, else `~/.config/gpubot/settings.yaml`."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpubot" / "settings.yaml"


def settings_file(given: Path | None = None) -> Path | None:
    """The settings file every command reads, found the same way by all of them: `--config`,
    then `GPUBOT_CONFIG`, then the default file when it exists; None: the embedded defaults.
    A file named on purpose (the first two) that is missing is an error, not the defaults."""
    if given is not None:
        return given
    named = os.environ.get(CONFIG_ENV)
    if named:
        return Path(named)
    default = default_settings_file()
    return default if default.is_file() else None


def load_settings(path: Path | None = None, **overrides: Any) -> Settings:
    """Settings from a YAML file (if given) under `GPUBOT_*` env vars and explicit overrides."""
    if path is None and not any(name.upper().startswith(ENV_PREFIX) for name in os.environ):
        # Nothing to layer on the defaults (pydantic-settings reads names in any case).
        return Settings(**overrides)
    if path is None:
        return _sourced()(**overrides)
    if not path.is_file():
        raise InputError(str(path), "no such settings file")
    raw = load_located(path).data
    if raw is not None and not isinstance(raw, dict):
        raise InputError(str(path), "expected a mapping of settings")

    from pydantic_settings import SettingsConfigDict

    class FileSettings(_sourced()):  # type: ignore[misc]  # a class made at run time
        model_config = SettingsConfigDict(yaml_file=path)

    return FileSettings(**overrides)


@cache
def _sourced() -> type[Settings]:
    """`Settings` read from `GPUBOT_*` environment variables and the YAML file its subclass
    names, under explicit arguments."""
    from pydantic_settings import BaseSettings, SettingsConfigDict, YamlConfigSettingsSource

    class SourcedSettings(BaseSettings, Settings):
        model_config = SettingsConfigDict(
            env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid"
        )

        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            # Explicit arguments beat the environment, which beats the YAML file.
            return (init_settings, env_settings, YamlConfigSettingsSource(settings_cls))

    return SourcedSettings
