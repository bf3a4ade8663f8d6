"""How long a killed leader takes to be replaced, with the default lease (15 s duration,
10 s renew deadline, 2 s retry period): `gpubot serve` replicas against one simulated
cluster and store; the leader is SIGKILLed and the time until another replica's
`gpubot_leader` gauge says 1 is measured from the kill.

    python benchmarks/leader_failover.py --kills 4
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from tests.helpers.processes import Gpubot, Serve, cluster, simulator


def leads(served: Serve) -> bool:
    try:
        with urllib.request.urlopen(f"{served.url}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return False
    return f'gpubot_leader{{identity="{served.identity}"}} 1.0' in text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=4)
    args = parser.parse_args()
    times: list[float] = []
    with tempfile.TemporaryDirectory() as folder, simulator(cluster()) as server:
        tmp = Path(folder)
        config = tmp / "settings.yaml"
        config.write_text(yaml.safe_dump({"serve": {"host": "127.0.0.1"}}))  # default lease
        bot = Gpubot(tmp, config, server.url, f"sqlite:///{tmp / 'gpubot.db'}")
        try:
            replicas = [bot.start(f"replica-{i}") for i in range(2)]
            for kill in range(args.kills):
                deadline = time.monotonic() + 60
                while not (leaders := [r for r in replicas if leads(r)]):
                    assert time.monotonic() < deadline, "no leader"
                    time.sleep(0.1)
                [leader] = leaders
                replicas.remove(leader)
                replicas.append(bot.start(f"replica-{kill + 2}"))  # two left after the kill
                killed_at = time.monotonic()
                leader.kill()
                while not any(leads(r) for r in replicas):
                    time.sleep(0.1)
                times.append(time.monotonic() - killed_at)
                print(f"kill {kill + 1}: replaced in {times[-1]:.1f} s", flush=True)
        finally:
            bot.close()
    print(
        f"{len(times)} kills: median {statistics.median(times):.1f} s, "
        f"min {min(times):.1f} s, max {max(times):.1f} s"
    )


if __name__ == "__main__":
    main()
