from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROGRAM = """
import atexit, sys
from pathlib import Path
from bot.process.ending import end_now, end_when_done
atexit.register(lambda: Path(sys.argv[1]).write_text("ran"))
sys.stdout.write("answer")  # buffered: a pipe
end_when_done()
end_now(3)
raise SystemExit(9)  # not reached
"""


def test_ending_at_once_keeps_the_code_the_output_and_atexit(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(marker)], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout, marker.read_text()) == (3, "answer", "ran")


def test_a_command_that_did_not_ask_ends_as_usual() -> None:
    program = "from bot.process.ending import end_now\nend_now(3)\nraise SystemExit(5)"
    done = subprocess.run([sys.executable, "-c", program], check=False)
    assert done.returncode == 5
