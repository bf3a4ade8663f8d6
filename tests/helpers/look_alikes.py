"""Alerts naming look-alikes of a real node (issue 31 item 4): `gpu-a1` with a zero-width
space, a right-to-left override, isolates or a Cyrillic `а`, each rendering exactly as
`gpu-a1`, and a plain `gpu-z9` the cluster does not have; and how a person must see each name.
Shared by the serve tests (tests/integration/test_look_alike_nodes.py) and `gpubot diagnose`'s
(tests/e2e/test_diagnose_inputs.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

LOOK_ALIKES = {
    "gpu-a1\u200b": "gpu-a1\\u200b",  # zero-width space
    "\u202egpu-a1": "\\u202egpu-a1",  # right-to-left override
    "\u2066gpu-a1\u2069": "\\u2066gpu-a1\\u2069",  # left-to-right isolate ... pop isolate
    "\u2067gpu-a1\u2069": "\\u2067gpu-a1\\u2069",  # right-to-left isolate
    "\u2068gpu-a1\u2069": "\\u2068gpu-a1\\u2069",  # first strong isolate
    "gpu-\u04301": "gpu-\\u04301",  # Cyrillic а
}
"""Each hostile name and how a person must see it."""
ABSENT = "gpu-z9"
"""A well-formed name the cluster does not have."""
STARTED = datetime.now(UTC).isoformat()
"""When the alerts began: Alertmanager sends a group again with the same `startsAt`."""
HIDDEN = "\u200b\u202e\u2066\u2067\u2068\u2069\u0430"
"""Not one of these may reach a person as itself."""
SAYS = "disk \u202eis full"
"""What a vendor's alert on the real gpu-a1 says; Slack and a terminal would show the rest of
the line turned around."""
SAYS_SHOWN = "disk \\u202eis full"


def payload(names: Sequence[str] = (*LOOK_ALIKES, ABSENT, "gpu-a1")) -> dict[str, Any]:
    """One Alertmanager group: an Xid 79 alert on each of `names` (by default each
    look-alike, gpu-z9 and gpu-a1), and on gpu-a1 a vendor's alert that `SAYS`."""

    def alert(
        fingerprint: str, node: str, name: str = "GPUXidError", says: str = ""
    ) -> dict[str, Any]:
        return {
            "status": "firing",
            # dcgm-exporter's `Hostname` (its NODE_NAME), as community Xid rules keep it.
            "labels": {"alertname": name, "Hostname": node}
            | ({} if says else {"xid": "79", "gpu": "0"}),
            "annotations": {"summary": says or f"Xid 79 on {node}"},
            "startsAt": STARTED,
            "endsAt": "0001-01-01T00:00:00Z",
            "fingerprint": fingerprint,
            "generatorURL": "",
        }

    return {
        "version": "4",
        "groupKey": '{}:{alertname="GPUXidError"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "gpubot",
        "groupLabels": {"alertname": "GPUXidError"},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager",
        "alerts": [
            *(alert(f"f{i}-{name}", name) for i, name in enumerate(names)),
            *([alert("vendor", "gpu-a1", "VendorDiskFull", SAYS)] if "gpu-a1" in names else []),
        ],
    }
