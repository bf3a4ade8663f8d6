"""The Prometheus evidence of one GPU node as short lines of a diagnosis, in Chinese or English.

Why it exists: `GpuEvidence` (bot/facts/gpu_metrics.py) is what Prometheus said; this is what
the on-call reads. What it must never do: query anything, or claim more than the evidence
holds (an exporter that is down is said to be down, not "no errors"), or word a line itself:
its sentences are the catalogue's (`metrics.*` in bot/texts/diagnosis_texts.py), in both
languages.
"""

from __future__ import annotations

from datetime import UTC, datetime

from bot.facts.gpu_metrics import GpuEvidence
from bot.model import Lang
from bot.texts import say


def _span(seconds: int, lang: Lang) -> str:
    if seconds < 120:
        return say(lang, "metrics.span.seconds", seconds=seconds)
    if seconds < 2 * 3600:
        return say(lang, "metrics.span.minutes", minutes=round(seconds / 60))
    return say(lang, "metrics.span.hours", hours=f"{round(seconds / 3600, 1):g}")


def _clock(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%H:%M} UTC"


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


def _findings(evidence: GpuEvidence, lang: Lang, hot_c: float) -> list[tuple[str, str]]:
    """(kind, line) for what each GPU shows wrong over the window."""
    span = _span(evidence.window_s, lang)
    out: list[tuple[str, str]] = []
    for g in evidence.gpus:
        if not g.reporting and evidence.exporter_up and g.last_seen is not None:
            out.append(("stopped", say(lang, "metrics.stopped", gpu=g.gpu, at=_clock(g.last_seen))))
        for x in g.xids:
            if x.first_seen is None:
                text = say(lang, "metrics.xid", gpu=g.gpu, code=x.code)
            elif x.already_set:
                text = say(
                    lang, "metrics.xid_before", gpu=g.gpu, code=x.code, at=_clock(x.first_seen)
                )
            else:
                text = say(lang, "metrics.xid_at", gpu=g.gpu, code=x.code, at=_clock(x.first_seen))
            if x.count:
                text += say(lang, "metrics.xid_count", count=x.count)
            out.append(("xid", text))
        for kind, increase, total in (
            ("DBE", g.ecc_dbe_increase, g.ecc_dbe_total),
            ("SBE", g.ecc_sbe_increase, g.ecc_sbe_total),
        ):
            if increase:
                shown = total if total is not None else "?"
                line = say(
                    lang,
                    "metrics.ecc",
                    gpu=g.gpu,
                    kind=kind,
                    increase=increase,
                    span=span,
                    total=shown,
                )
                out.append((f"ecc-{kind.lower()}", line))
        if g.row_remap_failure:
            out.append(("remap_failure", say(lang, "metrics.remap_failure", gpu=g.gpu)))
        if g.remapped_rows_uncorrectable:
            rows = g.remapped_rows_uncorrectable
            out.append(("remapped", say(lang, "metrics.remapped", gpu=g.gpu, rows=rows)))
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
            line = say(
                lang,
                "metrics.nvlink",
                gpu=g.gpu,
                total=g.nvlink_errors_increase,
                span=span,
                parts=say(lang, "list.comma").join(parts),
            )
            out.append(("nvlink", line))
        if g.temperature_max_c is not None and g.temperature_max_c >= hot_c:
            out.append(
                ("hot", say(lang, "metrics.hot", gpu=g.gpu, temp=f"{g.temperature_max_c:g} °C"))
            )
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

    if not evidence.available:
        return [say(lang, "metrics.unavailable", reason=evidence.unavailable_reason)]
    span = _span(evidence.window_s, lang)
    out: list[str] = []
    if evidence.exporter_target_found and not evidence.exporter_up:
        out.append(say(lang, "metrics.exporter_down", node=evidence.node))
    elif not evidence.exporter_up:
        out.append(
            say(lang, "metrics.no_series", node=evidence.node, label=evidence.node_label, span=span)
        )
    elif not evidence.gpus:
        out.append(say(lang, "metrics.wrong_label", node=evidence.node, label=evidence.node_label))
    findings = _findings(evidence, lang, hot_c)
    out += [line for _kind, line in findings]
    reporting = [g for g in evidence.gpus if g.reporting]
    if reporting:
        temps = [g.temperature_max_c for g in reporting if g.temperature_max_c is not None]
        powers = [g.power_w for g in reporting if g.power_w is not None]
        out.append(
            say(
                lang,
                "metrics.summary",
                node=evidence.node,
                reporting=len(reporting),
                temp=f"{max(temps):g} °C" if temps else "?",
                power=f"{sum(powers):.0f} W" if powers else "?",
            )
        )
        if not findings:
            out.append(say(lang, "metrics.clean", span=span))
        if evidence.not_exported:
            groups = say(lang, "list.enumeration").join(
                _GROUP_NAMES[g] for g in evidence.not_exported
            )
            out.append(say(lang, "metrics.not_exported", groups=groups))
    return out
