"""How gpubot reads an alert it did not write: its symptom, node, GPU and Xid code, by the
alert mapping (`rules/alerts.yaml`, whose header comment is the spec this module follows).

Why it exists: clusters already run their own GPU alert rules. AWS names its Xid alert
`GPUXidError`, like gpubot's, but without the `xid` label; a tutorial's `GpuXidError` has the
code only in its summary ("XID 79 on gpu-node-1 GPU 0"); IBM Autopilot's alerts carry only
`node`; nvidia_gpu_exporter's carry no node label at all, only the exporter pod's address.
`understand` reads each alert as the mapping says (its name, else the metrics of the
expression in its generatorURL, else a name pattern), and the intake presents it to the rules
under the gpubot alert name they read (`as_alert`), with `xid` set, saying how it was read.
An alert that means nothing to gpubot is kept under its own name as evidence on its node.

What it must never do: ask anything over the network (the code Prometheus knows is read by
`xid_from_prometheus` from evidence the live pass gathered), raise on an alert (what cannot
be read is `unknown`), or run in the webhook's HTTP handler (the inbox runs it when it splits a
stored delivery: the webhook only validates and stores).
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal, Protocol
from urllib.parse import parse_qs, urlsplit

from bot.config import ALERTS_FILE, Settings, bundled_rules_dir
from bot.errors import InputError
from bot.facts.gpu_metrics import GpuEvidence, GpuMetrics
from bot.model import Signal
from bot.outside_text import shown_name
from bot.rules.loading import (
    ASK_PROMETHEUS,
    EVIDENCE_ONLY,
    POD_REFS,
    SYMPTOM,
    UNDERSTOOD,
    UUID,
    AlertEntry,
    AlertMapping,
    MetricEntry,
    XidSource,
    load_alert_mapping,
)

log = logging.getLogger(__name__)

UNKNOWN = "unknown"
XID = "xid"
SEVERAL = "gpu-health"
"""What an expression over metrics of several symptoms means, when no name pattern says more
("XID > 0 or DBE > 0": some GPU health fault)."""
MAX_NODE = 253
"""A node name is a DNS subdomain: a longer label value is not one (and the store's column
would refuse it)."""
MAX_XID = 999
_ANNOTATIONS_FIRST = ("summary", "description", "message")
_WHERE = {"summary": "the summary", "description": "the description", "message": "the message"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_CODE = re.compile(r"\d{1,3}")
_ADDRESS_CHARACTERS = re.compile(r"[0-9a-fA-F:.]+")
_SITE_DEFAULT = list(Settings.model_fields["node_labels"].default)
"""`Settings.node_labels` as shipped: a site that left it so has said nothing about its own."""


class AlertLike(Protocol):
    """What `understand` reads of an alert (a `WebhookAlert`, or anything shaped like it)."""

    @property
    def labels(self) -> dict[str, str]: ...

    @property
    def annotations(self) -> dict[str, str]: ...

    @property
    def generatorURL(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Understood:
    """One alert as gpubot reads it. (A plain dataclass: the intake makes one for every alert
    of every delivery.)"""

    alertname: str
    symptom: str
    """A symptom of the mapping, or `unknown`."""
    as_alert: str | None = None
    """The gpubot alert name the rules read it as; None: no rule reads it (evidence only)."""
    by: Literal["name", "metric", "pattern", "nothing"] = "nothing"
    why: str = ""
    """How the symptom was found, in words ("by its name")."""
    scope: str | None = None
    source: str | None = None
    """Where the mapping entry that named it comes from."""
    metrics: tuple[str, ...] = ()
    """Known metrics in the expression that raised it."""
    node: str | None = None
    node_label: str | None = None
    node_is_address: bool = False
    """The node is an IP address still to be found among the nodes' addresses (and, with
    `pods`, the pods' IPs)."""
    pods: tuple[str, ...] = ()
    """"namespace/name" of pods whose node is the alert's node, when no label names it."""
    gpu: str | None = None
    gpu_label: str | None = None
    uuid: str | None = None
    """The GPU's UUID, lowercase, without `GPU-`."""
    xid: int | None = None
    xid_where: str | None = None
    """Where the code was read ("the summary", "the label err_code")."""
    ask_prometheus: bool = False
    """An Xid alert without a code in the payload, whose code Prometheus may know."""
    native: bool = False
    """gpubot's own alert, read as it is: nothing to explain."""
    how: str = ""

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "name": self.name, "evidence_only": self.evidence_only}

    @property
    def name(self) -> str:
        """The name the rules see."""
        return self.as_alert or self.alertname

    @property
    def evidence_only(self) -> bool:
        return self.as_alert is None or (self.symptom == XID and self.xid is None)

    def annotations(self) -> dict[str, str]:
        """What the signal's annotations say of this reading (keys `gpubot.*`)."""
        found: dict[str, str] = {}
        if not self.native:
            found[UNDERSTOOD] = self.how
            found[SYMPTOM] = self.symptom
        if self.evidence_only:
            found[EVIDENCE_ONLY] = "true"
        if self.pods:
            found[POD_REFS] = " ".join(self.pods)
        if self.ask_prometheus:
            found[ASK_PROMETHEUS] = "true"
        if self.uuid and self.gpu is None:
            found[UUID] = self.uuid
        return found


# ---- the mapping in use -----------------------------------------------------------------------

_broken: set[str] = set()


def shipped_alert_mapping() -> AlertMapping | None:
    """The mapping shipped with the rules, read once; None (logged once) if it does not load,
    and then alerts are taken as they come, as before there was a mapping."""
    path = bundled_rules_dir() / ALERTS_FILE
    try:
        return load_alert_mapping(path)
    except InputError as exc:
        if str(path) not in _broken:
            _broken.add(str(path))
            log.error("alert mapping not loaded, alerts are read by their names only: %s", exc)
        return None


def alert_mapping(settings: Settings) -> AlertMapping:
    """The mapping the settings name (`alerts_file`, else the rules directory's, else the
    shipped one), read once; an `InputError` naming the problem if it does not load."""
    return load_alert_mapping(settings.alert_mapping_file())


# ---- reading one alert ------------------------------------------------------------------------


def strip_port(instance: str) -> str:
    """`host:port` → `host` (`[v6]:port` → `v6`); anything else as it is."""
    if instance.startswith("["):  # [::1]:9400
        return instance[1:].split("]", 1)[0]
    host, sep, port = instance.rpartition(":")
    if sep and port.isdigit() and ":" not in host:
        return host
    return instance


def is_address(value: str) -> bool:
    if not _ADDRESS_CHARACTERS.fullmatch(value):  # a node name, cheaply
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


@lru_cache(maxsize=1024)
def expression_of(generator_url: str) -> str | None:
    """The PromQL that raised an alert: Prometheus puts it in generatorURL's `g0.expr`.
    (Remembered: the alerts of one rule share it.)"""
    if not generator_url:
        return None
    try:
        query = parse_qs(urlsplit(generator_url).query)
    except ValueError:
        return None
    found = query.get("g0.expr")
    return found[0] if found else None


@lru_cache(maxsize=1024)
def _identifiers(expression: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_IDENTIFIER.findall(_STRING.sub(" ", expression))))


def metrics_in(expression: str, mapping: AlertMapping) -> list[str]:
    """The mapping's metrics that the expression names, in their order (string literals,
    such as label values, left out)."""
    return [t for t in _identifiers(expression) if t in mapping.metrics]


def _code(value: str | None) -> int | None:
    text = (value or "").strip()
    if not _CODE.fullmatch(text):
        return None
    code = int(text)
    return code if 0 < code <= MAX_XID else None


def _xid_in_text(annotations: Mapping[str, str], mapping: AlertMapping) -> tuple[int, str] | None:
    keys = [k for k in _ANNOTATIONS_FIRST if k in annotations]
    keys += [k for k in annotations if k not in _ANNOTATIONS_FIRST and not k.startswith("gpubot.")]
    for key in keys:
        for pattern in mapping.xid_text:
            match = pattern.search(annotations[key])
            code = _code(match.group(1)) if match else None
            if code is not None:
                return code, _WHERE.get(key, f"the annotation {key}")
    return None


def _node(labels: Mapping[str, str], keys: Iterable[str]) -> tuple[str | None, str | None, bool]:
    """(node, label, is an address): the first label naming a node; an IP address only when no
    later label names one by its name."""
    address: tuple[str, str] | None = None
    for key in keys:
        value = (labels.get(key) or "").strip()
        if key == "instance":
            value = strip_port(value)
        if not value or len(value) > MAX_NODE:
            continue
        if is_address(value):
            address = address or (value, key)
            continue
        return value, key, False
    if address is not None:
        return address[0], address[1], True
    return None, None, False


def _first(labels: Mapping[str, str], keys: Iterable[str]) -> tuple[str | None, str | None]:
    for key in keys:
        value = (labels.get(key) or "").strip()
        if value:
            return value, key
    return None, None


def normal_uuid(uuid: str) -> str:
    """dcgm-exporter writes `GPU-<uuid>`, nvidia_gpu_exporter `<uuid>` lowercase."""
    text = uuid.strip().lower()
    return text[4:] if text.startswith("gpu-") else text


def _classify(
    alertname: str, labels: Mapping[str, str], metrics: list[str], mapping: AlertMapping
) -> tuple[str, Literal["name", "metric", "pattern", "nothing"], str, MetricEntry | None]:
    """(symptom, by, why, the metric that decided): the spec's step 1, b to d (a is the
    caller's: the alert's name)."""
    strong = [m for m in metrics if not mapping.metrics[m].context]
    chosen = strong or metrics
    symptoms = list(dict.fromkeys(mapping.metrics[m].symptom for m in chosen))
    if len(symptoms) == 1:
        deciding = [mapping.metrics[m] for m in chosen]
        metric = next((m for m in deciding if m.value_is == "xid_code"), deciding[0])
        named = ", ".join(chosen)
        plural = "s" if len(chosen) > 1 else ""
        return symptoms[0], "metric", f"by the metric{plural} {named} in its expression", metric
    if symptoms or mapping.gpu_looking(alertname, labels):
        pattern = mapping.name_pattern(alertname)
        if pattern is not None:
            return pattern.symptom, "pattern", f"by its name (pattern {pattern.pattern})", None
    if len(symptoms) > 1 and SEVERAL in mapping.symptoms:
        why = f"by its expression ({', '.join(chosen)}: several symptoms at once)"
        return SEVERAL, "metric", why, None
    return UNKNOWN, "nothing", "", None


def understand(
    alert: AlertLike, mapping: AlertMapping, node_labels: Sequence[str] = ()
) -> Understood:
    """How gpubot reads one alert. `node_labels` are the site's (`Settings.node_labels`):
    left at their default they are tried after the mapping's default labels; set to anything
    else they come first (the site knows its relabeling best). An entry's own list replaces
    both."""
    labels = alert.labels
    alertname = labels.get("alertname", "")
    expression = expression_of(alert.generatorURL)
    metrics = metrics_in(expression, mapping) if expression else []
    entry = mapping.entry(alertname)
    metric: MetricEntry | None = None
    by: Literal["name", "metric", "pattern", "nothing"] = "name"
    if entry is not None:
        symptom, why = entry.symptom, "by its name"
    else:
        symptom, by, why, metric = _classify(alertname, labels, metrics, mapping)
    if symptom != UNKNOWN and symptom not in mapping.symptoms:
        symptom, by, why = UNKNOWN, "nothing", ""
    as_alert = mapping.as_alert(symptom) if symptom != UNKNOWN else None
    defaults = mapping.defaults

    def listed(own: list[str] | None, default: list[str]) -> list[str]:
        return own if own is not None else default

    scope = entry.scope if entry is not None else None
    node: str | None = None
    node_label: str | None = None
    address = False
    pods: tuple[str, ...] = ()
    if scope != "cluster":
        if entry is not None and entry.node_labels is not None:
            keys = list(entry.node_labels)
        else:
            site = list(node_labels)
            first = (
                [*defaults.node_labels, *site]
                if site == _SITE_DEFAULT
                else [*site, *defaults.node_labels]
            )
            keys = list(dict.fromkeys(first))
        node, node_label, address = _node(labels, keys)
        if (node is None or address) and symptom != UNKNOWN:
            pairs = entry.pod_labels if entry is not None and entry.pod_labels is not None else None
            pods = tuple(
                f"{labels[ns]}/{labels[pod]}"
                for ns, pod in (pairs if pairs is not None else defaults.pod_labels)
                if labels.get(ns) and labels.get(pod)
            )
    gpu = gpu_label = uuid = None
    if scope != "cluster":
        gpu, gpu_label = _first(
            labels, listed(entry.gpu_labels if entry else None, defaults.gpu_labels)
        )
        found_uuid, _ = _first(
            labels, listed(entry.uuid_labels if entry else None, defaults.uuid_labels)
        )
        uuid = normal_uuid(found_uuid) if found_uuid else None

    xid: int | None = None
    xid_where: str | None = None
    ask = False
    xid_labels: list[str] = []
    if symptom == XID:
        xid_labels, sources = _xid_lists(entry, metric, mapping)
        for source in sources:
            if source == "labels":
                xid_label = next((k for k in xid_labels if _code(labels.get(k)) is not None), None)
                if xid_label is not None:
                    xid, xid_where = _code(labels[xid_label]), f"the label {xid_label}"
            elif source == "text":
                found = _xid_in_text(alert.annotations, mapping)
                if found is not None:
                    xid, xid_where = found
            if xid is not None:
                break
        ask = xid is None and "prometheus" in sources
    native = (
        by == "name" and as_alert == alertname and (symptom != XID or xid_where == "the label xid")
    )
    draft = Understood(
        alertname=alertname,
        symptom=symptom,
        as_alert=as_alert,
        by=by,
        why=why,
        scope=scope,
        source=entry.source if entry is not None else None,
        metrics=tuple(metrics),
        node=node,
        node_label=node_label,
        node_is_address=address,
        pods=pods,
        gpu=gpu,
        gpu_label=gpu_label,
        uuid=uuid,
        xid=xid,
        xid_where=xid_where,
        ask_prometheus=ask,
        native=native,
    )
    gpu_looking = symptom != UNKNOWN or mapping.gpu_looking(alertname, labels)
    return replace(draft, how=_how(draft, xid_labels, expression is not None, gpu_looking))


def _xid_lists(
    entry: AlertEntry | None, metric: MetricEntry | None, mapping: AlertMapping
) -> tuple[list[str], list[XidSource]]:
    """(xid_labels, xid_from) of an Xid alert: the entry's, else the deciding metric's, else
    the defaults. A metric whose value is the code lets Prometheus be asked."""
    if entry is not None and entry.xid_labels is not None:
        xid_labels = list(entry.xid_labels)
    elif metric is not None and metric.xid_labels is not None:
        xid_labels = list(metric.xid_labels)
    else:
        xid_labels = list(mapping.defaults.xid_labels)
    sources: list[XidSource]
    if entry is not None and entry.xid_from is not None:
        sources = list(entry.xid_from)
    elif metric is not None and metric.value_is == "xid_code":
        sources = ["labels", "text", "prometheus"]
    else:
        sources = list(mapping.defaults.xid_from)
    return xid_labels, sources


def _how(
    reading: Understood, xid_labels: list[str], has_expression: bool, gpu_looking: bool
) -> str:
    name = reading.alertname or "(no alertname)"
    if reading.symptom == UNKNOWN:
        reasons = ["no entry of the mapping names it"]
        reasons.append(
            "no metric of the mapping in its expression"
            if has_expression
            else "it carries no expression (generatorURL)"
        )
        reasons.append(
            "no name pattern matches it"
            if gpu_looking
            else "neither its name nor its labels look GPU-related (no name pattern applies)"
        )
        return f"{name} not understood: {', '.join(reasons)}"
    if reading.symptom == XID:
        if reading.xid is not None:
            text = f"Xid {reading.xid} read from {reading.xid_where} of {name}"
        else:
            where = f"its labels ({', '.join(xid_labels)})" if xid_labels else "its labels"
            text = f"no Xid code in {name}: not in {where} nor in its annotations"
            if reading.ask_prometheus:
                text += "; Prometheus' series holds it when gpubot is given Prometheus"
        if reading.by != "name":
            text += f" (an Xid alert {reading.why})"
        return text
    target = reading.as_alert
    shown = f" ({target})" if target and target != name else ""
    text = f"{name} read as {reading.symptom}{shown} {reading.why}"
    if target is None:
        text += f"; no rule reads {reading.symptom} alerts yet"
    return text


def explain(reading: Understood) -> list[str]:
    """Lines for `gpubot alerts explain`: how one alert was understood, or why not."""
    lines = [f"  understood: {reading.how}"]
    if reading.symptom == UNKNOWN:
        lines.append("  rules:      none read it; shown as 'also firing' on its node's diagnoses")
    else:
        presented = reading.as_alert or f"{reading.alertname} (evidence only)"
        lines.append(f"  symptom:    {reading.symptom} {reading.why}, presented as {presented}")
    if reading.source:
        lines.append(f"  source:     {reading.source}")
    if reading.metrics:
        lines.append(f"  metrics:    {', '.join(reading.metrics)}")
    if reading.scope == "cluster":
        lines.append("  node:       none (a cluster-wide alert)")
    elif reading.node is None and not reading.pods:
        lines.append("  node:       none of its labels names one")
    else:
        node = (
            f"{shown_name(reading.node)} (label {reading.node_label})"
            if reading.node
            else "no label"
        )
        if reading.node_is_address:
            node += ": an address, looked up among the nodes' addresses"
            node += " and the pods' IPs" if reading.pods else ""
        if reading.pods:
            node += f"; else the node of pod {' or '.join(reading.pods)}"
        lines.append(f"  node:       {node}")
    gpu = f"{reading.gpu} (label {reading.gpu_label})" if reading.gpu else None
    if reading.uuid:
        gpu = f"{gpu + ', ' if gpu else ''}UUID {reading.uuid}"
    if gpu:
        lines.append(f"  GPU:        {gpu}")
    if reading.symptom == XID:
        if reading.xid is not None:
            lines.append(f"  Xid:        {reading.xid} (from {reading.xid_where})")
        else:
            later = "; asked of Prometheus in gpubot serve" if reading.ask_prometheus else ""
            lines.append(f"  Xid:        not in the alert{later}")
    return lines


# ---- the code Prometheus knows (the live pass) --------------------------------------------------


def _gpus_of(evidence: GpuEvidence, alert: Understood) -> list[GpuMetrics]:
    if alert.gpu is not None:
        found = evidence.gpu(alert.gpu)
        return [found] if found is not None else []
    if alert.uuid:
        return [g for g in evidence.gpus if g.uuid and normal_uuid(g.uuid) == alert.uuid]
    return list(evidence.gpus)


def xid_from_prometheus(evidence: GpuEvidence, alert: Understood) -> list[int]:
    """The Xid codes Prometheus saw on the alert's GPU (by index, else by UUID; every GPU of
    the node when the alert names none) within the evidence's window, the newest first: the
    first is the current value of `DCGM_FI_DEV_XID_ERRORS` (a gauge holding the last Xid),
    the series an alert on `DCGM_FI_DEV_XID_ERRORS > 0` selects. [] when Prometheus could not
    be asked or saw none."""
    if not evidence.available:
        return []
    seen = [(x.first_seen, x.code) for g in _gpus_of(evidence, alert) for x in g.xids]
    oldest = datetime.min.replace(tzinfo=evidence.at.tzinfo)
    seen.sort(key=lambda pair: (pair[0] is not None, pair[0] or oldest), reverse=True)
    return list(dict.fromkeys(code for _, code in seen))


def gpu_from_prometheus(evidence: GpuEvidence, alert: Understood) -> str | None:
    """The GPU index of an alert that names its GPU by UUID only, from the node's
    dcgm-exporter series (label UUID)."""
    if alert.gpu is not None or not alert.uuid or not evidence.available:
        return alert.gpu
    found = _gpus_of(evidence, alert)
    return found[0].gpu if len(found) == 1 else None


def awaiting_prometheus(signal: Signal) -> Understood | None:
    """The reading of a firing Xid alert whose code only Prometheus may know, or None."""
    if signal.annotations.get(ASK_PROMETHEUS) != "true" or signal.node is None:
        return None
    if signal.status != "firing" or signal.labels.get("xid", "").isdigit():
        return None
    return Understood(
        alertname=signal.labels.get("alertname", signal.name),
        symptom=XID,
        as_alert=signal.name,
        node=signal.node,
        gpu=signal.gpu,
        uuid=signal.annotations.get(UUID),
        ask_prometheus=True,
    )


def with_prometheus_xids(
    signals: Sequence[Signal], evidence_of: Callable[[str], GpuEvidence]
) -> list[Signal]:
    """Signals whose Xid code only Prometheus knows, given the newest code it saw on their GPU
    (`xid_from_prometheus`), said so in `gpubot.understood`; the rest as they are. One
    `evidence_of(node)` per node, only for nodes with such an alert."""
    gathered: dict[str, GpuEvidence] = {}
    done: list[Signal] = []
    for signal in signals:
        alert = awaiting_prometheus(signal)
        if alert is None or alert.node is None:
            done.append(signal)
            continue
        if alert.node not in gathered:
            gathered[alert.node] = evidence_of(alert.node)
        evidence = gathered[alert.node]
        codes = xid_from_prometheus(evidence, alert)
        if not codes:
            done.append(signal)
            continue
        gpu = gpu_from_prometheus(evidence, alert)
        annotations = {
            k: v for k, v in signal.annotations.items() if k not in (EVIDENCE_ONLY, ASK_PROMETHEUS)
        }
        annotations[UNDERSTOOD] = (
            f"Xid {codes[0]} read from Prometheus ({evidence.node_label}={evidence.node}"
            f"{', GPU ' + gpu if gpu else ''}) for {alert.alertname}"
        )
        done.append(
            signal.model_copy(
                update={
                    "gpu": gpu,
                    "labels": {**signal.labels, "xid": str(codes[0])},
                    "annotations": annotations,
                }
            )
        )
    return done
