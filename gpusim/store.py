"""The simulator's API state under its old import path, for one importer only.

`bot/roots/demo.py` (changed in another worktree) still says `from gpusim.store import Store`;
the class is `gpusim.state.ClusterState` now. This module must never gain anything else, and
nothing of gpusim, tests or benchmarks may import it (an import-linter contract says so):
delete it once demo.py imports `ClusterState`.
"""

from gpusim.state import ClusterState as Store

__all__ = ["Store"]
