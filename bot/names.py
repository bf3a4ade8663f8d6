"""gpubot's own names in the cluster and in the record: one definition each, so a label the
executor writes is the label the rules, the smoke test and the chart look for."""

from __future__ import annotations

GPUBOT = "gpubot"
"""The actor of what the bot does itself (timeline entries, withdrawals, proposals), and the
value of `app.kubernetes.io/managed-by` on what it creates."""

NAMESPACE = "gpubot"
"""Where gpubot runs by default: its leader Lease and its smoke-test pods."""

PREFIX = "gpubot.io/"
"""gpubot's label, annotation and taint key prefix."""

MAINTENANCE_TAINT = f"{PREFIX}maintenance"
INCIDENT_ANNOTATION = f"{PREFIX}incident"
SMOKE_TEST_LABEL = f"{PREFIX}smoke-test"
CHECKPOINT_ANNOTATION = f"{PREFIX}last-checkpoint"
POOL_LABEL = f"{PREFIX}pool"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
