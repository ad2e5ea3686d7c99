"""The real daemon's probes under slow clients: 64 header-dribbling and 300 slowloris sockets at once.

    python -m benchmarks.bench_ops_attack [--seconds 30] [--dribblers 64] [--loris 300] [--source 127.0.0.1]

Starts ``streamembed run`` (the built-in generator at 5,000 objects/s, text
logs), opens the slow sockets (``tests/ops/slow_clients.py``: a request
line then a header byte every 2 s; a partial head then a header line every
3 s; each reopened as soon as the server closes it), and probes ``/healthz``
10 times a second on fresh connections, from ``--source`` (127.0.0.1: the
attackers' own address; 127.0.0.2: another client). Reports the probes
answered 200 within 1 s, latency quantiles, the daemon's log lines about
refused connections, and its CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.ops.slow_clients import ProbeStats, SlowClients, probe

ROOT = Path(__file__).resolve().parents[1]

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    text = Path(f"/proc/{pid}/stat").read_text()
    f = text[text.rfind(")") + 2:].split()
    return (int(f[11]) + int(f[12])) / TICKS


def run(workdir: Path, seconds: float, dribblers: int, loris: int, source: str) -> dict[str, object]:
    port_file = workdir / "port"
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("STREAMEMBED_")}
    env.update({"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "STREAMEMBED_METRICS__PORT": "0",
                "STREAMEMBED_METRICS__PORT_FILE": str(port_file), "STREAMEMBED_OUTPUT__ROOT": str(workdir / "out"),
                "STREAMEMBED_GENERATOR__RATE": "5000"})
    log_path = workdir / "daemon.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "streamembed", "run"], env=env, cwd=workdir, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            end = time.monotonic() + 60
            while not (port_file.exists() and port_file.read_text().strip()) and time.monotonic() < end:
                time.sleep(0.1)
            port = int(port_file.read_text())
            while probe(port)[0] != 200 and time.monotonic() < end:
                time.sleep(0.2)
            attack = SlowClients(port, dribblers=dribblers, loris=loris)
            attack.start()
            attack.ready.wait(60)
            time.sleep(2.0)
            lines0 = log_path.read_text(errors="replace").count("ops server:")
            c0, t0 = _cpu(proc.pid), time.monotonic()
            stats = ProbeStats()
            while time.monotonic() - t0 < seconds:
                code, took = probe(port, "/healthz", 1.0, source)
                (stats.answered if code == 200 else stats.failed).append(took if code == 200 else f"{code}")
                time.sleep(0.1)
            cpu = (_cpu(proc.pid) - c0) / (time.monotonic() - t0)
            live = attack.live()
            attack.stop()
            lines = log_path.read_text(errors="replace").count("ops server:") - lines0
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait(10)
    lat = sorted(stats.answered)

    def q(p: float) -> float | None:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 1) if lat else None

    return {"probes": stats.total, "within_1s": stats.within(1.0), "share": round(stats.within(1.0) / stats.total, 4),
            "p50_ms": q(0.5), "p99_ms": q(0.99), "max_ms": round(lat[-1] * 1000, 1) if lat else None,
            "failed": stats.failed[:5], "slow_sockets_open_at_end": live, "sockets_opened": attack.opened,
            "closed_by_server": attack.closed_by_server, "refusal_log_lines": lines, "seconds": seconds,
            "daemon_cpu_fraction": round(cpu, 3), "source": source, "exit": code}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--dribblers", type=int, default=64)
    ap.add_argument("--loris", type=int, default=300)
    ap.add_argument("--source", default="127.0.0.1")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ops-") as tmp:
        result = run(Path(tmp), args.seconds, args.dribblers, args.loris, args.source)
    print(json.dumps(result, indent=1))
    return 0 if result["share"] >= 0.99 else 1


if __name__ == "__main__":
    sys.exit(main())
