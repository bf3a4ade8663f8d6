"""dcgm-exporter's HTTP endpoint for a simulated cluster, on 127.0.0.1.

`GET /metrics/<node>` is one node's exporter (one scrape target per node), `GET /metrics`
every node at once; the series are `gpusim.metrics`'. A node without GPUs has no exporter:
404, like a node the DaemonSet does not run on. A node whose `nvidia-dcgm-exporter` pod exists
but is not Running and Ready (crashed, or marked Ready=False because the node went NotReady)
answers 503, which Prometheus records as `up == 0`; `/metrics` leaves such nodes out.

dcgm-exporter writes counter families under their bare names (`# TYPE
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter`, samples without a `_total` suffix), while
prometheus_client's text renderer names a counter family `<name>_total`; `render` renames those
two header lines back, so Prometheus sees exactly what dcgm-exporter serves. (Note for tests:
prometheus_client's own parser reports such samples as `<name>_total`; Prometheus does not.)

It serves what it reads and must never write to the cluster; it binds 127.0.0.1 only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from urllib.parse import unquote, urlsplit

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from bot.kube_objects import meta, name_of, pod_ready, spec_of
from gpusim.hardware import gpu_count, gpu_state
from gpusim.metrics import (
    ALL_FIELDS,
    DRIVER_LABEL,
    GPU_LABELS,
    WINDOW_LABEL,
    XID_COUNT,
    XID_LABEL,
    XID_WINDOW_MS,
    GpuSeries,
    node_series,
    observe_xids,
    temperature_overrides,
)
from gpusim.objects import DCGM_EXPORTER_APP, GPU_OPERATOR_NS, Json
from gpusim.reading import uid_of
from gpusim.resources import BY_KIND, ApiError
from gpusim.serving import LoopbackServer, get_handler
from gpusim.state import ClusterState

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""What dcgm-exporter answers with: the classic Prometheus text format."""
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _exporter_pods(store: ClusterState, node: str | None = None) -> dict[str, list[Json]]:
    """node -> its live dcgm-exporter pods."""
    selector = f"spec.nodeName={node}" if node else ""
    pods, _ = store.list(BY_KIND["Pod"], GPU_OPERATOR_NS, f"app={DCGM_EXPORTER_APP}", selector)
    by_node: dict[str, list[Json]] = {}
    for pod in pods:
        if meta(pod).get("deletionTimestamp"):
            continue
        by_node.setdefault(str(spec_of(pod).get("nodeName") or ""), []).append(pod)
    return by_node


def exporter_up(pods: list[Json]) -> bool:
    """Whether a node's exporter answers: no dcgm-exporter pod modelled (a bare store), or one
    Running and Ready."""
    return not pods or any(pod_ready(p) for p in pods)


# ---- the collector --------------------------------------------------------------------------


class DcgmCollector(Collector):
    """prometheus_client Collector over a simulated cluster: every GPU node whose exporter is
    up, or only `nodes`."""

    def __init__(
        self,
        store: ClusterState,
        *,
        node_label: str | None = None,
        nodes: Collection[str] | None = None,
        xid_window_ms: int = XID_WINDOW_MS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if node_label is not None and (
            not _LABEL_NAME.match(node_label)
            or node_label in (DRIVER_LABEL, WINDOW_LABEL, XID_LABEL)
        ):
            raise ValueError(f"node_label must be a Prometheus label name, not {node_label!r}")
        if (
            not isinstance(xid_window_ms, int)
            or isinstance(xid_window_ms, bool)
            or xid_window_ms < 1
        ):
            raise ValueError(f"xid_window_ms must be a positive integer, not {xid_window_ms!r}")
        self.store = store
        self.node_label = None if node_label in GPU_LABELS else node_label
        self.nodes = None if nodes is None else frozenset(nodes)
        self.xid_window_ms = xid_window_ms
        self.clock = clock

    def only(self, node: str) -> DcgmCollector:
        """The same collector limited to one node: what that node's exporter serves."""
        return DcgmCollector(
            self.store,
            node_label=self.node_label,
            nodes=[node],
            xid_window_ms=self.xid_window_ms,
            clock=self.clock,
        )

    def describe(self) -> Iterable[Metric]:
        return [Metric(f.name, f.help, f.type) for f in ALL_FIELDS]

    def series(self) -> Iterator[GpuSeries]:
        if self.nodes is not None and len(self.nodes) == 1:
            (single,) = self.nodes
            try:
                nodes = [self.store.get(BY_KIND["Node"], "", single)]
            except ApiError:
                return
            pods = _exporter_pods(self.store, single)
        else:
            nodes, _ = self.store.list(BY_KIND["Node"], "")
            pods = _exporter_pods(self.store)
        # dict() of a dict copies it in one step, so a fault injected meanwhile cannot break
        # the iteration; the per-GPU dicts are copied the same way.
        state = dict(gpu_state(self.store))
        temperatures = temperature_overrides(self.store)
        now = self.clock()
        for node in nodes:
            name = name_of(node)
            if self.nodes is not None and name not in self.nodes:
                continue
            if not exporter_up(pods.get(name, [])):
                continue
            gpus = {index: dict(gpu) for index, gpu in dict(state.get(name, {})).items()}
            exporter = ",".join(uid_of(p) for p in pods.get(name, []))
            counts = observe_xids(self.store, node, gpus, now, self.xid_window_ms, exporter)
            yield from node_series(node, gpus, temperatures, self.node_label, counts)

    def collect(self) -> Iterable[Metric]:
        families = {f.name: Metric(f.name, f.help, f.type) for f in ALL_FIELDS}
        window = {WINDOW_LABEL: str(self.xid_window_ms)}
        count_family = families[XID_COUNT.name]
        for gpu in self.series():
            for name, value in gpu.values.items():
                families[name].add_sample(name, gpu.labels, value)
            if not gpu.xid_counts:
                count_family.add_sample(XID_COUNT.name, {**gpu.labels, **window}, 0)
            for code, count in sorted(gpu.xid_counts.items()):
                labels = {**gpu.labels, **window, XID_LABEL: str(code)}
                count_family.add_sample(XID_COUNT.name, labels, count)
        return [family for family in families.values() if family.samples]


def render(collector: Collector) -> bytes:
    """The exposition text, with counter families under their bare names as dcgm-exporter
    writes them (see the module docstring)."""
    text = generate_latest(collector)
    for spec in ALL_FIELDS:
        if spec.type == "counter":
            for kind in (b"HELP", b"TYPE"):
                wrong = b"# %s %s_total " % (kind, spec.name.encode())
                text = text.replace(wrong, b"# %s %s " % (kind, spec.name.encode()))
    return text


# ---- the HTTP server ------------------------------------------------------------------------


class DcgmExporterServer:
    """`GET /metrics/<node>`: that node's dcgm-exporter (404 for an unknown or GPU-less node,
    503 while its exporter pod is not ready); `GET /metrics`: every node at once."""

    def __init__(
        self,
        store: ClusterState,
        port: int = 0,
        *,
        node_label: str | None = None,
        xid_window_ms: int = XID_WINDOW_MS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.collector = DcgmCollector(
            store, node_label=node_label, xid_window_ms=xid_window_ms, clock=clock
        )
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self._http = LoopbackServer(get_handler(self._handle), port, "sim-dcgm-exporter")

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        return self._http.url

    def node_url(self, node: str) -> str:
        return f"{self.url}/metrics/{node}"

    def start(self) -> DcgmExporterServer:
        self._http.start()
        return self

    def stop(self) -> None:
        self._http.stop()

    def __enter__(self) -> DcgmExporterServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        try:
            code, body, content_type = self._dispatch(urlsplit(handler.path).path)
        except Exception as exc:  # the server stays up whatever a request does
            code, body, content_type = 500, f"{exc}\n".encode(), "text/plain; charset=utf-8"
        handler.send_response(code)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _dispatch(self, path: str) -> tuple[int, bytes, str]:
        parts = [unquote(p) for p in path.removeprefix("/").split("/")]
        if parts == ["metrics"]:
            return 200, render(self.registry), CONTENT_TYPE
        if len(parts) == 2 and parts[0] == "metrics" and parts[1]:
            return self._node(parts[1])
        return _text(404, f"not found: {path}; try /metrics or /metrics/<node>")

    def _node(self, name: str) -> tuple[int, bytes, str]:
        try:
            node = self.store.get(BY_KIND["Node"], "", name)
        except ApiError:
            return _text(404, f'node "{name}" not found')
        if gpu_count(node) == 0:
            return _text(404, f'node "{name}" has no NVIDIA GPUs: no dcgm-exporter runs there')
        if not exporter_up(_exporter_pods(self.store, name).get(name, [])):
            return _text(503, f'{DCGM_EXPORTER_APP} on node "{name}" is not ready')
        return 200, render(self.collector.only(name)), CONTENT_TYPE


def _text(code: int, message: str) -> tuple[int, bytes, str]:
    return code, f"{message}\n".encode(), "text/plain; charset=utf-8"


@contextmanager
def running(
    store: ClusterState,
    *,
    node_label: str | None = None,
    xid_window_ms: int = XID_WINDOW_MS,
    clock: Callable[[], float] = time.time,
) -> Iterator[DcgmExporterServer]:
    """A started DcgmExporterServer on a free port, stopped on exit."""
    with DcgmExporterServer(
        store, node_label=node_label, xid_window_ms=xid_window_ms, clock=clock
    ) as server:
        yield server
