"""The house's rules that a reader cannot see in one file: `gpubot serve` never loads the
simulator (only the demo, drill and sim commands do, when they run)."""

from __future__ import annotations

import subprocess
import sys


def _modules_after_importing(module: str) -> set[str]:
    probe = f"import sys, {module}\nprint('\\n'.join(sorted(m for m in sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stdout.split())


def test_importing_the_serve_composition_root_loads_no_simulator_module() -> None:
    loaded = _modules_after_importing("bot.roots.serve")
    assert "bot.roots.serve" in loaded  # the probe imported what it says
    assert sorted(m for m in loaded if m == "gpusim" or m.startswith("gpusim.")) == []


def test_the_command_line_loads_the_simulator_only_for_its_commands() -> None:
    assert not any(m.startswith("gpusim") for m in _modules_after_importing("bot.commands"))
