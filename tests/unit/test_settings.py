from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import Settings, load_settings
from bot.model import Lang


def test_embedded_defaults_work_with_nothing_configured() -> None:
    settings = Settings()
    assert settings.lang is Lang.EN
    assert settings.node_labels[0] == "node" and settings.node_labels[-1] == "instance"
    assert settings.pool_labels[0] == "gpubot.io/pool"
    assert (settings.rules_dir / "gpu-stack.yaml").is_file()


def test_env_beats_the_yaml_file_and_arguments_beat_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "gpubot.yaml"
    config.write_text("lang: zh\ncluster: prod-a\nthresholds:\n  drain_stuck_after_s: 60\n")
    assert load_settings(config).lang is Lang.ZH
    assert load_settings(config).thresholds.drain_stuck_after_s == 60
    monkeypatch.setenv("GPUBOT_CLUSTER", "from-env")
    monkeypatch.setenv("GPUBOT_THRESHOLDS__CRASHLOOP_RESTARTS", "9")
    settings = load_settings(config)
    assert settings.cluster == "from-env" and settings.thresholds.crashloop_restarts == 9
    assert load_settings(config, cluster="explicit").cluster == "explicit"


def test_unknown_setting_is_rejected(tmp_path: Path) -> None:
    config = tmp_path / "gpubot.yaml"
    config.write_text("langauge: zh\n")
    with pytest.raises(ValueError, match="langauge"):
        load_settings(config)
