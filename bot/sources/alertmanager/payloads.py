"""Alertmanager webhook (payload version 4) -> Signals.

The payload schema follows prometheus/alertmanager `notify/webhook/webhook.go`. Unknown extra
fields are kept (Alertmanager adds fields over time); missing required ones are an
InputError naming the field, so the receiver can answer 400 and Alertmanager will not retry.

Each alert becomes a signal as the alert mapping reads it (`understanding`): under the gpubot
alert name the rules read, with `xid` set when a code was found, its node and GPU from the
mapping's labels, its original `alertname` kept and how it was read in `gpubot.*`
annotations. That runs when a stored delivery is split (`signals_from_body`), never in the
webhook's handler, which only validates (`parse_webhook`).

The webhook's door and the inbox's split judge a body with the same function
(`storable_payload`): what the door accepts, the split can turn into signals the store keeps.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.config import InputLimits
from bot.errors import InputError
from bot.input_files import Limit
from bot.model import Signal
from bot.rules.loading import AlertMapping
from bot.sources.alertmanager.understanding import (
    shipped_alert_mapping,
    strip_port,
    understand,
)
from bot.yamlfiles import load_located


class WebhookAlert(BaseModel):
    model_config = ConfigDict(extra="allow")

    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: datetime | None = None
    endsAt: datetime | None = None
    generatorURL: str = ""
    fingerprint: str = ""


class WebhookPayload(BaseModel):
    model_config = ConfigDict(extra="allow")

    version: str = "4"
    groupKey: str = ""
    truncatedAlerts: int = 0
    receiver: str = ""
    status: Literal["firing", "resolved"]
    alerts: list[WebhookAlert]
    groupLabels: dict[str, str] = Field(default_factory=dict)
    commonLabels: dict[str, str] = Field(default_factory=dict)
    commonAnnotations: dict[str, str] = Field(default_factory=dict)
    externalURL: str = ""


ALERT_BYTES = 3_400
"""What one alert may take in a webhook body, for sizing the receiver's `max_alerts` against
`serve.max_body_bytes`. Measured on the real Alertmanager 0.25 (JSON as its Go encoder writes
it): gpubot's own GPUXidError from dcgm-exporter behind a ServiceMonitor is 1,480 bytes (its
generatorURL, the whole rule expression URL-encoded, is 516 of them); the alerts of other
rules in tests/data/alertmanager/community are 566 to 1,460. This is more than twice the
largest: a site's own labels (cluster, region, team), longer node and pod names."""

ENVELOPE_BYTES = 4_096
"""A notification's fields beside its alerts (receiver, status, group, common labels and
annotations, externalURL, groupKey, truncatedAlerts): 535 to 1,461 bytes in the captures,
the most when one alert makes every label common."""


def alerts_that_fit(limit_bytes: int) -> int:
    """How many alerts a notification may carry (`max_alerts`) for its body to stay within
    `limit_bytes`: 307 for the default 1 MiB."""
    return max(1, (limit_bytes - ENVELOPE_BYTES) // ALERT_BYTES)


def node_from_labels(labels: dict[str, str], node_labels: Iterable[str]) -> str | None:
    """The first of `node_labels` that is set (`instance` without its port): the webhook's
    quick look, before any mapping is applied."""
    for key in node_labels:
        value = labels.get(key)
        if value:
            return strip_port(value) if key == "instance" else value
    return None


def _fingerprint(alert: WebhookAlert) -> str:
    if alert.fingerprint:
        return alert.fingerprint
    canonical = json.dumps(sorted(alert.labels.items()))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _ends_at(alert: WebhookAlert) -> datetime | None:
    # Alertmanager writes Go's zero time (year 1) for "no end yet".
    return None if alert.endsAt is None or alert.endsAt.year <= 1 else alert.endsAt


def validate_payload(raw: Any, where: str = "payload") -> WebhookPayload:
    try:
        return WebhookPayload.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise InputError(where, f"field {field}: {first['msg']}") from exc


def parse_webhook(body: bytes) -> WebhookPayload:
    """A webhook body as Alertmanager sends it, or an `InputError` naming what is wrong.

    pydantic reads the bytes itself (no Python objects in between: this is the webhook's hot
    path). Input it refuses is read again the slow way only to say precisely why: an empty
    body, text that is not JSON, JSON that is not an object, or the field that is wrong."""
    try:
        return WebhookPayload.model_validate_json(body)
    except ValidationError:
        pass
    if not body.strip():
        raise InputError("body", "empty: expected an Alertmanager webhook payload (JSON)")
    try:
        # JSON on the wire is UTF-8 (RFC 8259). Python's reader would take other bytes (it
        # decodes with `surrogatepass`, so a raw ED A0 80 becomes a lone surrogate) that no
        # database can hold: such a body must never get a 200 it cannot be split after.
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            "body", f"not JSON: not valid UTF-8 at byte {exc.start} ({exc.reason})"
        ) from None
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError("body", f"not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise InputError(
            "body", f"expected a JSON object (webhook payload v4), got {type(raw).__name__}"
        )
    # Python's JSON reader takes what pydantic's refused (a lone surrogate, say): the caller's
    # checks of the texts then name the field.
    return validate_payload(raw)


# What the store's columns hold (bot/store/tables.py, `signals`): PostgreSQL refuses longer
# text, NUL characters and lone surrogates with an error that would otherwise be a 500.
MAX_NAME = 200
MAX_FINGERPRINT = 200
MAX_NODE = 253
MAX_INT32 = 2**31 - 1


def storable_payload(body: bytes, node_labels: Iterable[str]) -> WebhookPayload:
    """`parse_webhook`, then `check_storable`: a payload whose signals the store can keep, or
    an `InputError` naming the field. The webhook answers 200 only for a body this accepts,
    and the inbox splits with it, so an accepted body can always be split."""
    payload = parse_webhook(body)
    # pydantic's reader refuses lone surrogates and `parse_webhook` bytes that are not UTF-8,
    # and NUL can only come as an escape: unless one is spelled out, every text is fit to store.
    texts_fit = b"\\u0000" not in body and b"\\ud" not in body and b"\\uD" not in body
    check_storable(payload, node_labels, check_texts=not texts_fit)
    return payload


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _check_text(where: str, text: str) -> None:
    if "\0" in text:
        raise InputError("payload", f"field {where}: contains a NUL character")
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise InputError("payload", f"field {where}: not valid Unicode ({exc.reason})") from exc


def check_storable(
    payload: WebhookPayload, node_labels: Iterable[str], *, check_texts: bool = True
) -> None:
    """Text and numbers the store can hold, or an `InputError` naming the field: a valid
    payload must not meet its first refusal in the database (that would be a 5xx).
    `check_texts=False` skips looking for NUL and lone surrogates, for a body known free of
    them."""
    node_labels = list(node_labels)
    if not 0 <= payload.truncatedAlerts <= MAX_INT32:
        raise InputError("payload", f"field truncatedAlerts: must be 0 to {MAX_INT32}")
    if check_texts:
        _check_text("groupKey", payload.groupKey)
    for index, alert in enumerate(payload.alerts):
        at = f"alerts.{index}"
        if check_texts:
            for field, mapping in (("labels", alert.labels), ("annotations", alert.annotations)):
                for key, value in mapping.items():
                    _check_text(f"{at}.{field} (a key)", key)
                    _check_text(f"{at}.{field}.{_short(key)}", value)
            _check_text(f"{at}.fingerprint", alert.fingerprint)
        if len(alert.fingerprint) > MAX_FINGERPRINT:
            raise InputError(
                "payload", f"field {at}.fingerprint: longer than {MAX_FINGERPRINT} characters"
            )
        if len(alert.labels.get("alertname", "")) > MAX_NAME:
            raise InputError(
                "payload", f"field {at}.labels.alertname: longer than {MAX_NAME} characters"
            )
        node = node_from_labels(alert.labels, node_labels)
        if node is not None and len(node) > MAX_NODE:
            raise InputError(
                "payload",
                f"field {at}.labels: the node name {_short(node)!r} is longer than "
                f"{MAX_NODE} characters",
            )


def signals_from_body(
    body: bytes, node_labels: Iterable[str], mapping: AlertMapping | None = None
) -> list[Signal]:
    """A stored delivery's signals, judged as the webhook judged it when it arrived
    (`storable_payload`): an `InputError` for one an older gpubot let in."""
    node_labels = list(node_labels)
    return signals_from_payload(storable_payload(body, node_labels), node_labels, mapping)


def signals_from_payload(
    payload: WebhookPayload, node_labels: Iterable[str], mapping: AlertMapping | None = None
) -> list[Signal]:
    """One signal per alert, as `mapping` reads it (default: the shipped mapping).
    `node_labels` (the site's, `Settings.node_labels`) are tried after the mapping's own."""
    node_labels = list(node_labels)
    reading = mapping if mapping is not None else shipped_alert_mapping()
    signals = []
    for alert in payload.alerts:
        if reading is None:  # no mapping could be loaded: the alert as it comes
            signals.append(_signal(payload, alert, node_from_labels(alert.labels, node_labels)))
            continue
        understood = understand(alert, reading, node_labels)
        labels = dict(alert.labels)
        if understood.xid is not None:
            labels["xid"] = str(understood.xid)
        # gpubot.* annotations are gpubot's word: an alert cannot bring its own.
        annotations = {k: v for k, v in alert.annotations.items() if not k.startswith("gpubot.")}
        annotations.update(understood.annotations())
        signals.append(
            _signal(
                payload,
                alert,
                understood.node,
                name=understood.name,
                gpu=understood.gpu,
                labels=labels,
                annotations=annotations,
            )
        )
    return signals


def _signal(
    payload: WebhookPayload,
    alert: WebhookAlert,
    node: str | None,
    *,
    name: str | None = None,
    gpu: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> Signal:
    return Signal(
        source="alertmanager",
        name=name if name is not None else alert.labels.get("alertname", ""),
        status=alert.status,
        node=node,
        gpu=gpu if name is not None else alert.labels.get("gpu"),
        labels=labels if labels is not None else alert.labels,
        annotations=annotations if annotations is not None else alert.annotations,
        starts_at=alert.startsAt,
        ends_at=_ends_at(alert),
        fingerprint=_fingerprint(alert),
        group_key=payload.groupKey or None,
        truncated_alerts=payload.truncatedAlerts,
    )


def read_payloads(path: Path, limit: Limit | None = None) -> list[WebhookPayload]:
    """A file holding one webhook payload, or a list of them (JSON or YAML), within `limit`
    (the default alerts-file limit when None). Read as YAML, the one bounded way
    (`bot.yamlfiles`): aliases past Kubernetes' limit are refused."""
    raw = load_located(path, limit or InputLimits().alerts()).data
    items = raw if isinstance(raw, list) else [raw]
    payloads = []
    for index, item in enumerate(items):
        where = f"{path}[{index}]" if isinstance(raw, list) else str(path)
        if not isinstance(item, dict):
            raise InputError(where, "expected an Alertmanager webhook payload (a mapping)")
        payloads.append(validate_payload(item, where))
    return payloads


def load_alerts_file(
    path: Path,
    node_labels: Iterable[str],
    mapping: AlertMapping | None = None,
    limit: Limit | None = None,
) -> list[Signal]:
    """The signals of a file holding one webhook payload, or a list of them (JSON or YAML)."""
    node_labels = list(node_labels)
    signals: list[Signal] = []
    for payload in read_payloads(path, limit):
        signals.extend(signals_from_payload(payload, node_labels, mapping))
    return signals
