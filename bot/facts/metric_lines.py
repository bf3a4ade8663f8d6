"""The Prometheus evidence of one GPU node as short lines of a diagnosis, in Chinese or English.

Why it exists: `GpuEvidence` (bot/facts/gpu_metrics.py) is what Prometheus said; this is what
the on-call reads. What it must never do: query anything, or claim more than the evidence
holds (an exporter that is down is said to be down, not "no errors").
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from bot.facts.gpu_metrics import GpuEvidence
from bot.model import Lang


def _span(seconds: int, lang: Lang) -> str:
    if seconds < 120:
        return f"{seconds} 秒" if lang == Lang.ZH else f"{seconds} s"
    if seconds < 2 * 3600:
        minutes = round(seconds / 60)
        return f"{minutes} 分钟" if lang == Lang.ZH else f"{minutes} min"
    hours = round(seconds / 3600, 1)
    text = f"{hours:g}"
    return f"{text} 小时" if lang == Lang.ZH else f"{text} h"


def _clock(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%H:%M} UTC"


_TEXT: dict[str, Mapping[Lang, str]] = {
    "unavailable": {Lang.EN: "evidence unavailable: {reason}", Lang.ZH: "证据不可用：{reason}"},
    "exporter_down": {
        Lang.EN: "dcgm-exporter on {node} is down (up = 0)",
        Lang.ZH: "{node} 上的 dcgm-exporter 已停止（up = 0）",
    },
    "no_series": {
        Lang.EN: "no dcgm-exporter metrics for {node} ({label}) in the last {span}",
        Lang.ZH: "最近 {span}内没有 {node} 的 dcgm-exporter 指标（标签 {label}）",
    },
    "wrong_label": {
        Lang.EN: 'dcgm-exporter on {node} is up, but no series has {label}="{node}":'
        " is the node label right?",
        Lang.ZH: '{node} 上的 dcgm-exporter 在运行，但没有带 {label}="{node}" 的序列：'
        "节点标签配置对吗？",
    },
    "summary": {
        Lang.EN: "{node}: {reporting} GPU(s) reporting, hottest {temp}, {power} in total",
        Lang.ZH: "{node}：{reporting} 块 GPU 在上报，最高温度 {temp}，总功耗 {power}",
    },
    "stopped": {
        Lang.EN: "GPU {gpu}: stopped reporting at {at} (a GPU that fell off the bus does)",
        Lang.ZH: "GPU {gpu}：{at} 起不再上报指标（GPU 掉卡时就是这样）",
    },
    "xid_at": {
        Lang.EN: "GPU {gpu}: Xid {code} at {at}",
        Lang.ZH: "GPU {gpu}：{at} 出现 Xid {code}",
    },
    "xid_before": {
        Lang.EN: "GPU {gpu}: Xid {code} (already set at {at})",
        Lang.ZH: "GPU {gpu}：Xid {code}（{at} 时已存在）",
    },
    "xid": {Lang.EN: "GPU {gpu}: Xid {code}", Lang.ZH: "GPU {gpu}：Xid {code}"},
    "xid_count": {Lang.EN: ", {count}× counted", Lang.ZH: "，计数 {count} 次"},
    "ecc": {
        Lang.EN: "GPU {gpu}: ECC {kind} +{increase} in {span} (total {total})",
        Lang.ZH: "GPU {gpu}：ECC {kind} 在 {span}内 +{increase}（累计 {total}）",
    },
    "remap_failure": {
        Lang.EN: "GPU {gpu}: row remapping failed",
        Lang.ZH: "GPU {gpu}：行重映射失败",
    },
    "remapped": {
        Lang.EN: "GPU {gpu}: {rows} row(s) remapped for uncorrectable errors",
        Lang.ZH: "GPU {gpu}：因不可纠正错误已重映射 {rows} 行",
    },
    "nvlink": {
        Lang.EN: "GPU {gpu}: NVLink errors +{total} in {span} ({parts})",
        Lang.ZH: "GPU {gpu}：NVLink 错误在 {span}内 +{total}（{parts}）",
    },
    "hot": {
        Lang.EN: "GPU {gpu}: temperature up to {temp}",
        Lang.ZH: "GPU {gpu}：温度最高 {temp}",
    },
    "clean": {
        Lang.EN: "no Xid, ECC, row-remap or NVLink errors in the last {span}",
        Lang.ZH: "最近 {span}内没有 Xid、ECC、行重映射或 NVLink 错误",
    },
    "not_exported": {
        Lang.EN: "not exported by dcgm-exporter: {groups} (enable them in its counters CSV)",
        Lang.ZH: "dcgm-exporter 未导出：{groups}（需在其 counters CSV 中开启）",
    },
}
_NVLINK_NAMES = {
    "crc_flit": "CRC flit",
    "crc_data": "CRC data",
    "replay": "replay",
    "recovery": "recovery",
}
_GROUP_NAMES = {"ecc": "ECC", "nvlink": "NVLink", "remapped_rows": "remapped rows"}


ERRORS = frozenset({"stopped", "xid", "ecc-dbe", "remap_failure", "nvlink"})
"""Finding kinds that are GPU errors (the health gate's "no new errors"); the rest (SBE ECC,
rows remapped long ago, heat) are worth reading but do not keep a node out."""


def _say(lang: Lang, key: str, **values: object) -> str:
    return _TEXT[key][lang].format(**values)


def _findings(evidence: GpuEvidence, lang: Lang, hot_c: float) -> list[tuple[str, str]]:
    """(kind, line) for what each GPU shows wrong over the window."""
    span = _span(evidence.window_s, lang)
    out: list[tuple[str, str]] = []
    for g in evidence.gpus:
        if not g.reporting and evidence.exporter_up and g.last_seen is not None:
            out.append(("stopped", _say(lang, "stopped", gpu=g.gpu, at=_clock(g.last_seen))))
        for x in g.xids:
            if x.first_seen is None:
                text = _say(lang, "xid", gpu=g.gpu, code=x.code)
            elif x.already_set:
                text = _say(lang, "xid_before", gpu=g.gpu, code=x.code, at=_clock(x.first_seen))
            else:
                text = _say(lang, "xid_at", gpu=g.gpu, code=x.code, at=_clock(x.first_seen))
            if x.count:
                text += _say(lang, "xid_count", count=x.count)
            out.append(("xid", text))
        for kind, increase, total in (
            ("DBE", g.ecc_dbe_increase, g.ecc_dbe_total),
            ("SBE", g.ecc_sbe_increase, g.ecc_sbe_total),
        ):
            if increase:
                shown = total if total is not None else "?"
                line = _say(
                    lang, "ecc", gpu=g.gpu, kind=kind, increase=increase, span=span, total=shown
                )
                out.append((f"ecc-{kind.lower()}", line))
        if g.row_remap_failure:
            out.append(("remap_failure", _say(lang, "remap_failure", gpu=g.gpu)))
        if g.remapped_rows_uncorrectable:
            rows = g.remapped_rows_uncorrectable
            out.append(("remapped", _say(lang, "remapped", gpu=g.gpu, rows=rows)))
        if g.nvlink_errors_increase:
            parts = [
                f"{_NVLINK_NAMES[kind]} +{value}"
                for kind, value in (
                    ("crc_flit", g.nvlink_crc_flit_increase),
                    ("crc_data", g.nvlink_crc_data_increase),
                    ("replay", g.nvlink_replay_increase),
                    ("recovery", g.nvlink_recovery_increase),
                )
                if value
            ]
            separator = "，" if lang == Lang.ZH else ", "
            line = _say(
                lang,
                "nvlink",
                gpu=g.gpu,
                total=g.nvlink_errors_increase,
                span=span,
                parts=separator.join(parts),
            )
            out.append(("nvlink", line))
        if g.temperature_max_c is not None and g.temperature_max_c >= hot_c:
            out.append(("hot", _say(lang, "hot", gpu=g.gpu, temp=f"{g.temperature_max_c:g} °C")))
    return out


def error_lines(evidence: GpuEvidence, lang: Lang) -> list[str] | None:
    """The GPU errors the window holds, one line each; None when Prometheus could not say
    (unavailable, or no series of the node: no evidence is not a clean window)."""
    if not evidence.available or not evidence.exporter_up or not evidence.gpus:
        return None
    return [line for kind, line in _findings(evidence, lang, float("inf")) if kind in ERRORS]


def lines(evidence: GpuEvidence, lang: Lang, *, hot_c: float = 85.0) -> list[str]:
    """Short lines for a diagnosis' evidence list, in `lang`: what is wrong first, then one
    summary line. Temperatures are mentioned per GPU only from `hot_c` up."""

    def say(key: str, **values: object) -> str:
        return _say(lang, key, **values)

    if not evidence.available:
        return [say("unavailable", reason=evidence.unavailable_reason)]
    span = _span(evidence.window_s, lang)
    out: list[str] = []
    if evidence.exporter_target_found and not evidence.exporter_up:
        out.append(say("exporter_down", node=evidence.node))
    elif not evidence.exporter_up:
        out.append(say("no_series", node=evidence.node, label=evidence.node_label, span=span))
    elif not evidence.gpus:
        out.append(say("wrong_label", node=evidence.node, label=evidence.node_label))
    findings = _findings(evidence, lang, hot_c)
    out += [line for _kind, line in findings]
    reporting = [g for g in evidence.gpus if g.reporting]
    if reporting:
        temps = [g.temperature_max_c for g in reporting if g.temperature_max_c is not None]
        powers = [g.power_w for g in reporting if g.power_w is not None]
        out.append(
            say(
                "summary",
                node=evidence.node,
                reporting=len(reporting),
                temp=f"{max(temps):g} °C" if temps else "?",
                power=f"{sum(powers):.0f} W" if powers else "?",
            )
        )
        if not findings:
            out.append(say("clean", span=span))
        if evidence.not_exported:
            separator = "、" if lang == Lang.ZH else ", "
            groups = separator.join(_GROUP_NAMES[g] for g in evidence.not_exported)
            out.append(say("not_exported", groups=groups))
    return out
