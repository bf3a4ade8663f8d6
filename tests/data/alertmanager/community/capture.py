"""Capture real Alertmanager webhook payloads for GPU alert rules gpubot did not write.

    python tests/data/alertmanager/community/capture.py            # all of them
    python tests/data/alertmanager/community/capture.py --only ibm-autopilot-AutopilotDCGMErrors

What runs, all on 127.0.0.1, each server on a free port with its own temp dir, stopped at exit:
- a small HTTP server in this process serving simulated exporter metrics, one path per node:
  dcgm-exporter (gpu-node-1, gpu-node-2: 8 x H100 each), utkuozdemir/nvidia_gpu_exporter
  (same nodes), the GPU Operator's node-status exporter (gpu-node-3), IBM Autopilot's health
  checks (gpu-node-2), node-exporter (gpu-node-1);
- the real Prometheus (Debian's `prometheus`, 2.42 on Debian 12), scraping every 1 s and
  evaluating the community rule files in rules/ every 1 s. The scrape jobs carry the target
  labels a Prometheus Operator ServiceMonitor gives (job, instance = pod IP:port, namespace,
  pod, service, endpoint, container), so the captures hold the labels a real cluster's do;
- the real Alertmanager (Debian's `prometheus-alertmanager`), grouping by alertname, with one
  webhook receiver pointing at
- a capture HTTP server in this process, which keeps every body it is sent.

For each expected alert (EXPECTED below) it waits until a firing notification holds every
alert the simulated faults should raise, and writes that body, byte for byte as Alertmanager
sent it, to `<source>-<alertname>.json` beside this script. It fails, naming what is
missing and printing the tails of both servers' logs, if that does not happen within the
deadline. Alerts that fire but are not expected are reported (and not written).

The same start-up approach and flags as tests/servers.py (free port, retried when taken;
readiness polled with a deadline, never a fixed sleep; --rules.alert.resend-delay=1s so an
alert fired before Prometheus found its Alertmanager is sent at the next evaluation;
gossip off). Standard library and PyYAML only.

The external URLs are fixed (http://prometheus.monitoring.svc:9090/,
http://alertmanager.monitoring.svc:9093/) and Prometheus has the external label
`prometheus="monitoring/kube-prometheus-stack-prometheus"` (as kube-prometheus-stack sets it),
so a re-run changes only times (startsAt, and the graph links carry none).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
RULES = HERE / "rules"
PROMETHEUS_URL = "http://prometheus.monitoring.svc:9090/"
ALERTMANAGER_URL = "http://alertmanager.monitoring.svc:9093/"
EXTERNAL_LABELS = {"prometheus": "monitoring/kube-prometheus-stack-prometheus"}
DEADLINE_S = 120.0
SETTLE_S = 3.0


# ---- what should fire ----------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    source: str  # the rule file rules/<source>.yaml
    alertname: str
    alerts: int  # firing alerts the simulated faults raise

    @property
    def key(self) -> str:
        return f"{self.source}-{self.alertname}"


EXPECTED = [
    # The real captures: code only in the summary ({{ $value }}).
    Expected("issue-captures", "GpuXidError", 2),
    # AWS SageMaker HyperPod defaults.
    Expected("aws-sagemaker-hyperpod", "GPUXidError", 2),
    Expected("aws-sagemaker-hyperpod", "GPUHighTemperature", 1),
    Expected("aws-sagemaker-hyperpod", "GPUMemoryErrorDetected", 1),
    Expected("aws-sagemaker-hyperpod", "NVLinkErrorsDetected", 1),
    # Canonical hardware-observer: throttle bitmask.
    Expected("canonical-hardware-observer", "GPUThermalHWThrottle", 1),
    # NVIDIA GPU Operator node-status exporter: keyed by `node`.
    Expected("nvidia-gpu-operator", "GPUOperatorNodeDeploymentFailed", 1),
    Expected("nvidia-gpu-operator", "GPUOperatorNodeDeploymentDriverFailed", 1),
    # IBM Autopilot health checks: keyed by `node`.
    Expected("ibm-autopilot", "AutopilotDCGMErrors", 1),
    Expected("ibm-autopilot", "AutopilotRemappedRowsActive", 1),
    # utkuozdemir/nvidia_gpu_exporter chart rules: `xid` label, `uuid`, node only in instance.
    Expected("nvidia-gpu-exporter", "NvidiaGpuXidCritical", 2),
    Expected("nvidia-gpu-exporter", "NvidiaGpuUncorrectableEccErrors", 1),
    Expected("nvidia-gpu-exporter", "NvidiaGpuRowRemapFailure", 1),
    # Not GPU-related: a full disk on a GPU node.
    Expected("kube-prometheus-node-exporter", "NodeFilesystemAlmostOutOfSpace", 1),
]


# ---- the simulated cluster -----------------------------------------------------------------

MODEL = "NVIDIA H100 80GB HBM3"
BUS_IDS = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]


def gpu_uuid(node: str, index: int) -> str:
    digest = hashlib.sha256(f"{node}/{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


@dataclass
class Gpu:
    index: int
    temp: float = 45.0
    xid: int = 0
    ecc_dbe: int = 0
    ecc_sbe: int = 0
    nvlink_recovery: int = 0
    row_remap_failure: int = 0
    throttle_reasons: int = 0
    workload: dict[str, str] = field(default_factory=dict)  # dcgm-exporter's pod mapping


@dataclass
class GpuNode:
    name: str
    driver: str
    err_code_labels: bool  # dcgm-exporter since NVIDIA/dcgm-exporter#309 (2024): err_code, err_msg
    pod_ip: str  # the dcgm-exporter pod
    gpus: list[Gpu]


def _gpus() -> list[Gpu]:
    return [Gpu(i, temp=41.0 + 2 * i) for i in range(8)]


NODE1 = GpuNode("gpu-node-1", "535.183.01", False, "10.244.1.23", _gpus())
NODE2 = GpuNode("gpu-node-2", "550.127.08", True, "10.244.2.17", _gpus())

# The faults. gpu-node-1: GPU 0 fell off the bus (Xid 79) under a training job; GPU 3 runs
# hot and is in hardware thermal slowdown. gpu-node-2: GPU 4 had double-bit ECC errors
# (Xid 48), the row remapper ran out of spare rows, Autopilot's checks fail; GPU 1 has
# NVLink recovery errors. gpu-node-3 (no dcgm-exporter: its driver never came up): the GPU
# Operator's validator reports the driver failed and no devices. gpu-node-1's root disk is
# almost full.
NODE1.gpus[0].xid = 79
NODE1.gpus[0].workload = {
    "pod": "llm-train-worker-3",
    "namespace": "research",
    "container": "pytorch",
}
NODE1.gpus[3].temp = 83.0
NODE1.gpus[3].throttle_reasons = 64  # DCGM_CLOCKS_EVENT_REASON_HW_THERMAL (bit 6)
NODE2.gpus[4].xid = 48
NODE2.gpus[4].ecc_dbe = 2
NODE2.gpus[4].ecc_sbe = 17
NODE2.gpus[4].row_remap_failure = 1
NODE2.gpus[4].workload = {
    "pod": "embed-batch-7f9c4-x2kqp",
    "namespace": "inference",
    "container": "worker",
}
NODE2.gpus[1].nvlink_recovery = 3
GPU_NODES = [NODE1, NODE2]

# dcgm-exporter's XID texts (internal/pkg/collector/xid_errors.go) for the codes used here.
XID_TEXT = {0: "No Error", 48: "Double Bit ECC Error", 79: "GPU has fallen off the bus"}


def _labels(pairs: list[tuple[str, str]]) -> str:
    escaped = (v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") for _, v in pairs)
    return ",".join(f'{k}="{v}"' for (k, _), v in zip(pairs, escaped, strict=True))


def dcgm_metrics(node: GpuNode) -> str:
    """dcgm-exporter's text, as its render template writes it (gpu, UUID, pci_bus_id, device,
    modelName, Hostname, then the label fields and the pod mapping, then attributes)."""
    fields: list[tuple[str, str, str, Callable[[Gpu], float]]] = [
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda g: g.temp),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda g: 312.5 + g.index),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda g: 97.0),
        (
            "DCGM_FI_DEV_XID_ERRORS",
            "gauge",
            "Value of the last XID error encountered.",
            lambda g: g.xid,
        ),
        (
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
            "counter",
            "Total number of single-bit volatile ECC errors.",
            lambda g: g.ecc_sbe,
        ),
        (
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "counter",
            "Total number of double-bit volatile ECC errors.",
            lambda g: g.ecc_dbe,
        ),
        (
            "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
            "counter",
            "Total number of double-bit persistent ECC errors.",
            lambda g: g.ecc_dbe,
        ),
        (
            "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
            "counter",
            "Total number of NVLink retries.",
            lambda g: 0,
        ),
        (
            "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
            "counter",
            "Total number of NVLink recovery errors.",
            lambda g: g.nvlink_recovery,
        ),
        (
            "DCGM_FI_DEV_ROW_REMAP_FAILURE",
            "gauge",
            "Whether remapping of rows has failed",
            lambda g: g.row_remap_failure,
        ),
        (
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
            "gauge",
            "Current clock throttle reasons (bitmask).",
            lambda g: g.throttle_reasons,
        ),
    ]
    out = []
    for name, kind, help_text, value in fields:
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
        for gpu in node.gpus:
            pairs = [
                ("gpu", str(gpu.index)),
                ("UUID", gpu_uuid(node.name, gpu.index)),
                ("pci_bus_id", f"00000000:{BUS_IDS[gpu.index]}:00.0"),
                ("device", f"nvidia{gpu.index}"),
                ("modelName", MODEL),
                ("Hostname", node.name),
                ("DCGM_FI_DRIVER_VERSION", node.driver),
                *gpu.workload.items(),
            ]
            if name == "DCGM_FI_DEV_XID_ERRORS" and node.err_code_labels:
                pairs += [("err_code", str(gpu.xid)), ("err_msg", XID_TEXT[gpu.xid])]
            out.append(f"{name}{{{_labels(pairs)}}} {value(gpu):g}\n")
    return "".join(out)


def nvidia_gpu_exporter_metrics(node: GpuNode) -> str:
    """utkuozdemir/nvidia_gpu_exporter (NVML backend): `uuid` lowercase without "GPU-"."""
    now = time.time()
    out = [
        "# HELP nvidia_smi_last_collect_success Whether the most recent collection succeeded"
        " (1) or not (0)\n# TYPE nvidia_smi_last_collect_success gauge\n"
        "nvidia_smi_last_collect_success 1\n",
    ]
    gauges: list[tuple[str, str, Callable[[Gpu], float]]] = [
        ("nvidia_smi_temperature_gpu", "temperature.gpu", lambda g: g.temp),
        (
            "nvidia_smi_ecc_errors_uncorrected_volatile_total",
            "ecc.errors.uncorrected.volatile.total",
            lambda g: g.ecc_dbe,
        ),
        (
            "nvidia_smi_remapped_rows_failure",
            "remapped_rows.failure",
            lambda g: g.row_remap_failure,
        ),
        ("nvidia_smi_remapped_rows_pending", "remapped_rows.pending", lambda g: 0),
    ]
    for name, help_text, value in gauges:
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
        for gpu in node.gpus:
            uuid = gpu_uuid(node.name, gpu.index).lower().removeprefix("gpu-")
            out.append(f"{name}{{{_labels([('uuid', uuid)])}}} {value(gpu):g}\n")
    out.append(
        "# HELP nvidia_smi_xid_last_timestamp_seconds Unix time of the most recent XID event"
        "\n# TYPE nvidia_smi_xid_last_timestamp_seconds gauge\n"
    )
    for gpu in node.gpus:
        if gpu.xid:
            uuid = gpu_uuid(node.name, gpu.index).lower().removeprefix("gpu-")
            pairs = [("uuid", uuid), ("xid", str(gpu.xid))]
            out.append(
                f"nvidia_smi_xid_last_timestamp_seconds{{{_labels(pairs)}}} {now - 30:.3f}\n"
            )
    return "".join(out)


def node_status_metrics(node: str) -> str:
    """The GPU Operator's node-status exporter (nvidia-validator, cmd/nvidia-validator/
    metrics.go) on a node whose driver failed: validation 0, no devices."""
    values = {
        "gpu_operator_node_driver_ready": 0,
        "gpu_operator_node_toolkit_ready": 0,
        "gpu_operator_node_plugin_ready": 0,
        "gpu_operator_node_cuda_ready": 0,
        "gpu_operator_node_driver_validation": 0,
        "gpu_operator_node_device_plugin_devices_total": 0,
        "gpu_operator_nvidia_pci_devices_total": 8,
    }
    return "".join(
        f'# TYPE {name} gauge\n{name}{{node="{node}"}} {value}\n' for name, value in values.items()
    )


def autopilot_metrics(node: str) -> str:
    """IBM Autopilot's autopilot_health_checks{health, node, cpumodel, gpumodel, deviceid}."""
    base = [("node", node), ("cpumodel", "Intel(R) Xeon(R) Platinum 8480+"), ("gpumodel", MODEL)]
    rows = [("dcgm", "", 1)]  # dcgm: 1 = the dcgmi diag run failed
    rows += [("remapped", str(i), 1 if i == 4 else 0) for i in range(8)]  # 1 = remap pending
    rows += [("pciebw", str(i), 24) for i in range(8)]
    out = [
        "# HELP autopilot_health_checks Summary of the health checks measurements on compute"
        " nodes. Gauge Vector version\n# TYPE autopilot_health_checks gauge\n"
    ]
    for health, device, value in rows:
        pairs = [("health", health), *base, ("deviceid", device)]
        out.append(f"autopilot_health_checks{{{_labels(pairs)}}} {value}\n")
    return "".join(out)


def node_exporter_metrics() -> str:
    """node-exporter on gpu-node-1: the root filesystem 96% full."""
    fs = [("device", "/dev/nvme0n1p2"), ("fstype", "ext4"), ("mountpoint", "/")]
    size, avail = 1_919_816_896_512, 76_792_676_352  # 4.0% available
    values = {"avail_bytes": avail, "size_bytes": size, "readonly": 0}
    return "".join(
        f"# TYPE node_filesystem_{name} gauge\nnode_filesystem_{name}{{{_labels(fs)}}} {value}\n"
        for name, value in values.items()
    )


EXPORTER_PATHS: dict[str, Callable[[], str]] = {
    "/dcgm/gpu-node-1": lambda: dcgm_metrics(NODE1),
    "/dcgm/gpu-node-2": lambda: dcgm_metrics(NODE2),
    "/nvidia-gpu-exporter/gpu-node-1": lambda: nvidia_gpu_exporter_metrics(NODE1),
    "/nvidia-gpu-exporter/gpu-node-2": lambda: nvidia_gpu_exporter_metrics(NODE2),
    "/node-status/gpu-node-3": lambda: node_status_metrics("gpu-node-3"),
    "/autopilot/gpu-node-2": lambda: autopilot_metrics("gpu-node-2"),
    "/node-exporter/gpu-node-1": node_exporter_metrics,
}


def scrape_configs(exporter: str) -> list[dict[str, Any]]:
    """Static targets with the labels a Prometheus Operator ServiceMonitor would give them."""

    def target(path: str, **labels: str) -> dict[str, Any]:
        return {"targets": [exporter], "labels": {"__metrics_path__": path, **labels}}

    def job(name: str, *targets: dict[str, Any]) -> dict[str, Any]:
        return {
            "job_name": name,
            "scrape_interval": "1s",
            "scrape_timeout": "1s",
            "static_configs": list(targets),
        }

    def operator(
        ns: str, pod: str, ip: str, port: int, svc: str, endpoint: str, container: str
    ) -> dict[str, str]:
        return {
            "instance": f"{ip}:{port}",
            "namespace": ns,
            "pod": pod,
            "service": svc,
            "endpoint": endpoint,
            "container": container,
        }

    dcgm = dict(
        svc="nvidia-dcgm-exporter", endpoint="gpu-metrics", container="nvidia-dcgm-exporter"
    )
    ngx = dict(svc="nvidia-gpu-exporter", endpoint="http", container="nvidia-gpu-exporter")
    return [
        # GPU Operator: ServiceMonitor nvidia-dcgm-exporter, jobLabel app -> job.
        job(
            "nvidia-dcgm-exporter",
            target(
                "/dcgm/gpu-node-1",
                **operator(
                    "gpu-operator", "nvidia-dcgm-exporter-7lq8x", NODE1.pod_ip, 9400, **dcgm
                ),
            ),
            target(
                "/dcgm/gpu-node-2",
                **operator(
                    "gpu-operator", "nvidia-dcgm-exporter-m2w9c", NODE2.pod_ip, 9400, **dcgm
                ),
            ),
        ),
        # utkuozdemir/nvidia_gpu_exporter chart, ServiceMonitor enabled, no relabelings.
        job(
            "nvidia-gpu-exporter",
            target(
                "/nvidia-gpu-exporter/gpu-node-1",
                **operator("monitoring", "nvidia-gpu-exporter-x8k2d", "10.244.1.31", 9835, **ngx),
            ),
            target(
                "/nvidia-gpu-exporter/gpu-node-2",
                **operator("monitoring", "nvidia-gpu-exporter-5tq7n", "10.244.2.29", 9835, **ngx),
            ),
        ),
        # GPU Operator: ServiceMonitor nvidia-node-status-exporter.
        job(
            "nvidia-node-status-exporter",
            target(
                "/node-status/gpu-node-3",
                **operator(
                    "gpu-operator",
                    "nvidia-node-status-exporter-2hb4m",
                    "10.244.3.12",
                    8000,
                    "nvidia-node-status-exporter",
                    "node-status",
                    "nvidia-node-status-exporter",
                ),
            ),
        ),
        # IBM Autopilot: ServiceMonitor autopilot-metrics-monitor.
        job(
            "autopilot-metrics-service",
            target(
                "/autopilot/gpu-node-2",
                **operator(
                    "autopilot",
                    "autopilot-daemon-9qv4z",
                    "10.244.2.40",
                    8081,
                    "autopilot-metrics-service",
                    "http",
                    "autopilot",
                ),
            ),
        ),
        # kube-prometheus node-exporter: instance relabelled to the node name, scraped through
        # kube-rbac-proxy.
        job(
            "node-exporter",
            target(
                "/node-exporter/gpu-node-1",
                instance="gpu-node-1",
                namespace="monitoring",
                pod="node-exporter-5wzcp",
                service="node-exporter",
                endpoint="https",
                container="kube-rbac-proxy",
            ),
        ),
    ]


# ---- small HTTP servers in this process -----------------------------------------------------


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _answer(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class ExporterHandler(_Quiet):
    def do_GET(self) -> None:
        render = EXPORTER_PATHS.get(self.path)
        if render is None:
            self._answer(404, b"not found\n")
        else:
            self._answer(200, render().encode(), "text/plain; version=0.0.4; charset=utf-8")


@dataclass
class Received:
    at: float
    body: bytes
    payload: dict[str, Any]


class Inbox:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: list[Received] = []

    def handler(self) -> type[BaseHTTPRequestHandler]:
        inbox = self

        class WebhookHandler(_Quiet):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    payload = json.loads(body)
                except ValueError:
                    self._answer(400, b"not JSON\n")
                    return
                with inbox.lock:
                    inbox.bodies.append(Received(time.time(), body, payload))
                self._answer(200, b"ok\n")

        return WebhookHandler

    def snapshot(self) -> list[Received]:
        with self.lock:
            return list(self.bodies)


# ---- the real Prometheus and Alertmanager ---------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class Process:
    def __init__(self, name: str, args: list[str], workdir: Path, port: int) -> None:
        self.name, self.port, self.url = name, port, f"http://127.0.0.1:{port}"
        self.log_path = workdir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            args, cwd=workdir, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )

    def tail(self, lines: int = 25) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            raise RuntimeError(f"{self.name} exited with {code}:\n{self.tail()}")

    def get_json(self, path: str) -> Any:
        status, body = http_get(self.url + path)
        if status != 200:
            raise RuntimeError(f"{self.name} GET {path}: {status} {body[:200]!r}")
        return json.loads(body)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()


def poll(check: Callable[[], Any], timeout_s: float, what: str, alive: Callable[[], None]) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        alive()
        try:
            last = check()
        except (OSError, RuntimeError) as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:g} s (last: {last!r})")
        time.sleep(0.1)


def start(
    name: str,
    make_args: Callable[[int], list[str]],
    workdir: Path,
    ready: Callable[[Process], None],
) -> Process:
    """Start on a free port, wait until ready; retry when another process took the port."""
    for attempt in range(3):
        process = Process(name, make_args(port := free_port()), workdir, port)
        try:
            ready(process)
            return process
        except (RuntimeError, TimeoutError) as exc:
            tail = process.tail()
            process.stop()
            if "address already in use" in tail and attempt < 2:
                continue
            raise RuntimeError(f"{exc}\n--- {name} log ---\n{tail}") from exc
    raise AssertionError("unreachable")


def binary(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit(
        f"none of {', '.join(names)} is installed (apt-get install prometheus "
        "prometheus-alertmanager)"
    )


def alertmanager_config(webhook: str) -> str:
    return yaml.safe_dump(
        {
            "route": {
                "receiver": "capture",
                "group_by": ["alertname"],
                "group_wait": "1s",
                "group_interval": "1s",
                "repeat_interval": "1h",
            },
            "receivers": [
                {
                    "name": "capture",
                    "webhook_configs": [
                        {"url": f"http://{webhook}/webhook", "send_resolved": True, "max_alerts": 0}
                    ],
                }
            ],
        },
        sort_keys=False,
    )


def prometheus_config(exporter: str, alertmanager_port: int, rule_files: list[Path]) -> str:
    return yaml.safe_dump(
        {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
                "external_labels": EXTERNAL_LABELS,
            },
            "rule_files": [str(p) for p in rule_files],
            "alerting": {
                "alertmanagers": [
                    {"static_configs": [{"targets": [f"127.0.0.1:{alertmanager_port}"]}]}
                ]
            },
            "scrape_configs": scrape_configs(exporter),
        },
        sort_keys=False,
    )


# ---- the capture ---------------------------------------------------------------------------


def complete(received: Received, want: Expected) -> bool:
    p = received.payload
    firing = [a for a in p.get("alerts", []) if a.get("status") == "firing"]
    return (
        p.get("status") == "firing"
        and p.get("groupLabels", {}).get("alertname") == want.alertname
        and len(firing) == len(p.get("alerts", [])) == want.alerts
    )


def capture(wanted: list[Expected], out_dir: Path, timeout_s: float) -> int:
    prom_bin = binary("prometheus")
    am_bin = binary("prometheus-alertmanager", "alertmanager")
    sources = sorted({w.source for w in wanted})
    rule_files = [RULES / f"{s}.yaml" for s in sources]
    for path in rule_files:
        if not path.exists():
            raise SystemExit(f"no rule file {path}")
    inbox = Inbox()
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="capture-")))
        exporter = stack.enter_context(serving(ExporterHandler))
        webhook = stack.enter_context(serving(inbox.handler()))

        (workdir / "alertmanager.yml").write_text(alertmanager_config(webhook))
        am = start(
            "alertmanager",
            lambda port: [
                am_bin,
                f"--config.file={workdir / 'alertmanager.yml'}",
                f"--storage.path={workdir / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--web.external-url={ALERTMANAGER_URL}",
                "--cluster.listen-address=",
            ],
            workdir,
            lambda p: poll(
                lambda: http_get(p.url + "/-/ready")[0] == 200, 20, "alertmanager /-/ready", p.alive
            ),
        )
        stack.callback(am.stop)

        (workdir / "prometheus.yml").write_text(prometheus_config(exporter, am.port, rule_files))

        def prometheus_ready(p: Process) -> None:
            poll(lambda: http_get(p.url + "/-/ready")[0] == 200, 30, "prometheus /-/ready", p.alive)
            poll(lambda: p.get_json("/api/v1/rules")["data"]["groups"], 10, "rules loaded", p.alive)

        prom = start(
            "prometheus",
            lambda port: [
                prom_bin,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'prom-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--web.external-url={PROMETHEUS_URL}",
                "--rules.alert.resend-delay=1s",
            ],
            workdir,
            prometheus_ready,
        )
        stack.callback(prom.stop)
        print(
            f"prometheus {prom.url}, alertmanager {am.url}, exporter {exporter}, "
            f"webhook {webhook}; waiting for {len(wanted)} notifications",
            flush=True,
        )

        found: dict[str, Received] = {}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(found) < len(wanted):
            prom.alive()
            am.alive()
            bodies = inbox.snapshot()
            for want in wanted:
                if want.key not in found:
                    match = next((r for r in bodies if complete(r, want)), None)
                    if match is not None:
                        found[want.key] = match
                        print(f"  {want.key}: {want.alerts} alert(s)", flush=True)
            time.sleep(0.2)
        if len(found) == len(wanted):
            time.sleep(SETTLE_S)  # let alerts nobody expected show up, to report them

        names = {w.alertname for w in EXPECTED}
        others = sorted(
            {r.payload.get("groupLabels", {}).get("alertname", "?") for r in inbox.snapshot()}
            - names
        )
        if others:
            print(f"fired but not expected (not written): {', '.join(others)}")
        missing = [w for w in wanted if w.key not in found]
        if missing:
            seen: dict[str, int] = {}
            for r in inbox.snapshot():
                name = r.payload.get("groupLabels", {}).get("alertname", "?")
                seen[name] = max(seen.get(name, 0), len(r.payload.get("alerts", [])))
            print(
                "missing: "
                + ", ".join(
                    f"{w.key} (want {w.alerts}, most seen {seen.get(w.alertname, 0)})"
                    for w in missing
                )
            )
            try:
                pending = [
                    (a["labels"]["alertname"], a["state"])
                    for a in prom.get_json("/api/v1/alerts")["data"]["alerts"]
                ]
                print(f"prometheus holds: {pending}")
            except (OSError, RuntimeError, KeyError) as exc:
                print(f"prometheus /api/v1/alerts: {exc}")
            print(f"--- prometheus log ---\n{prom.tail()}\n--- alertmanager log ---\n{am.tail()}")
            return 1
        for want in wanted:
            (out_dir / f"{want.key}.json").write_bytes(found[want.key].body)
        print(f"wrote {len(wanted)} files to {out_dir}")
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--only",
        nargs="*",
        metavar="SOURCE-ALERTNAME",
        help="capture only these (file names without .json)",
    )
    parser.add_argument("--out", type=Path, default=HERE, help="where to write (default: here)")
    parser.add_argument("--timeout", type=float, default=DEADLINE_S, help="seconds to wait")
    args = parser.parse_args(argv)
    wanted = EXPECTED
    if args.only:
        unknown = set(args.only) - {w.key for w in EXPECTED}
        if unknown:
            parser.error(f"unknown: {', '.join(sorted(unknown))}")
        wanted = [w for w in EXPECTED if w.key in args.only]
    return capture(wanted, args.out, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
