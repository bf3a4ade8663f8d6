"""Server-side printing: the `Table` kube-apiserver answers when kubectl asks for one.

kubectl's `get` sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...` and prints
the columns and cells the server computed, so what a person sees of a node, a pod or an event
is the server's doing. This module is the table machinery: it reads the Accept header, picks
the kind's printer, and builds the rows; the printers themselves, one per kind and each a
transcription of its function in pkg/printers/internalversion/printers.go, are
`gpusim.core_printers`, `gpusim.pod_printer`, `gpusim.workload_printers` and
`gpusim.access_printers`, over the cells they share (`gpusim.table_cells`). The server always
generates the wide columns (priority 1) and kubectl shows them only with `-o wide` (the table
convertor in pkg/registry/*/storage calls the generator with `Wide: true`). Ages are
apimachinery's `duration.HumanDuration` of the time since the timestamp, at the moment of the
request. Each row carries the object as `includeObject` asks: `PartialObjectMetadata` by
default (what kubectl reads the NAMESPACE column and `--show-labels` from), the whole object,
or none. Kinds without a printer get the default convertor's NAME and CREATED AT.

Pure functions of the objects they are given and the time: they must never read the cluster.
"""

from __future__ import annotations

from datetime import UTC, datetime

from bot.kube_objects import meta, status_of
from gpusim import access_printers, core_printers, pod_printer, workload_printers
from gpusim.objects import Json
from gpusim.table_cells import CREATED_AT_COLUMNS, Printer, created_at_row

_PRINTERS: dict[str, Printer] = {
    **core_printers.PRINTERS,
    **pod_printer.PRINTERS,
    **workload_printers.PRINTERS,
    **access_printers.PRINTERS,
}
_DEFAULT: Printer = (CREATED_AT_COLUMNS, created_at_row)
"""The default table convertor's NAME and CREATED AT, for a kind printers.go does not know."""


def wants_table(accept: str) -> bool:
    """Whether an Accept header asks for a meta.k8s.io Table (v1 or v1beta1) first."""
    for entry in accept.split(","):
        params = {
            k.strip(): v.strip() for k, _, v in (p.partition("=") for p in entry.split(";")[1:])
        }
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io":
            return True
        if entry.strip().split(";")[0] in ("application/json", "*/*"):
            return False
    return False


def table(
    kind: str,
    items: list[Json],
    resource_version: str,
    include_object: str = "PartialObjectMetadata",
    now: datetime | None = None,
    continue_token: str | None = None,
) -> Json:
    """The meta.k8s.io/v1 Table of `items` (all of one kind)."""
    moment = now or datetime.now(UTC)
    columns, printer = _PRINTERS.get(kind, _DEFAULT)
    rows = []
    for item in items:
        row: Json = {"cells": printer(item, moment)}
        status = status_of(item).get("phase")
        if kind == "Pod" and status in ("Succeeded", "Failed"):
            row["conditions"] = [
                {
                    "type": "Completed",
                    "status": "True",
                    "reason": status,
                    "message": "The pod has completed successfully."
                    if status == "Succeeded"
                    else "The pod failed.",
                }
            ]
        if include_object == "Object":
            row["object"] = item
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta(item),
            }
        rows.append(row)
    metadata: Json = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    }
