"""The README's quick start, run as written (issue 19): its own shell block, in a fresh HOME
and folder, must end with gpu-a2 cordoned by alice's approval.

The one change made to the text: port 8080 becomes a free port (several test runs share
this machine), in the block and through GPUBOT_SERVE__PORT. The block starts `gpubot sim
serve` and `gpubot serve` in the background; they run in the script's own process group,
which the test ends."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

README = REPO / "README.md"


def quick_start_block() -> str:
    text = README.read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```sh\n(.*?)```", section, re.S)
    assert found, "the quick start has no ```sh block"
    return found.group(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.skipif(
    not (shutil.which("kubectl") and shutil.which("curl")) and os.environ.get("CI") != "true",
    reason="the quick start uses kubectl and curl",
)
def test_the_readme_quick_start_ends_with_the_node_cordoned(tmp_path: Path) -> None:
    block = quick_start_block()
    assert "8080" in block
    port = _free_port()
    script = "set -e\n" + block.replace("8080", str(port))
    bin_dir = Path(sys.executable).parent  # where `pip install -e .` put `gpubot`
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GPUBOT_") and k not in ("KUBECONFIG", "XDG_CONFIG_HOME")
    }
    env.update(
        HOME=str(tmp_path),
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(REPO),
        GPUBOT_SERVE__PORT=str(port),
    )
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=400)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the background sim and serve
    logs = "\n".join(
        f"--- {name} ---\n{(tmp_path / name).read_text(errors='replace')[-3000:]}"
        for name in ("serve.log", "serve.err", "sim.log")
        if (tmp_path / name).exists()
    )
    assert process.returncode == 0, f"{out}\n{err}\n{logs}"
    assert "recorded: drain on gpu-a2 approved by alice" in out, out
    assert "succeeded: drained gpu-a2" in out, out
    [node_line] = [line for line in out.splitlines() if line.startswith("gpu-a2 ")]
    assert "SchedulingDisabled" in node_line, out
    assert (tmp_path / ".config" / "gpubot" / "gpubot.db").exists()
