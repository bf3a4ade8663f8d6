"""The Kubernetes client's connections against what gpubot sends at once (issue 31, item 6).

The official Python client speaks HTTP/1.1 through urllib3: one connection per request in
flight, and a pool that keeps `connection_pool_maxsize` of them for the next request (the
client's default is `cpu_count() * 5`: 10 on two cores). A drain evicts its pods from up to
32 threads at once while the watches hold their streams; every connection over the pool's
size is closed when its request ends, with a warning from urllib3 ("Connection pool is
full, discarding connection"), 11 to 24 a drain in the issue, and a new TLS handshake for
the next request. (kubectl drain evicts every pod at once too, but client-go speaks HTTP/2:
all of them share one connection, k8s.io/apimachinery/pkg/util/net/http.go
`configureHTTP2Transport`.)

Through the real client on the simulator, as `gpubot serve` runs: the watches streaming,
then a drain of more pods than it evicts at once.
"""

from __future__ import annotations

import inspect
import logging
from datetime import UTC, datetime

import pytest

from bot.acting.draining import drain
from bot.config import DRAIN_CONCURRENCY
from bot.kube.cluster import KubeCluster
from bot.sources.watches import KubeSignals
from gpusim.apiserver import SimulatedApiServer
from gpusim.objects import owner, pod
from gpusim.resources import BY_KIND
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState

PODS = DRAIN_CONCURRENCY + 4
"""More pods than the drain's threads: every thread has a request in flight at once."""


def test_the_drain_and_the_pool_agree_on_one_number() -> None:
    """`bot.config.DRAIN_CONCURRENCY` is the drain's default and what the pool is sized by;
    a drain that sent more at once than the pool keeps would log the warnings again."""
    assert inspect.signature(drain).parameters["concurrency"].default == DRAIN_CONCURRENCY


def test_a_drain_beside_the_watches_logs_no_discarded_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = datetime.now(UTC)
    state = ClusterState()
    state.load(healthy_cluster(4, now)["items"])
    batch = owner("ReplicaSet", "batch-5d8f7")
    for i in range(PODS):
        name = f"batch-5d8f7-{i:02d}"
        state.create(BY_KIND["Pod"], "ml", pod(name, "ml", "gpu-a1", now, owner_ref=batch))
    server = SimulatedApiServer(state).start()
    cluster = KubeCluster.for_url(server.url)
    watcher = KubeSignals(cluster, lambda _signal: None, watch_timeout_s=5).start()
    try:
        with caplog.at_level(logging.WARNING, logger="urllib3"):
            result = drain(cluster, "gpu-a1", timeout_s=60)
        assert result.completed and not result.stalled
        assert len([p for p in result.evicted if p[1].startswith("batch-")]) == PODS
        full = [r.getMessage() for r in caplog.records if "pool is full" in r.getMessage()]
        assert full == []
    finally:
        for informer in watcher.informers:
            informer.stop()
        cluster.close()
        server.stop()
