"""Settings: embedded defaults, overridden by a YAML file, overridden by `GPUBOT_*` env vars.

The defaults are what `gpubot demo` runs on, so they must work with nothing configured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from bot.errors import InputError
from bot.model import Lang
from bot.yamlfiles import load_located


def bundled_rules_dir() -> Path:
    """`rules/` beside the package in a checkout; the copy packed into the wheel otherwise."""
    package = Path(__file__).resolve().parent
    for candidate in (package.parent / "rules", package / "_rules"):
        if candidate.is_dir():
            return candidate
    return package.parent / "rules"


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
    crashloop_window_s: int = 3600
    """Restarts count as still rising only if the last one ended this recently."""
    pending_after_s: int = 5 * 60
    long_grace_s: int = 300
    flap_window_s: int = 6 * 3600
    pool_wide_min_nodes: int = 3
    pool_wide_min_share: float = 0.25


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="GPUBOT_", env_nested_delimiter="__", extra="forbid"
    )

    lang: Lang = Lang.EN
    cluster: str = "default"
    rules_dir: Path = Field(default_factory=bundled_rules_dir)
    node_labels: list[str] = ["node", "kubernetes_node", "Hostname", "hostname", "instance"]
    """Alert labels that name the node, first match wins; `instance` loses its port."""
    pool_labels: list[str] = [
        "gpubot.io/pool",
        "karpenter.sh/nodepool",
        "cloud.google.com/gke-nodepool",
        "eks.amazonaws.com/nodegroup",
        "kubernetes.azure.com/agentpool",
        "node.kubernetes.io/instance-type",
    ]
    gpu_resource: str = "nvidia.com/gpu"
    operator_namespaces: list[str] = ["gpu-operator", "gpu-operator-resources", "kube-system"]
    thresholds: Thresholds = Field(default_factory=Thresholds)

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


def load_settings(path: Path | None = None, **overrides: Any) -> Settings:
    """Settings from a YAML file (if given) under `GPUBOT_*` env vars and explicit overrides."""
    if path is None:
        return Settings(**overrides)
    if not path.is_file():
        raise InputError(str(path), "no such settings file")
    raw = load_located(path).data
    if raw is not None and not isinstance(raw, dict):
        raise InputError(str(path), "expected a mapping of settings")

    class FileSettings(Settings):
        model_config = SettingsConfigDict(yaml_file=path)

    return FileSettings(**overrides)
