"""What the live map costs the daemon: throughput with the page open (polling) vs closed, in one run.

    python -m benchmarks.bench_map_page [--phase-seconds 1] [--pairs 100] [--points 2000]

Starts the daemon of this checkout (``python -m streamembed run``, its
PYTHONPATH set to this repository) on the built-in generator at full speed
(``generator.rate = 0``: the loop is the bottleneck), Parquet output, drift
monitoring on, the map's sample at ``--points``. After a warm-up it runs
many short alternating phases, closed/open/open/closed/... (ABBA, so a slow
trend in the machine's load does not favour either side):

* closed: nobody asks for the map;
* open: a client does what the page does, ``GET /map`` once and
  ``GET /map.json`` every second (the page's drawing runs in the operator's
  browser, not in the daemon, so a plain HTTP client costs the daemon the
  same).

Each phase's throughput is the growth of ``streamembed_records_embedded_total``
over the phase (scraped at its start and end, in both kinds of phase), and
its CPU cost the daemon's CPU seconds (``/proc/<pid>/stat``, every thread,
the ops server's included) per object: a figure other processes on the
machine disturb much less than the wall-clock rate. Each
open phase is compared with the closed phase next to it in its ABBA block;
the figure is the median of those ratios, with its quartiles (on a shared
machine single phases vary by 10-20 %, more than the effect: many short
phases pin the median down better than a few long ones). The loop's
per-batch hook (``MapView.observe``) runs in both kinds of phase; its cost is
shown separately, in process, against the embedding of the same batch.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def get(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads, finished ones included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def embedded(base: str) -> float:
    text = get(base + "/metrics").decode()
    return sum(float(v) for v in re.findall(r'^streamembed_records_embedded_total\{[^}]*\} ([0-9.e+]+)$', text,
                                            flags=re.M))


class Poller(threading.Thread):
    """The open page's requests: /map once, then /map.json every ``every`` seconds."""

    def __init__(self, base: str, every: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.base, self.every = base, every
        self.stop = threading.Event()
        self.seconds: list[float] = []
        self.sizes: list[int] = []

    def run(self) -> None:
        get(self.base + "/map")
        while not self.stop.is_set():
            t0 = time.perf_counter()
            body = get(self.base + "/map.json")
            self.seconds.append(time.perf_counter() - t0)
            self.sizes.append(len(body))
            self.stop.wait(max(0.0, self.every - (time.perf_counter() - t0)))


def start_daemon(workdir: Path, points: int) -> tuple[subprocess.Popen[bytes], str]:
    port_file = workdir / "port"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")}
    env.update({
        "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]),
        "STREAMEMBED_SOURCE__KIND": "generator",
        "STREAMEMBED_GENERATOR__RATE": "0",
        "STREAMEMBED_OUTPUT__ROOT": str(workdir / "out"),
        "STREAMEMBED_METRICS__PORT": "0",
        "STREAMEMBED_METRICS__PORT_FILE": str(port_file),
        "STREAMEMBED_METRICS__MAP_POINTS": str(points),
        "STREAMEMBED_REFIT__AUTO": "false",  # a refit mid-run would not be the map's cost
        "STREAMEMBED_LOGGING__LEVEL": "WARNING",
    })
    log = open(workdir / "daemon.log", "wb")  # noqa: SIM115 - the daemon's output for as long as it runs
    proc = subprocess.Popen([sys.executable, "-m", "streamembed", "run"], cwd=workdir, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    end = time.monotonic() + 60
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            raise SystemExit(f"the daemon did not start:\n{(workdir / 'daemon.log').read_text()}")
        time.sleep(0.1)
    base = f"http://127.0.0.1:{int(port_file.read_text())}"
    while True:
        try:
            get(base + "/readyz")
            break
        except OSError:
            if time.monotonic() > end:
                proc.kill()
                raise SystemExit("the daemon did not become ready") from None
            time.sleep(0.2)
    return proc, base


def hook_cost(points: int, batch_rows: int) -> dict[str, float]:
    """Median seconds of ``MapView.observe`` and of ``BatchEmbedder.process`` on one generator batch."""
    from streamembed.daemon.assembly import build_source
    from streamembed.daemon.model_setup import load_or_fit_model
    from streamembed.ops.map_view import MapView
    from streamembed.config.schema import Config
    from streamembed.stream.embedder import BatchEmbedder
    from streamembed.stream.registry import ModelRegistry
    from streamembed.stream.sources.base import SourceContext

    cfg = Config()
    cfg.generator.rate = 0.0
    cfg.source.batch_rows = batch_rows
    model = load_or_fit_model(cfg)
    source = build_source(cfg, SourceContext(model)).source
    batch = None
    while batch is None:
        batch = source.poll()
    emb = BatchEmbedder(model, k0_rows=32)
    view = MapView(ModelRegistry(model), points=points)
    embed_t, observe_t = [], []
    for _ in range(30):
        t0 = time.perf_counter()
        done = emb.process(batch.table)
        t1 = time.perf_counter()
        view.observe(done)
        t2 = time.perf_counter()
        embed_t.append(t1 - t0)
        observe_t.append(t2 - t1)
    return {"rows": batch.table.num_rows, "process_seconds": statistics.median(embed_t),
            "observe_seconds": statistics.median(observe_t)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase-seconds", type=float, default=1.0)
    ap.add_argument("--pairs", type=int, default=100, help="closed/open pairs (ABBA order)")
    ap.add_argument("--points", type=int, default=2000, help="metrics.map_points")
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()

    hook = hook_cost(args.points, 8192)
    print(f"hook: MapView.observe {hook['observe_seconds'] * 1e6:.0f} us per {hook['rows']}-row batch; "
          f"BatchEmbedder.process {hook['process_seconds'] * 1e3:.2f} ms "
          f"({hook['observe_seconds'] / hook['process_seconds']:.2%} of it)")

    with tempfile.TemporaryDirectory(prefix="bench-map-") as tmp:
        proc, base = start_daemon(Path(tmp), args.points)
        try:
            time.sleep(args.warmup)
            order = ["closed", "open", "open", "closed"] * ((args.pairs + 1) // 2)
            order = order[:2 * args.pairs]
            rates: dict[str, list[float]] = {"closed": [], "open": []}
            cpu: dict[str, list[float]] = {"closed": [], "open": []}  # CPU seconds per million objects
            sequence: list[tuple[str, float]] = []
            seconds: list[float] = []
            sizes: list[int] = []
            for kind in order:
                poller = Poller(base) if kind == "open" else None
                if poller is not None:
                    poller.start()
                t0, n0, c0 = time.monotonic(), embedded(base), cpu_seconds(proc.pid)
                time.sleep(args.phase_seconds)
                t1, n1, c1 = time.monotonic(), embedded(base), cpu_seconds(proc.pid)
                cpu[kind].append((c1 - c0) / (n1 - n0) * 1e6)
                if poller is not None:
                    poller.stop.set()
                    poller.join(10)
                    seconds += poller.seconds
                    sizes += poller.sizes
                rate = (n1 - n0) / (t1 - t0)
                rates[kind].append(rate)
                sequence.append((kind, rate))
                print(f"  {kind:6s} {rate:12,.0f} objects/s  {cpu[kind][-1]:6.2f} CPU s per million", flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    closed, opened = statistics.median(rates["closed"]), statistics.median(rates["open"])
    # pairs within each ABBA block: (closed, open) and (open, closed)
    paired = []
    for (k1, r1), (_, r2) in zip(sequence[0::2], sequence[1::2], strict=False):
        open_rate, closed_rate = (r1, r2) if k1 == "open" else (r2, r1)
        paired.append(open_rate / closed_rate)
    q = statistics.quantiles(paired, n=4) if len(paired) >= 2 else [paired[0]] * 3
    figures = {
        "closed_objects_per_second": rates["closed"], "open_objects_per_second": rates["open"],
        "paired_ratios": paired, "ratio_paired_median": statistics.median(paired),
        "ratio_paired_quartiles": [q[0], q[2]],
        "cpu_seconds_per_million": cpu,
        "cpu_ratio_open_to_closed": statistics.mean(cpu["open"]) / statistics.mean(cpu["closed"]),
        "load_average": os.getloadavg(),
        "ratio_open_to_closed_median": opened / closed,
        "ratio_open_to_closed_mean": statistics.mean(rates["open"]) / statistics.mean(rates["closed"]),
        "map_json_bytes_max": max(sizes) if sizes else None,
        "map_json_request_seconds_median": statistics.median(seconds) if seconds else None,
        "map_json_request_seconds_max": max(seconds) if seconds else None,
        "map_json_requests": len(seconds),
        "hook": hook, "points": args.points, "phase_seconds": args.phase_seconds,
    }
    print(f"closed (median) {closed:,.0f} objects/s; open (median) {opened:,.0f} objects/s; "
          f"open/closed: medians {opened / closed:.3f}, means {figures['ratio_open_to_closed_mean']:.3f}")
    print(f"open/closed, paired within ABBA blocks ({len(paired)} pairs): median {statistics.median(paired):.3f}, "
          f"quartiles {q[0]:.3f}-{q[2]:.3f}")
    print(f"daemon CPU per object, open/closed: {figures['cpu_ratio_open_to_closed']:.3f} "
          f"({statistics.mean(cpu['open']):.2f} vs {statistics.mean(cpu['closed']):.2f} CPU s per million objects); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if seconds:
        print(f"/map.json: {len(seconds)} requests, {max(sizes):,} bytes at most, "
              f"{statistics.median(seconds) * 1e3:.1f} ms median ({max(seconds) * 1e3:.1f} ms max) as seen by the "
              f"client")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
