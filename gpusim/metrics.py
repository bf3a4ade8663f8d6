"""dcgm-exporter's series for the simulated GPU nodes: names, labels and values.

What a real Prometheus scrapes from NVIDIA/dcgm-exporter, per GPU of a simulated node (served
over HTTP by `gpusim.exporter`). Names, types and HELP texts are those of dcgm-exporter's
`etc/default-counters.csv` and `etc/dcp-metrics-included.csv` (the ECC and NVLink fields are
off by default there; the counters CSV we ship turns them on); labels are the exporter's
`gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`, `Hostname` and the `DCGM_FI_DRIVER_VERSION`
attribute, plus an optional extra label carrying the node name (`kubernetes_node`, `node`: what
a relabeling would add in a real setup).

Where the values come from:
- GPUs, model and driver: the node's GPU Feature Discovery labels (`nvidia.com/gpu.count`,
  `nvidia.com/gpu.product`, `nvidia.com/cuda.driver-version.full`).
- Temperature and power: a steady baseline derived from node name and GPU index, unless
  `set_temperature` overrides it (thermal alert tests).
- Faults: `gpusim.hardware.gpu_state` (last Xid, ECC, remapped rows, NVLink, Fabric Manager).
  A GPU whose last Xid is 79 fell off the bus: DCGM can no longer read the device, and
  dcgm-exporter skips blank values, so its device-read fields (temperatures, power, ECC,
  NVLink, remapped rows, Fabric Manager) vanish. Xids are different: the driver reports them
  as events, which DCGM records whatever state the device is in, so `DCGM_FI_DEV_XID_ERRORS`
  keeps reading 79 for that GPU (and `DCGM_EXP_XID_ERRORS_COUNT` counts it) until a reboot
  brings the GPU back with a clean gauge.
- `DCGM_FI_DEV_XID_ERRORS` is the last Xid DCGM recorded, not a current fault: it does not
  go back to 0 when the GPU recovers (NVIDIA/dcgm-exporter#500, NVIDIA/DCGM#277). Only a new
  DCGM (the exporter's embedded hostengine restarting with its container, or the node
  rebooting) starts with a clean gauge; a repair that must clear it restarts the exporter.
- `DCGM_EXP_XID_ERRORS_COUNT` (dcgm-exporter's `xidCollector`, a gauge): per GPU, how often
  each Xid occurred within the exporter's window (`--xid-count-window-size`, default 5 min),
  one series per code with labels `xid` and `window_size_in_ms`; a GPU without Xids in the
  window has one series valued 0 with `window_size_in_ms` and no `xid`. The faults keep only
  each GPU's last Xid, so the simulator logs an Xid event when a scrape first sees a GPU's
  last Xid change to a non-zero code, on the exporter's clock (two Xids injected between two
  scrapes count as the later one; the same code twice in a row counts once). The log of a
  node starts over when its boot id or its exporter's container changes: a reboot or an
  exporter restart starts a new DCGM, whose window then holds nothing older.

This module reads; it must never change the cluster or the GPU state it reads.
"""

from __future__ import annotations

import hashlib
import re
import threading
import weakref
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.kube_objects import labels_of, name_of, status_of
from gpusim.faulting import FaultError
from gpusim.hardware import XID_FELL_OFF_BUS, XID_ROW_REMAP_FAILURE, gpu_count
from gpusim.objects import Json
from gpusim.resources import BY_KIND, ApiError
from gpusim.state import ClusterState

XID_GAUGE = "DCGM_FI_DEV_XID_ERRORS"
XID_WINDOW_MS = 5 * 60 * 1000
"""dcgm-exporter's `--xid-count-window-size` default (milliseconds)."""
WINDOW_LABEL = "window_size_in_ms"
XID_LABEL = "xid"
_XID_LOG_LIMIT = 1000
"""Xid events kept per GPU: enough for any window a test uses, bounded for a long demo."""

FM_STATUS_NOT_STARTED = 1
FM_STATUS_SUCCESS = 3
"""`dcgmFabricManagerStatus_t`: NotSupported 0, NotStarted 1, InProgress 2, Success 3,
Failure 4, Unrecognized 5, NvmlTooOld 6. A stopped nvidia-fabricmanager leaves the fabric
NotStarted, which DCGM's health check counts as a failure."""


@dataclass(frozen=True)
class Field:
    """One DCGM field as dcgm-exporter's counters CSV declares it."""

    name: str
    type: str
    """Prometheus type as the CSV gives it: "gauge" or "counter"."""
    help: str


FIELDS: tuple[Field, ...] = (
    Field("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    Field("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    Field("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    Field("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    Field("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    Field(
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "counter",
        "Total number of single-bit volatile ECC errors.",
    ),
    Field(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
    ),
    Field(
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "counter",
        "Total number of single-bit persistent ECC errors.",
    ),
    Field(
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "counter",
        "Total number of double-bit persistent ECC errors.",
    ),
    Field(
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
    ),
    Field(
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink data CRC errors.",
    ),
    Field(
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink retries.",
    ),
    Field(
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink recovery errors.",
    ),
    Field(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
    ),
    Field(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors",
    ),
    Field("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    Field(
        "DCGM_FI_DEV_FABRIC_MANAGER_STATUS",
        "gauge",
        "The status of the fabric manager - a value from dcgmFabricManagerStatus_t.",
    ),
)
FIELD_NAMES = tuple(f.name for f in FIELDS)
"""The per-GPU fields: one series per GPU each."""

XID_COUNT = Field(
    "DCGM_EXP_XID_ERRORS_COUNT",
    "gauge",
    "Count of XID Errors within user-specified time window (see xid-count-window-size param).",
)
"""dcgm-exporter's own Xid count (`xidCollector`): one series per GPU and Xid code."""
ALL_FIELDS = (*FIELDS, XID_COUNT)
READABLE_WHEN_LOST = frozenset({XID_GAUGE})
"""What a GPU that fell off the bus still reports: the driver's Xid events, not device reads."""

GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")
DRIVER_LABEL = "DCGM_FI_DRIVER_VERSION"

# gpu_state() field -> DCGM field it feeds (counters the faults do not model read as 0).
_STATE_FIELDS = {
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "pcie_replay",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "ecc_sbe_volatile",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_dbe_volatile",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": "ecc_sbe_aggregate",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": "ecc_dbe_aggregate",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "nvlink_crc_flit_errors",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": "nvlink_crc_data_errors",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": "nvlink_replay_errors",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "nvlink_recovery_errors",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "uncorrectable_remapped_rows",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "correctable_remapped_rows",
}

# GFD's `nvidia.com/gpu.product` is the NVML device name with blanks turned into "-"; the
# reverse is ambiguous, so the common names are spelled out.
_MODEL_NAMES = {
    "NVIDIA-A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA-A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
    "NVIDIA-A100-80GB-PCIe": "NVIDIA A100 80GB PCIe",
    "NVIDIA-H100-80GB-HBM3": "NVIDIA H100 80GB HBM3",
    "NVIDIA-H100-PCIe": "NVIDIA H100 PCIe",
    "NVIDIA-H200": "NVIDIA H200",
    "NVIDIA-A10G": "NVIDIA A10G",
    "NVIDIA-L4": "NVIDIA L4",
    "NVIDIA-L40S": "NVIDIA L40S",
    "Tesla-V100-SXM2-16GB": "Tesla V100-SXM2-16GB",
    "Tesla-T4": "Tesla T4",
}
_PRODUCT_SUFFIX = re.compile(r"-(SHARED|MIG-.*)$")
# PCI bus ids of the 8 GPUs of an HGX A100 board (DGX A100), in index order.
_BUS_IDS = (0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD)


# ---- temperature overrides ------------------------------------------------------------------

_TEMPERATURES: weakref.WeakKeyDictionary[ClusterState, dict[tuple[str, int], float]] = (
    weakref.WeakKeyDictionary()
)
_TEMPERATURES_LOCK = threading.Lock()


def set_temperature(store: ClusterState, node: str, gpu: int, celsius: float | None) -> None:
    """Make `DCGM_FI_DEV_GPU_TEMP` of GPU `gpu` on `node` read `celsius` (None: back to its
    baseline). Raises FaultError, changing nothing, for an unknown node or GPU."""
    try:
        node_obj = store.get(BY_KIND["Node"], "", node)
    except ApiError as exc:
        raise FaultError(f'node "{node}" not found') from exc
    count = gpu_count(node_obj)
    if count == 0:
        raise FaultError(f'node "{node}" has no NVIDIA GPUs')
    if not isinstance(gpu, int) or isinstance(gpu, bool) or not 0 <= gpu < count:
        raise FaultError(f'gpu must be an index from 0 to {count - 1} on "{node}", not {gpu!r}')
    with _TEMPERATURES_LOCK:
        overrides = _TEMPERATURES.setdefault(store, {})
        if celsius is None:
            overrides.pop((node, gpu), None)
        else:
            overrides[(node, gpu)] = float(celsius)


def temperature_overrides(store: ClusterState) -> dict[tuple[str, int], float]:
    with _TEMPERATURES_LOCK:
        return dict(_TEMPERATURES.get(store, {}))


# ---- Xid events, as DCGM records them -------------------------------------------------------


@dataclass
class _XidLog:
    """One store's Xid events per (node, GPU), as the scrapes saw them happen."""

    boot: dict[str, str] = field(default_factory=dict)
    """node -> the boot id and exporter the node's events belong to."""
    last: dict[tuple[str, int], int] = field(default_factory=dict)
    """(node, GPU) -> the last Xid a scrape saw."""
    events: dict[tuple[str, int], deque[tuple[float, int]]] = field(default_factory=dict)
    """(node, GPU) -> (seconds since the epoch, Xid code), oldest first."""


_XID_LOGS: weakref.WeakKeyDictionary[ClusterState, _XidLog] = weakref.WeakKeyDictionary()
_XID_LOGS_LOCK = threading.Lock()


def _boot_id(node: Json) -> str:
    return str((status_of(node).get("nodeInfo") or {}).get("bootID") or "")


def observe_xids(
    store: ClusterState,
    node: Json,
    gpus: Mapping[int, Mapping[str, Any]],
    now: float,
    window_ms: int,
    exporter: str = "",
) -> dict[int, dict[int, int]]:
    """Log the Xids of `node` that changed since the last scrape (at `now`, seconds since the
    epoch) and return, per GPU index of the node, Xid code -> occurrences within the last
    `window_ms` (an empty dict: none). A new boot id, or a new `exporter` (the identity of the
    exporter process: its pod's uid), clears the node's log first: a new DCGM remembers no
    Xid."""
    name = name_of(node)
    boot = f"{_boot_id(node)}/{exporter}"
    since = now - window_ms / 1000
    counts: dict[int, dict[int, int]] = {}
    with _XID_LOGS_LOCK:
        log = _XID_LOGS.setdefault(store, _XidLog())
        if log.boot.get(name) != boot:
            log.boot[name] = boot
            for key in [k for k in (*log.last, *log.events) if k[0] == name]:
                log.last.pop(key, None)
                log.events.pop(key, None)
        for index in range(gpu_count(node)):
            key = (name, index)
            xid = int(gpus.get(index, {}).get("xid", 0))
            if xid != log.last.get(key, 0):
                log.last[key] = xid
                if xid:
                    events = log.events.setdefault(key, deque(maxlen=_XID_LOG_LIMIT))
                    events.append((now, xid))
            in_window: dict[int, int] = {}
            for at, code in log.events.get(key, ()):
                if since < at <= now:
                    in_window[code] = in_window.get(code, 0) + 1
            counts[index] = in_window
    return counts


# ---- one GPU's identity and readings --------------------------------------------------------


def model_name(product: str) -> str:
    """NVML's device name (dcgm-exporter's `modelName`) for a GFD `nvidia.com/gpu.product`."""
    product = _PRODUCT_SUFFIX.sub("", product)
    if product in _MODEL_NAMES:
        return _MODEL_NAMES[product]
    brand, _, rest = product.partition("-")
    return f"{brand} {rest}" if rest else brand


def gpu_uuid(node: str, index: int) -> str:
    """The GPU's UUID as NVML prints it, derived from node name and index."""
    h = hashlib.sha256(f"gpu-uuid/{node}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def pci_bus_id(index: int) -> str:
    bus = _BUS_IDS[index] if index < len(_BUS_IDS) else 0xC0 + index
    return f"00000000:{bus:02X}:00.0"


def _baseline(node: str, index: int) -> tuple[float, float, float]:
    """GPU temperature, memory temperature (°C) and power (W) of a GPU busy training."""
    raw = hashlib.sha256(f"gpu-load/{node}/{index}".encode()).digest()
    gpu_temp = 52 + raw[0] % 12
    memory_temp = gpu_temp + 4 + raw[1] % 6
    power = 280 + int.from_bytes(raw[2:4], "big") % 90_000 / 1000
    return float(gpu_temp), float(memory_temp), round(power, 3)


@dataclass(frozen=True)
class GpuSeries:
    """One GPU's labels and its values, as dcgm-exporter would serve them: one per DCGM
    field it can read (`FIELDS`; a GPU that fell off the bus has only the Xid gauge), and
    the Xid counts of the exporter's window (`DCGM_EXP_XID_ERRORS_COUNT`)."""

    labels: dict[str, str]
    values: dict[str, float]
    xid_counts: dict[int, int] = field(default_factory=dict)
    """Xid code -> occurrences within the window; empty: none (the 0-valued series)."""


def node_series(
    node: Json,
    gpus: Mapping[int, Mapping[str, Any]],
    temperatures: Mapping[tuple[str, int], float],
    node_label: str | None = None,
    xid_counts: Mapping[int, Mapping[int, int]] | None = None,
) -> list[GpuSeries]:
    """The series of every GPU of `node`; `gpus` is `gpu_state(store)[node]`, `xid_counts`
    what `observe_xids` returned for it (None: no Xid in the window)."""
    name = name_of(node)
    labels = labels_of(node)
    model = model_name(labels.get("nvidia.com/gpu.product", ""))
    driver = labels.get("nvidia.com/cuda.driver-version.full", "")
    series = []
    for index in range(gpu_count(node)):
        state = gpus.get(index, {})
        xid = int(state.get("xid", 0))
        gpu_temp, memory_temp, power = _baseline(name, index)
        gpu_labels = {
            "gpu": str(index),
            "UUID": gpu_uuid(name, index),
            "pci_bus_id": pci_bus_id(index),
            "device": f"nvidia{index}",
            "modelName": model,
            "Hostname": name,
            DRIVER_LABEL: driver,
        }
        if node_label:
            gpu_labels[node_label] = name
        values = {metric: float(state.get(key, 0)) for metric, key in _STATE_FIELDS.items()}
        values.update(
            {
                "DCGM_FI_DEV_GPU_TEMP": temperatures.get((name, index), gpu_temp),
                "DCGM_FI_DEV_MEMORY_TEMP": memory_temp,
                "DCGM_FI_DEV_POWER_USAGE": power,
                XID_GAUGE: float(xid),
                "DCGM_FI_DEV_ROW_REMAP_FAILURE": float(
                    bool(state.get("row_remap_failure")) or xid == XID_ROW_REMAP_FAILURE
                ),
                "DCGM_FI_DEV_FABRIC_MANAGER_STATUS": float(
                    FM_STATUS_NOT_STARTED
                    if state.get("fabric_manager") == "down"
                    else FM_STATUS_SUCCESS
                ),
            }
        )
        if xid == XID_FELL_OFF_BUS:
            values = {k: v for k, v in values.items() if k in READABLE_WHEN_LOST}
        counts = dict((xid_counts or {}).get(index, {}))
        series.append(GpuSeries(gpu_labels, values, counts))
    return series
