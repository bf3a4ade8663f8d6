"""What a drain costs the training jobs on a node: GPU pods and how old their last checkpoint
is. It goes into the approval request as its risk, so the person clicking "Approve drain"
reads it in the confirm dialog before they lose someone's eight hours of training."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.kube_objects import (
    Obj,
    meta,
    name_of,
    namespace_of,
    parse_time,
    pod_finished,
    pod_requests,
)
from bot.model import Lang
from bot.texts import say


def checkpoint_risk(
    pods: Sequence[Obj],
    now: datetime,
    *,
    gpu_resource: str,
    annotation: str,
    max_age_s: int,
    lang: Lang = Lang.EN,
) -> str:
    """ "" when every GPU pod checkpointed within `max_age_s`; otherwise one sentence naming
    the pods that would lose progress and since when."""
    at_risk: list[str] = []
    for pod in pods:
        if pod_finished(pod) or pod_requests(pod).get(gpu_resource, 0) <= 0:
            continue
        if meta(pod).get("deletionTimestamp"):
            continue
        raw = (meta(pod).get("annotations") or {}).get(annotation)
        saved = parse_time(raw) if raw else None
        who = f"{namespace_of(pod)}/{name_of(pod)}"
        if saved is None:
            at_risk.append(say(lang, "risk.no_checkpoint", who=who))
        elif (now - saved).total_seconds() > max_age_s:
            ago = int((now - saved).total_seconds() // 60)
            at_risk.append(say(lang, "risk.last", who=who, minutes=ago))
    if not at_risk:
        return ""
    return say(
        lang,
        "risk.pod" if len(at_risk) == 1 else "risk.pods",
        n=len(at_risk),
        minutes=max_age_s // 60,
        pods=", ".join(at_risk),
    )
