"""gpusim: a simulated GPU Kubernetes cluster, served to the real `kubernetes` client and the
real `kubectl`, for gpubot's demo, drills and end-to-end tests: an HTTPS API with bearer
tokens and RBAC, server-side tables, the controllers gpubot's rules depend on, and
dcgm-exporter and kube-state-metrics endpoints. What it does faithfully and what it does not
is docs/simulator.md.

Its layers are an import-linter contract (`.importlinter`, `gpusim-layers`). It must never
import gpubot beyond `bot.kube_objects`, and never serve anything but 127.0.0.1.
"""
