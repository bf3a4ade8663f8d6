"""GPU evidence from a real Prometheus (Debian's 2.42) scraping the simulator's dcgm-exporter.

One Prometheus serves the module: every simulated GPU node is its own scrape target (label
`instance` = node name, as a relabeling would set), a second simulated cluster's exporter
adds the node name under `kubernetes_node`, and a settable text exporter serves the
dcgm-exporter series the simulator does not (the `DCGM_EXP_XID_ERRORS_*` family, an Xid
gauge reading 79). Each fault lands on its own node, so tests do not see each other's.
Nothing sleeps: a test polls the evidence until Prometheus has scraped what it injected.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from bot.errors import PermanentError, TemporaryError
from bot.facts.gpu_metrics import (
    GpuEvidence,
    GpuMetrics,
    XidSeen,
    build_queries,
    gather_gpu_evidence,
    promql_string,
    xid_facts,
)
from bot.facts.metric_lines import lines
from bot.model import Lang
from bot.ports import Sample
from bot.prom.client import PrometheusMetrics
from gpusim.exporter import DcgmExporterServer, running
from gpusim.faults import inject
from gpusim.metrics import gpu_uuid, set_temperature
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState
from tests.helpers.servers import (
    AlertmanagerServer,
    PrometheusServer,
    Target,
    TextExporter,
    alertmanager_server,
    free_port,
    prometheus_server,
    requires_alertmanager,
    requires_prometheus,
    text_exporter,
)

WINDOW = 300
UP_LABEL = "instance"
STATIC_NODE = "gpu-x1"
STATIC_UUID = "GPU-00000000-0000-0000-0000-000000000079"

pytestmark = [requires_prometheus, requires_alertmanager]

WATCHDOG_RULES = """
groups:
  - name: wiring
    rules:
      - alert: Watchdog
        expr: vector(1)
        labels: {severity: none, node: gpu-a1}
"""
ALERTMANAGER_CONFIG = """
route: {receiver: blackhole, group_wait: 0s, group_interval: 1s}
receivers: [{name: blackhole}]
"""


def static_text(xid: int = 0, count: int | None = None) -> str:
    """One GPU of `gpu-x1` as dcgm-exporter serves it, with the exporter's own Xid metrics
    when `count` is given."""
    labels = f'gpu="0",UUID="{STATIC_UUID}",device="nvidia0",Hostname="{STATIC_NODE}"'
    text = [
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge",
        f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {xid}",
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge",
        f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 55",
    ]
    if count is not None:
        text += [
            "# TYPE DCGM_EXP_XID_ERRORS_COUNT gauge",
            f'DCGM_EXP_XID_ERRORS_COUNT{{{labels},xid="{xid}"}} {count}',
        ]
    return "\n".join(text) + "\n"


# ---- the servers, once per module ----------------------------------------------------------


@pytest.fixture(scope="module")
def store() -> ClusterState:
    fresh = ClusterState()
    fresh.load(healthy_cluster(6, datetime.now(UTC))["items"])
    return fresh


@pytest.fixture(scope="module")
def other_store() -> ClusterState:
    fresh = ClusterState()
    fresh.load(healthy_cluster(1, datetime.now(UTC), prefix="gpu-b")["items"])
    return fresh


@pytest.fixture(scope="module")
def exporter(store: ClusterState) -> Iterator[DcgmExporterServer]:
    with running(store) as server:
        yield server


@pytest.fixture(scope="module")
def relabeled(other_store: ClusterState) -> Iterator[DcgmExporterServer]:
    with running(other_store, node_label="kubernetes_node") as server:
        yield server


@pytest.fixture(scope="module")
def static() -> Iterator[TextExporter]:
    with text_exporter(static_text()) as server:
        yield server


@pytest.fixture(scope="module")
def alertmanager() -> Iterator[AlertmanagerServer]:
    with alertmanager_server(ALERTMANAGER_CONFIG) as server:
        yield server


@pytest.fixture(scope="module")
def prom(
    store: ClusterState,
    exporter: DcgmExporterServer,
    relabeled: DcgmExporterServer,
    static: TextExporter,
    alertmanager: AlertmanagerServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[PrometheusServer]:
    """Also evaluates a rule and sends to an Alertmanager: the fixtures' wiring, checked
    here at no extra start-up cost."""
    rules = tmp_path_factory.mktemp("rules") / "watchdog.yaml"
    rules.write_text(WATCHDOG_RULES)
    targets = [Target(exporter.node_url(f"gpu-a{i}"), {UP_LABEL: f"gpu-a{i}"}) for i in range(1, 7)]
    targets.append(
        Target(relabeled.node_url("gpu-b1"), {UP_LABEL: "gpu-b1"}, job="dcgm-exporter-relabeled")
    )
    targets.append(Target(static.url + "/metrics", {UP_LABEL: STATIC_NODE}, job="dcgm-static"))
    with prometheus_server(targets, [rules], alertmanager.url) as server:
        yield server


@pytest.fixture(scope="module")
def metrics(prom: PrometheusServer) -> Iterator[PrometheusMetrics]:
    with PrometheusMetrics(prom.url) as adapter:
        yield adapter


def gather(metrics: PrometheusMetrics, node: str, **kwargs: object) -> GpuEvidence:
    kwargs.setdefault("target_node_label", UP_LABEL)
    return gather_gpu_evidence(metrics, node, WINDOW, **kwargs)  # type: ignore[arg-type]


def eventually(
    metrics: PrometheusMetrics,
    node: str,
    holds: Callable[[GpuEvidence], bool],
    timeout_s: float = 15.0,
    **kwargs: object,
) -> GpuEvidence:
    """The node's evidence, asked again until `holds` (Prometheus scrapes every second)."""
    deadline = time.monotonic() + timeout_s
    while True:
        evidence = gather(metrics, node, **kwargs)
        assert evidence.available, evidence.unavailable_reason
        if holds(evidence):
            return evidence
        assert time.monotonic() < deadline, f"never held; last evidence: {evidence!r}"
        time.sleep(0.2)


def gpu(evidence: GpuEvidence, index: int) -> GpuMetrics:
    found = evidence.gpu(index)
    assert found is not None, f"no GPU {index} in {evidence!r}"
    return found


def near(moment: datetime | None, since: datetime, slack_s: float = 10.0) -> bool:
    return moment is not None and since - timedelta(seconds=3) <= moment <= since + timedelta(
        seconds=slack_s
    )


# ---- a healthy node, faults ------------------------------------------------------------------


def test_a_healthy_node_shows_nothing_wrong(metrics: PrometheusMetrics) -> None:
    evidence = gather(metrics, "gpu-a1")
    assert evidence.available and evidence.unavailable_reason == ""
    assert evidence.exporter_up is True and evidence.exporter_target_found
    assert [g.gpu for g in evidence.gpus] == [str(i) for i in range(8)]
    assert evidence.not_exported == ()
    for g in evidence.gpus:
        assert g.uuid == gpu_uuid("gpu-a1", int(g.gpu))
        assert g.reporting and g.xids == ()
        assert g.ecc_dbe_increase == g.ecc_sbe_increase == 0
        assert g.ecc_dbe_total == 0 and g.remapped_rows_uncorrectable == 0
        assert g.row_remap_failure is False
        assert g.nvlink_errors_increase == 0
        assert g.temperature_max_c is not None and 40 <= g.temperature_max_c <= 75
        assert g.power_w is not None and 250 <= g.power_w <= 400
        assert g.power_max_w == g.power_w
    assert xid_facts(evidence) == []
    en = lines(evidence, Lang.EN)
    assert en[0].startswith("gpu-a1: 8 GPU(s) reporting, hottest ")
    assert en[1:] == ["no Xid, ECC, row-remap or NVLink errors in the last 5 min"]
    zh = lines(evidence, Lang.ZH)
    assert zh[0].startswith("gpu-a1：8 块 GPU 在上报") and zh[1].startswith("最近 5 分钟内没有 Xid")


def test_double_bit_ecc_errors_and_row_remap_failure(
    store: ClusterState, metrics: PrometheusMetrics
) -> None:
    node = "gpu-a2"
    gather(metrics, node)  # the zeros are scraped already: the module fixture waited for it
    injected = datetime.now(UTC)
    inject(store, "ecc-dbe", node, injected, gpu=5)
    inject(store, "ecc-dbe", node, injected, gpu=5)
    inject(store, "xid", node, injected, code=64, gpu=2)
    evidence = eventually(
        metrics,
        node,
        lambda e: (
            gpu(e, 5).ecc_dbe_increase == 2
            and gpu(e, 2).row_remap_failure is True
            and all(x.first_seen for _, x in e.xids)
        ),
    )
    five = gpu(evidence, 5)
    assert five.ecc_dbe_total == 2 and five.remapped_rows_uncorrectable == 2
    assert five.ecc_sbe_increase == 0
    assert [x.code for x in five.xids] == [48]  # the driver logs a DBE as Xid 48
    assert near(five.xids[0].first_seen, injected) and not five.xids[0].already_set
    assert [x.code for x in gpu(evidence, 2).xids] == [64]
    for g in evidence.gpus:
        if g.gpu not in ("2", "5"):
            assert g.xids == () and g.ecc_dbe_increase == 0 and not g.row_remap_failure
    assert {(f.gpu, f.code, f.source) for f in xid_facts(evidence)} == {
        ("2", 64, "prometheus"),
        ("5", 48, "prometheus"),
    }
    en = lines(evidence, Lang.EN)
    assert "GPU 5: ECC DBE +2 in 5 min (total 2)" in en
    assert "GPU 5: 2 row(s) remapped for uncorrectable errors" in en
    assert "GPU 2: row remapping failed" in en
    # The simulator also serves the exporter's Xid count, which adds ", N× counted".
    assert any(line.startswith("GPU 5: Xid 48 at ") and (" UTC" in line) for line in en)
    assert not any(line.startswith("no Xid") for line in en)
    assert "GPU 5：ECC DBE 在 5 分钟内 +2（累计 2）" in lines(evidence, Lang.ZH)


def test_nvlink_errors_increase(store: ClusterState, metrics: PrometheusMetrics) -> None:
    node = "gpu-a3"
    inject(store, "nvlink", node, datetime.now(UTC), gpu=4, errors=250)
    evidence = eventually(metrics, node, lambda e: gpu(e, 4).nvlink_crc_flit_increase == 250)
    four = gpu(evidence, 4)
    assert four.nvlink_replay_increase == 25
    assert four.nvlink_crc_data_increase == four.nvlink_recovery_increase == 0
    assert four.nvlink_errors_increase == 275
    assert four.xids == () and four.ecc_dbe_increase == 0
    assert all(g.nvlink_errors_increase == 0 for g in evidence.gpus if g.gpu != "4")
    en = lines(evidence, Lang.EN)
    assert "GPU 4: NVLink errors +275 in 5 min (CRC flit +250, replay +25)" in en
    assert "GPU 4：NVLink 错误在 5 分钟内 +275（CRC flit +250，replay +25）" in lines(
        evidence, Lang.ZH
    )


def test_a_gpu_that_fell_off_the_bus_stops_reporting(
    store: ClusterState, metrics: PrometheusMetrics
) -> None:
    """The simulator's Xid 79 removes the GPU's device reads (DCGM cannot read it) but keeps
    its Xid gauge, as dcgm-exporter does: the evidence is the GPU going silent with Xid 79."""
    node = "gpu-a4"
    injected = datetime.now(UTC)
    inject(store, "xid", node, injected, code=13, gpu=1)
    inject(store, "xid", node, injected, code=79, gpu=6)
    evidence = eventually(
        metrics,
        node,
        lambda e: (
            not gpu(e, 6).reporting
            and bool(gpu(e, 6).xids)
            and bool(gpu(e, 1).xids)
            and gpu(e, 1).xids[0].first_seen is not None
        ),
    )
    six = gpu(evidence, 6)
    assert near(six.last_seen, injected)
    assert six.uuid == gpu_uuid(node, 6)
    assert [x.code for x in six.xids] == [79]
    assert evidence.exporter_up is True
    assert [g.gpu for g in evidence.gpus if not g.reporting] == ["6"]
    assert gpu(evidence, 1).xids[0].code == 13
    en = lines(evidence, Lang.EN)
    assert any(line.startswith("GPU 6: stopped reporting at ") for line in en)
    assert any(line.startswith("GPU 6: Xid 79 at ") for line in en)
    assert any(line.startswith("GPU 1: Xid 13 at ") for line in en)
    assert en[-1].startswith("gpu-a4: 7 GPU(s) reporting")


def test_xid_79_and_the_exporters_xid_count(
    static: TextExporter, metrics: PrometheusMetrics
) -> None:
    """dcgm-exporter's own `DCGM_EXP_XID_ERRORS_COUNT` (label `xid`) and an Xid gauge
    reading 79, from the settable exporter."""
    evidence = gather(metrics, STATIC_NODE)
    assert gpu(evidence, 0).xids == ()
    set_at = datetime.now(UTC)
    static.set(static_text(xid=79, count=1))
    evidence = eventually(
        metrics,
        STATIC_NODE,
        lambda e: bool(e.xids) and e.xids[0][1].count == 1 and e.xids[0][1].first_seen is not None,
    )
    ((index, seen),) = evidence.xids
    assert index == "0" and seen.code == 79 and not seen.already_set
    assert near(seen.first_seen, set_at)
    assert gpu(evidence, 0).uuid == STATIC_UUID
    assert seen.first_seen is not None
    clock = f"{seen.first_seen:%H:%M} UTC"
    assert f"GPU 0: Xid 79 at {clock}, 1× counted" in lines(evidence, Lang.EN)
    assert f"GPU 0：{clock} 出现 Xid 79，计数 1 次" in lines(evidence, Lang.ZH)
    # Fields the text leaves out are reported as not exported, not as zero.
    assert evidence.not_exported == ("ecc", "nvlink", "remapped_rows")
    assert gpu(evidence, 0).ecc_dbe_increase is None
    assert any(
        "not exported by dcgm-exporter: ECC, NVLink, remapped rows" in line
        for line in lines(evidence, Lang.EN)
    )


def test_hot_gpu(store: ClusterState, metrics: PrometheusMetrics) -> None:
    node = "gpu-a6"
    set_temperature(store, node, 7, 91.5)
    evidence = eventually(metrics, node, lambda e: gpu(e, 7).temperature_max_c == 91.5)
    en = lines(evidence, Lang.EN)
    assert "GPU 7: temperature up to 91.5 °C" in en
    assert "hottest 91.5 °C" in en[-1]
    assert "GPU 7：温度最高 91.5 °C" in lines(evidence, Lang.ZH)
    assert not any(line.startswith("GPU 6:") for line in lines(evidence, Lang.EN, hot_c=95))


def test_exporter_down_for_a_node(store: ClusterState, metrics: PrometheusMetrics) -> None:
    node = "gpu-a5"
    assert gather(metrics, node).exporter_up is True
    inject(store, "not-ready", node, datetime.now(UTC))  # its dcgm-exporter pod: Ready=False
    evidence = eventually(metrics, node, lambda e: e.exporter_up is False)
    assert evidence.available and evidence.exporter_target_found
    assert not any(g.reporting for g in evidence.gpus)
    assert all(g.last_seen is not None for g in evidence.gpus)
    en = lines(evidence, Lang.EN)
    assert en == ["dcgm-exporter on gpu-a5 is down (up = 0)"]  # no per-GPU "stopped" noise
    assert lines(evidence, Lang.ZH) == ["gpu-a5 上的 dcgm-exporter 已停止（up = 0）"]
    # Without a target label, the exporter counts as up only while its series are there.
    inferred = gather(metrics, node, target_node_label="no_such_label")
    assert inferred.exporter_up is False and not inferred.exporter_target_found
    assert (
        lines(inferred, Lang.EN)[0]
        == "no dcgm-exporter metrics for gpu-a5 (Hostname) in the last 5 min"
    )


def test_the_node_label_is_configurable(
    other_store: ClusterState, metrics: PrometheusMetrics
) -> None:
    node = "gpu-b1"
    inject(other_store, "ecc-dbe", node, datetime.now(UTC), gpu=0)
    evidence = eventually(
        metrics,
        node,
        lambda e: bool(e.gpus) and gpu(e, 0).ecc_dbe_increase == 1,
        node_label="kubernetes_node",
    )
    assert evidence.node_label == "kubernetes_node"
    assert len(evidence.gpus) == 8 and evidence.exporter_up
    wrong = gather(metrics, node, node_label="nodename")
    assert wrong.available and wrong.gpus == () and wrong.exporter_up  # up found by instance
    assert lines(wrong, Lang.EN) == [
        'dcgm-exporter on gpu-b1 is up, but no series has nodename="gpu-b1": '
        "is the node label right?"
    ]


@pytest.mark.parametrize(
    "node", ['gpu-a1"} or up{job=~".+', "gpu-a1\\", 'a"b\\"c', "gpu-a1\n", "节点-1"]
)
def test_node_names_are_escaped(metrics: PrometheusMetrics, node: str) -> None:
    evidence = gather(metrics, node)
    assert evidence.available, evidence.unavailable_reason  # every query parsed
    assert evidence.gpus == () and evidence.exporter_up is False


def test_the_servers_evaluate_rules_and_reach_alertmanager(
    prom: PrometheusServer, alertmanager: AlertmanagerServer
) -> None:
    active = [
        a["url"] for a in prom.get_json("/api/v1/alertmanagers")["data"]["activeAlertmanagers"]
    ]
    assert active == [f"{alertmanager.url}/api/v2/alerts"]
    firing = prom.wait_for('ALERTS{alertname="Watchdog", alertstate="firing"}', bool)
    assert firing[0]["metric"]["node"] == "gpu-a1"
    deadline = time.monotonic() + 10
    while not any(a["labels"].get("alertname") == "Watchdog" for a in alertmanager.alerts()):
        assert time.monotonic() < deadline, "Prometheus never delivered Watchdog"
        time.sleep(0.1)


# ---- Prometheus away ----------------------------------------------------------------------


def test_prometheus_slow_then_stopped_gives_unavailable_fast() -> None:
    with prometheus_server() as lone, PrometheusMetrics(lone.url) as adapter:
        assert gather(adapter, "gpu-a1").available
        lone.pause()
        try:
            started = time.monotonic()
            slow = gather(adapter, "gpu-a1", timeout_s=1.0)
            assert time.monotonic() - started < 1.5
            assert not slow.available and slow.exporter_up is None and slow.gpus == ()
            assert "within 1 s" in slow.unavailable_reason
            with pytest.raises(TemporaryError, match=r"did not answer within 0\.5 s"):
                adapter.query("up", timeout_s=0.5)
        finally:
            lone.resume()
        lone.stop()
        started = time.monotonic()
        stopped = gather(adapter, "gpu-a1", timeout_s=1.0)
        assert time.monotonic() - started < 1.0
    assert not stopped.available
    assert "Connection refused" in stopped.unavailable_reason
    assert lines(stopped, Lang.EN) == [f"evidence unavailable: {stopped.unavailable_reason}"]
    assert lines(stopped, Lang.ZH) == [f"证据不可用：{stopped.unavailable_reason}"]


class Stuck:
    """A Metrics double that never answers within any deadline."""

    def query(
        self, promql: str, at: datetime | None = None, timeout_s: float = 5.0
    ) -> list[Sample]:
        time.sleep(timeout_s + 1)
        return []


class Broken:
    def query(
        self, promql: str, at: datetime | None = None, timeout_s: float = 5.0
    ) -> list[Sample]:
        raise RuntimeError("adapter bug")


def test_one_deadline_for_all_queries_and_never_raises() -> None:
    started = time.monotonic()
    stuck = gather_gpu_evidence(Stuck(), "gpu-a1", WINDOW, timeout_s=0.3)
    assert time.monotonic() - started < 0.8
    assert not stuck.available and "within 0.3 s" in stuck.unavailable_reason
    broken = gather_gpu_evidence(Broken(), "gpu-a1", WINDOW)
    assert not broken.available and broken.unavailable_reason.startswith(
        "RuntimeError: adapter bug"
    )
    bad_label = gather_gpu_evidence(Broken(), "gpu-a1", WINDOW, node_label="kubernetes-node")
    assert "not a Prometheus label name" in bad_label.unavailable_reason


# ---- the adapter ----------------------------------------------------------------------------


def test_adapter_answers_vectors_and_scalars_at_a_time(
    prom: PrometheusServer, metrics: PrometheusMetrics
) -> None:
    assert metrics.query("1 + 1") == [({}, 2.0)]
    at = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=2)
    assert metrics.query("time()", at=at) == [({}, at.timestamp())]
    up = metrics.query('up{job="dcgm-exporter", instance="gpu-a1"}')
    assert up == [({"__name__": "up", "instance": "gpu-a1", "job": "dcgm-exporter"}, 1.0)]
    assert metrics.query("up", at=datetime(2020, 1, 1, tzinfo=UTC)) == []
    ((labels, value),) = metrics.query("vector(0) / 0")
    assert labels == {} and math.isnan(value)  # Prometheus writes "NaN"


def test_adapter_bad_queries_are_permanent(metrics: PrometheusMetrics) -> None:
    with pytest.raises(PermanentError, match=r"answered 400: bad_data: .*parse error") as parse:
        metrics.query("sum(")
    assert parse.value.code == 400
    with pytest.raises(PermanentError) as execution:  # two series, one label set: 422
        metrics.query('rate({__name__=~"DCGM_FI_DEV_(GPU_TEMP|POWER_USAGE)"}[1m])')
    assert execution.value.code == 422 and "same labelset" in str(execution.value)
    with pytest.raises(PermanentError, match="range vector"):
        metrics.query("up[1m]")


def test_adapter_server_errors_and_refusals_are_temporary() -> None:
    with text_exporter() as fake, PrometheusMetrics(fake.url) as adapter:
        fake.set(
            '{"status":"error","errorType":"unavailable","error":"too many queries"}',
            status=503,
            content_type="application/json",
        )
        with pytest.raises(TemporaryError, match="answered 503: unavailable: too many queries"):
            adapter.query("up")
        assert fake.requests == 1  # no retries behind the caller's back
        fake.set("<html>a proxy's login page</html>", content_type="text/html")
        with pytest.raises(PermanentError, match="not a query API answer"):
            adapter.query("up")
    port = free_port()
    with (
        PrometheusMetrics(f"http://127.0.0.1:{port}") as adapter,
        pytest.raises(TemporaryError, match="Connection refused"),
    ):
        adapter.query("up")


def test_queries_escape_and_use_the_configured_labels() -> None:
    queries = build_queries(
        'n"1', 1800, node_label="kubernetes_node", target_node_label="node", exporter_job="dcgm"
    )
    assert promql_string('n"1') == '"n\\"1"'
    assert all('kubernetes_node="n\\"1"' in q for name, q in queries.items() if name != "up")
    assert queries["up"] == 'up{job=~"dcgm", node="n\\"1"}'
    assert "[1800s:15s]" in queries["xid_first"]
    with pytest.raises(ValueError):
        build_queries("n", 300, node_label="bad-label")


def test_lines_for_hand_made_evidence() -> None:
    at = datetime(2026, 12, 2, 3, 30, tzinfo=UTC)
    evidence = GpuEvidence(
        node="gpu-a3",
        node_label="Hostname",
        window_s=1800,
        at=at,
        available=True,
        exporter_up=True,
        gpus=(
            GpuMetrics(
                gpu="3",
                xids=(
                    XidSeen(code=79, first_seen=datetime(2026, 12, 2, 3, 12, tzinfo=UTC)),
                    XidSeen(code=48, first_seen=at - timedelta(minutes=30), already_set=True),
                    XidSeen(code=31),
                ),
                ecc_dbe_increase=2,
                ecc_dbe_total=None,
                temperature_max_c=70,
                power_w=300,
            ),
        ),
    )
    assert lines(evidence, Lang.EN) == [
        "GPU 3: Xid 79 at 03:12 UTC",
        "GPU 3: Xid 48 (already set at 03:00 UTC)",
        "GPU 3: Xid 31",
        "GPU 3: ECC DBE +2 in 30 min (total ?)",
        "gpu-a3: 1 GPU(s) reporting, hottest 70 °C, 300 W in total",
    ]
    assert lines(evidence, Lang.ZH) == [
        "GPU 3：03:12 UTC 出现 Xid 79",
        "GPU 3：Xid 48（03:00 UTC 时已存在）",
        "GPU 3：Xid 31",
        "GPU 3：ECC DBE 在 30 分钟内 +2（累计 ?）",
        "gpu-a3：1 块 GPU 在上报，最高温度 70 °C，总功耗 300 W",
    ]
