"""Evidence from Prometheus for one GPU node: what dcgm-exporter saw over a window.

Why it exists: an alert says "Xid on gpu-a3"; the on-call wants to know which GPU, which Xid
and when, whether ECC or NVLink counters moved, whether a GPU stopped reporting, and whether
the exporter is even up, before deciding to drain. `gather_gpu_evidence` asks Prometheus
(through the `Metrics` port) a fixed set of instant queries, side by side, all evaluated at
the same moment, and folds the answers into one `GpuEvidence`; `lines` turns it into short
English or Chinese lines for a diagnosis' evidence list.

What it must never do: raise because Prometheus is down, slow or refuses a query. The
diagnosis is posted anyway, saying "evidence unavailable: <reason>". It never imports a
Prometheus client library (the port is the edge; `bot.prom.client` is the adapter), and it
never puts a node name into PromQL unescaped.

Metric names, types and labels are dcgm-exporter's (its default-counters.csv and README):
- `DCGM_FI_DEV_XID_ERRORS` is a gauge holding the *last* Xid, so the codes seen are the
  distinct non-zero values over the window (a subquery with `count_values` turns each value
  into an `xid` label and gives its first time); `max_over_time` catches a value too short
  for the subquery's step.
- `DCGM_EXP_XID_ERRORS_COUNT` (a gauge: Xids in the exporter's own sliding window) and
  `DCGM_EXP_XID_ERRORS_TOTAL` (a counter) carry the code in their `xid` label; both are off
  by default.
- Counters' increases are exact (`max_over_time - min_over_time`) unless the counter reset in
  the window (a reboot clears volatile ECC counts), where `increase()` takes over: the
  extrapolation of `increase()` alone would turn "+2" into "+2.3".
- A GPU that fell off the bus (Xid 79) stops reporting its device reads (temperature, power,
  ECC) but keeps its Xid gauge at 79: it shows as `reporting = False` with the time it was
  last seen, and Xid 79 among its codes.
- Everything is grouped `by (gpu, UUID)`, so a MIG GPU's instances count once.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict

from bot.clock import utcnow
from bot.errors import GpubotError, TemporaryError
from bot.model import XidFacts
from bot.ports import Metrics, Sample

XID_GAUGE = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
XID_TOTAL = "DCGM_EXP_XID_ERRORS_TOTAL"
ECC = {
    ("sbe", "VOL"): "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    ("sbe", "AGG"): "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    ("dbe", "VOL"): "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    ("dbe", "AGG"): "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
}
NVLINK = {
    "crc_flit": "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "crc_data": "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "replay": "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "recovery": "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
}
ROWS_UNCORRECTABLE = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
ROWS_CORRECTABLE = "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
POWER = "DCGM_FI_DEV_POWER_USAGE"
ALWAYS_ON = f"{GPU_TEMP}|{POWER}"
"""Device reads dcgm-exporter serves by default: a GPU with neither is not reporting. The Xid
gauge is left out because a GPU that fell off the bus keeps it (Xids are driver events)."""

DEFAULT_EXPORTER_JOB = ".*dcgm.*"
MAX_WORKERS = 8
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_BY_GPU = "by (gpu, UUID)"


class _Frozen(BaseModel):
    # Built when first used: `gpubot diagnose` of a snapshot never asks Prometheus.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class XidSeen(_Frozen):
    """One Xid code on one GPU within the window."""

    code: int
    first_seen: datetime | None = None
    """The first evaluation step (of the subquery) at which the code was set; None when only
    `max_over_time` or the exporter's count metrics caught it."""
    already_set: bool = False
    """The code was already there when the window began: not new."""
    count: int | None = None
    """Occurrences counted by `DCGM_EXP_XID_ERRORS_COUNT` / `_TOTAL`, when exported."""


class GpuMetrics(_Frozen):
    """One GPU's readings over the window; None: the field is not exported (or no data)."""

    gpu: str
    uuid: str = ""
    reporting: bool = True
    """Has series now. A GPU that fell off the bus (Xid 79) stops reporting."""
    last_seen: datetime | None = None
    xids: tuple[XidSeen, ...] = ()
    ecc_sbe_increase: int | None = None
    ecc_dbe_increase: int | None = None
    ecc_sbe_total: int | None = None
    """The aggregate (persistent) count, or the volatile one when only that is exported."""
    ecc_dbe_total: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_correctable: int | None = None
    row_remap_failure: bool | None = None
    nvlink_crc_flit_increase: int | None = None
    nvlink_crc_data_increase: int | None = None
    nvlink_replay_increase: int | None = None
    nvlink_recovery_increase: int | None = None
    temperature_max_c: float | None = None
    power_w: float | None = None
    """The last reading in the window."""
    power_max_w: float | None = None

    @property
    def nvlink_errors_increase(self) -> int | None:
        parts = [
            self.nvlink_crc_flit_increase,
            self.nvlink_crc_data_increase,
            self.nvlink_replay_increase,
            self.nvlink_recovery_increase,
        ]
        known = [p for p in parts if p is not None]
        return sum(known) if known else None


class GpuEvidence(_Frozen):
    """What Prometheus knew about one node's GPUs at `at`, over `window_s` before it."""

    node: str
    node_label: str
    window_s: int
    at: datetime
    available: bool
    unavailable_reason: str = ""
    exporter_up: bool | None = None
    """The exporter's `up` when its target was found, else whether any series is present;
    None when Prometheus could not be asked."""
    exporter_target_found: bool = False
    """An `up` series of the node's exporter target exists (target label configured)."""
    gpus: tuple[GpuMetrics, ...] = ()
    not_exported: tuple[str, ...] = ()
    """Field groups ("ecc", "nvlink", "remapped_rows") without a single series while GPUs
    report: the exporter's counters CSV leaves them off (they are off by default)."""

    def gpu(self, index: int | str) -> GpuMetrics | None:
        return next((g for g in self.gpus if g.gpu == str(index)), None)

    @property
    def xids(self) -> list[tuple[str, XidSeen]]:
        return [(g.gpu, x) for g in self.gpus for x in g.xids]


# ---- PromQL -----------------------------------------------------------------------------


def promql_string(value: str) -> str:
    """`value` as a PromQL string literal: double quotes, backslash escapes (JSON's escapes
    are a subset of the Go escapes PromQL reads), non-ASCII left as UTF-8."""
    return json.dumps(value, ensure_ascii=False)


def _duration(seconds: float) -> str:
    return f"{max(1, math.ceil(seconds))}s"


def _exact_increase(metric: str, selector: str, window: str, by: str = _BY_GPU) -> str:
    """A counter's increase over the window: exact without resets, `increase()` with."""
    rng = f"{metric}{{{selector}}}[{window}]"
    return (
        f"max {by} ("
        f"((max_over_time({rng}) - min_over_time({rng})) unless resets({rng}) > 0)"
        f" or increase({rng}))"
    )


def build_queries(
    node: str,
    window_s: int,
    *,
    node_label: str = "Hostname",
    target_node_label: str | None = None,
    exporter_job: str = DEFAULT_EXPORTER_JOB,
    step_s: int | None = None,
) -> dict[str, str]:
    """name -> PromQL, every node value escaped. Raises ValueError for a bad label name."""
    target_label = target_node_label or node_label
    for label in (node_label, target_label):
        if not _LABEL_NAME.match(label):
            raise ValueError(f"not a Prometheus label name: {label!r}")
    if window_s < 1:
        raise ValueError(f"window_s must be at least 1 second, not {window_s}")
    sel = f"{node_label}={promql_string(node)}"
    w = _duration(window_s)
    step = _duration(step_s if step_s else max(1, window_s // 120))
    sub = f"[{w}:{step}]"
    queries = {
        "xid_first": (
            f'min_over_time(timestamp(count_values {_BY_GPU} ("xid", {XID_GAUGE}{{{sel}}} > 0))'
            f"{sub})"
        ),
        "xid_max": f"max {_BY_GPU} (max_over_time({XID_GAUGE}{{{sel}}}[{w}])) > 0",
        "xid_count": (
            f'max by (gpu, UUID, xid) (max_over_time({XID_COUNT}{{{sel}, xid!~"|0"}}[{w}])) > 0'
        ),
        "xid_total": (
            _exact_increase(XID_TOTAL, f'{sel}, xid!~"|0"', w, "by (gpu, UUID, xid)") + " > 0"
        ),
        "rows_uncorrectable": f"max {_BY_GPU} (last_over_time({ROWS_UNCORRECTABLE}{{{sel}}}[{w}]))",
        "rows_correctable": f"max {_BY_GPU} (last_over_time({ROWS_CORRECTABLE}{{{sel}}}[{w}]))",
        "row_remap_failure": f"max {_BY_GPU} (max_over_time({ROW_REMAP_FAILURE}{{{sel}}}[{w}]))",
        "temperature_max": f"max {_BY_GPU} (max_over_time({GPU_TEMP}{{{sel}}}[{w}]))",
        "power": f"max {_BY_GPU} (last_over_time({POWER}{{{sel}}}[{w}]))",
        "power_max": f"max {_BY_GPU} (max_over_time({POWER}{{{sel}}}[{w}]))",
        "last_seen": (
            f'max_over_time(timestamp(group {_BY_GPU} ({{__name__=~"{ALWAYS_ON}", {sel}}})){sub})'
        ),
        "reporting": f'group {_BY_GPU} ({{__name__=~"{ALWAYS_ON}", {sel}}})',
        "up": f"up{{job=~{promql_string(exporter_job)}, {target_label}={promql_string(node)}}}",
    }
    # When the exporter's own count first went above zero, per code.
    queries["xid_count_first"] = (
        f"min_over_time(timestamp(max by (gpu, UUID, xid) "
        f'({XID_COUNT}{{{sel}, xid!~"|0"}}) > 0){sub})'
    )
    for kind in ("sbe", "dbe"):
        volatile, aggregate = ECC[(kind, "VOL")], ECC[(kind, "AGG")]
        queries[f"ecc_{kind}_increase"] = (
            f"{_exact_increase(volatile, sel, w)} or {_exact_increase(aggregate, sel, w)}"
        )
        queries[f"ecc_{kind}_total"] = (
            f"max {_BY_GPU} (last_over_time({aggregate}{{{sel}}}[{w}]))"
            f" or max {_BY_GPU} (last_over_time({volatile}{{{sel}}}[{w}]))"
        )
    for kind, metric in NVLINK.items():
        queries[f"nvlink_{kind}_increase"] = _exact_increase(metric, sel, w)
    return queries


# ---- asking -----------------------------------------------------------------------------


def _ask_all(
    metrics: Metrics, queries: Mapping[str, str], at: datetime, timeout_s: float
) -> dict[str, list[Sample]] | str:
    """Every query side by side within one deadline: the answers, or why there are none."""
    deadline = time.monotonic() + timeout_s

    def ask(promql: str) -> list[Sample]:
        remaining = deadline - time.monotonic()
        if remaining <= 0.001:
            raise TemporaryError(f"Prometheus did not answer within {timeout_s:g} s")
        return metrics.query(promql, at=at, timeout_s=remaining)

    pool = ThreadPoolExecutor(
        max_workers=min(MAX_WORKERS, len(queries)), thread_name_prefix="gpu-evidence"
    )
    try:
        futures: dict[str, Future[list[Sample]]] = {
            name: pool.submit(ask, promql) for name, promql in queries.items()
        }
        done, pending = wait(
            futures.values(),
            timeout=max(0.0, deadline - time.monotonic()),
            return_when=FIRST_EXCEPTION,
        )
        failed = [f for f in done if f.exception() is not None]
        if failed:
            return _reason(failed[0].exception(), len(failed), len(queries))
        if pending:
            return (
                f"Prometheus did not answer {len(pending)} of {len(queries)} queries"
                f" within {timeout_s:g} s"
            )
        return {name: future.result() for name, future in futures.items()}
    finally:
        # Never wait for a slow Prometheus: queued queries are dropped, running ones end on
        # their own HTTP timeout.
        pool.shutdown(wait=False, cancel_futures=True)


def _reason(exc: BaseException | None, failed: int, total: int) -> str:
    # A bug or a broken adapter says what it was rather than hiding behind "unavailable".
    text = str(exc) if isinstance(exc, GpubotError) else f"{type(exc).__name__}: {exc}"
    return text if failed <= 1 else f"{text} (and {failed - 1} more of {total} queries)"


# ---- folding the answers ----------------------------------------------------------------


@dataclass
class _Xid:
    code: int
    first_seen: datetime | None = None
    count: int | None = None


def _gpu_key(labels: Mapping[str, str]) -> str:
    return labels.get("gpu", "")


def _sort_key(gpu: str) -> tuple[int, str]:
    return (int(gpu), "") if gpu.isdigit() else (1 << 30, gpu)


def _moment(value: float) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if math.isfinite(value) else None


def _count(value: float) -> int | None:
    return round(value) if math.isfinite(value) else None


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _per_gpu(samples: Iterable[Sample]) -> dict[str, float]:
    return {_gpu_key(labels): value for labels, value in samples}


def _fold(
    answers: Mapping[str, list[Sample]],
    window_start: datetime,
    step_s: int,
) -> tuple[tuple[GpuMetrics, ...], bool, bool, tuple[str, ...]]:
    uuids: dict[str, str] = {}
    for samples in answers.values():
        for labels, _ in samples:
            if "gpu" in labels and labels.get("UUID"):
                uuids.setdefault(labels["gpu"], labels["UUID"])

    # Xid codes per GPU, from the gauge's distinct values and from the exporter's counts.
    xids: dict[str, dict[int, _Xid]] = {}

    def xid_entry(gpu: str, code_text: str) -> _Xid | None:
        try:
            code = int(float(code_text))
        except ValueError:
            return None
        if code <= 0:
            return None
        return xids.setdefault(gpu, {}).setdefault(code, _Xid(code))

    for name in ("xid_first", "xid_count_first"):  # the gauge's time wins over the count's
        for labels, value in answers[name]:
            entry = xid_entry(_gpu_key(labels), labels.get("xid", ""))
            if entry is not None and entry.first_seen is None:
                entry.first_seen = _moment(value)
    for labels, value in answers["xid_max"]:
        xid_entry(_gpu_key(labels), str(value))
    for name in ("xid_count", "xid_total"):
        for labels, value in answers[name]:
            entry = xid_entry(_gpu_key(labels), labels.get("xid", ""))
            count = _count(value)
            if entry is not None and count is not None:
                entry.count = max(count, entry.count or 0)

    per_gpu = {name: _per_gpu(samples) for name, samples in answers.items()}
    reporting = set(per_gpu["reporting"])
    gpus = set(per_gpu["last_seen"]) | reporting | set(xids)
    for name in ("temperature_max", "power", "rows_uncorrectable", "ecc_dbe_total"):
        gpus |= set(per_gpu[name])

    def count_of(name: str, gpu: str) -> int | None:
        value = per_gpu[name].get(gpu)
        return None if value is None else _count(value)

    def number_of(name: str, gpu: str) -> float | None:
        value = per_gpu[name].get(gpu)
        return None if value is None else _number(value)

    folded = []
    for gpu in sorted(gpus, key=_sort_key):
        seen = tuple(
            XidSeen(
                code=x.code,
                first_seen=x.first_seen,
                already_set=x.first_seen is not None
                and x.first_seen <= window_start + timedelta(seconds=step_s),
                count=x.count,
            )
            for x in sorted(xids.get(gpu, {}).values(), key=lambda x: x.code)
        )
        failure = per_gpu["row_remap_failure"].get(gpu)
        last_seen = per_gpu["last_seen"].get(gpu)
        folded.append(
            GpuMetrics(
                gpu=gpu,
                uuid=uuids.get(gpu, ""),
                reporting=gpu in reporting,
                last_seen=None if last_seen is None else _moment(last_seen),
                xids=seen,
                ecc_sbe_increase=count_of("ecc_sbe_increase", gpu),
                ecc_dbe_increase=count_of("ecc_dbe_increase", gpu),
                ecc_sbe_total=count_of("ecc_sbe_total", gpu),
                ecc_dbe_total=count_of("ecc_dbe_total", gpu),
                remapped_rows_uncorrectable=count_of("rows_uncorrectable", gpu),
                remapped_rows_correctable=count_of("rows_correctable", gpu),
                row_remap_failure=None if failure is None else failure > 0,
                nvlink_crc_flit_increase=count_of("nvlink_crc_flit_increase", gpu),
                nvlink_crc_data_increase=count_of("nvlink_crc_data_increase", gpu),
                nvlink_replay_increase=count_of("nvlink_replay_increase", gpu),
                nvlink_recovery_increase=count_of("nvlink_recovery_increase", gpu),
                temperature_max_c=number_of("temperature_max", gpu),
                power_w=number_of("power", gpu),
                power_max_w=number_of("power_max", gpu),
            )
        )

    up_values = [value for _, value in answers["up"]]
    target_found = bool(up_values)
    exporter_up = any(v == 1 for v in up_values) if target_found else bool(reporting)
    not_exported: list[str] = []
    if folded:
        groups = {
            "ecc": ("ecc_sbe_total", "ecc_dbe_total"),
            "nvlink": tuple(f"nvlink_{kind}_increase" for kind in NVLINK),
            "remapped_rows": ("rows_uncorrectable", "rows_correctable", "row_remap_failure"),
        }
        not_exported = [
            group for group, names in groups.items() if not any(per_gpu[n] for n in names)
        ]
    return tuple(folded), exporter_up, target_found, tuple(not_exported)


def gather_gpu_evidence(
    metrics: Metrics,
    node: str,
    window_s: int,
    *,
    node_label: str = "Hostname",
    timeout_s: float = 3.0,
    at: datetime | None = None,
    target_node_label: str | None = None,
    exporter_job: str = DEFAULT_EXPORTER_JOB,
    step_s: int | None = None,
) -> GpuEvidence:
    """Ask Prometheus about `node`'s GPUs over the `window_s` seconds before `at` (now).

    `node_label` names the node in the DCGM series (`Hostname` as dcgm-exporter sets it, or
    what a relabeling adds: `node`, `kubernetes_node`); `target_node_label` names it on the
    exporter's `up` series (default: `node_label`), whose job matches the regex
    `exporter_job`. `step_s` is the resolution of "first seen" times (default: a 120th of
    the window, at least 1 s). Every query runs at once; all of them together get
    `timeout_s`. Never raises: when Prometheus cannot be asked, `available` is False and
    `unavailable_reason` says why.
    """
    moment = (at or utcnow()).astimezone(UTC)

    def unavailable(reason: str) -> GpuEvidence:
        return GpuEvidence(
            node=node,
            node_label=node_label,
            window_s=window_s,
            at=moment,
            available=False,
            unavailable_reason=reason,
        )

    step = step_s if step_s else max(1, window_s // 120)
    try:
        queries = build_queries(
            node,
            window_s,
            node_label=node_label,
            target_node_label=target_node_label,
            exporter_job=exporter_job,
            step_s=step,
        )
    except ValueError as exc:
        return unavailable(str(exc))
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        return unavailable(f"timeout_s must be a positive number of seconds, not {timeout_s}")
    answers = _ask_all(metrics, queries, moment, timeout_s)
    if isinstance(answers, str):
        return unavailable(answers)
    try:
        gpus, exporter_up, target_found, not_exported = _fold(
            answers, moment - timedelta(seconds=window_s), step
        )
    except Exception as exc:  # an answer of a shape no query should give: report, not raise
        return unavailable(f"could not read Prometheus' answers: {type(exc).__name__}: {exc}")
    return GpuEvidence(
        node=node,
        node_label=node_label,
        window_s=window_s,
        at=moment,
        available=True,
        exporter_up=exporter_up,
        exporter_target_found=target_found,
        gpus=gpus,
        not_exported=not_exported,
    )


def xid_facts(evidence: GpuEvidence) -> list[XidFacts]:
    """The Xids seen, as the facts the rules read (`source` "prometheus")."""
    return [XidFacts(code=x.code, gpu=gpu, source="prometheus") for gpu, x in evidence.xids]
