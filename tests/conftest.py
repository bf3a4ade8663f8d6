"""Fixtures every test folder shares: default settings, the healthy snapshot with edits, facts
of a snapshot, and a fresh simulated cluster behind the real client."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.config import Settings
from bot.facts.collecting import collect_facts
from bot.facts.snapshots import Snapshot, parse_snapshot
from bot.model import ClusterFacts, Signal
from bot.rules.testing import Edit, apply_edits
from tests.helpers.paths import HEALTHY, NOW


@pytest.fixture
def settings() -> Settings:
    return Settings()


@pytest.fixture
def healthy_raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(HEALTHY.read_text())
    return data


@pytest.fixture
def edited(healthy_raw: dict[str, Any]) -> Callable[..., Snapshot]:
    """The healthy fixture with rule-test style edits applied."""

    def make(*edits: dict[str, Any]) -> Snapshot:
        return parse_snapshot(apply_edits(healthy_raw, [Edit.model_validate(e) for e in edits]))

    return make


@pytest.fixture
def facts_of(settings: Settings) -> Callable[..., ClusterFacts]:
    def make(snapshot: Snapshot, signals: list[Signal] | None = None) -> ClusterFacts:
        return collect_facts(snapshot, signals or [], settings, NOW)

    return make


@pytest.fixture
def sim_cluster() -> Iterator[tuple[Any, Any]]:
    """A fresh simulated GPU cluster (4 GPU nodes) and the real-client adapter talking to it."""
    from bot.kube.cluster import KubeCluster
    from gpusim.apiserver import SimulatedApiServer
    from gpusim.scenarios import healthy_cluster
    from gpusim.state import ClusterState

    store = ClusterState()
    store.load(healthy_cluster(4, datetime.now(UTC))["items"])
    server = SimulatedApiServer(store).start()
    cluster = KubeCluster.for_url(server.url)
    try:
        yield server, cluster
    finally:
        cluster.close()
        server.stop()
