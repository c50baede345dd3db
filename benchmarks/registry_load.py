"""Load on the privacy registry: reservations per second and the latency they add; prints JSON.

    python benchmarks/registry_load.py [--cycles 160] [--clients 1 4 16]

For SQLite (one file, WAL, synchronous=FULL) and a local PostgreSQL 15 server (started here
with its durable defaults: fsync on), 1, 4 and 16 client processes each run reserve → mark
noise drawn → publish (the three registry transactions of a release) against one dataset,
all released at once by a barrier. ``cycles_per_s`` counts whole cycles (one reservation
each) over the wall time from the barrier to the last client's end; ``latency_ms`` is one
cycle as a client sees it (median, p95). The added latency per release is the 1-client
median (target: <= 50 ms on PostgreSQL). The cycles go through the registry functions, not a
whole release. Writes benchmarks/results/registry_load.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import pg_server  # noqa: E402
import registry_race  # noqa: E402
from conftest import TOY_CONTRACT  # noqa: E402


def run_config(env: dict[str, str], tmp: Path, name: str, clients: int, cycles: int) -> dict:
    contract = tmp / f"{name}.yaml"
    contract.write_text(TOY_CONTRACT.replace("name: toy", f"name: {name}"))
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(clients), ctx.Queue()
    per_client = max(4, cycles // clients)
    procs = [ctx.Process(target=registry_race.load_worker, args=(
        (env, str(contract), str(tmp / f"store-{name}-{i}"), f"c{i}", per_client, 1e-9),
        barrier, results)) for i in range(clients)]
    for p in procs:
        p.start()
    done: list = []
    while len(done) < clients:
        try:
            done.append(results.get(timeout=1))
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                raise RuntimeError(f"a client of {name} failed") from None
    for p in procs:
        p.join()
    wall = max(d[1] for d in done) - min(d[0] for d in done)
    latencies = sorted(x for d in done for x in d[2])
    return {"clients": clients, "cycles": len(latencies), "wall_s": round(wall, 3),
            "cycles_per_s": round(len(latencies) / wall, 1),
            "latency_ms": {"median": round(1000 * statistics.median(latencies), 1),
                           "p95": round(1000 * latencies[int(0.95 * (len(latencies) - 1))], 1)},
            "chain_entries_at_end": 1 + 3 * len(latencies)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=160, help="cycles per configuration")
    parser.add_argument("--clients", type=int, nargs="*", default=[1, 4, 16])
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="registry-load-"))
    server = pg_server.start(durable=True)
    try:
        url = server.create_database("registry_load")
        backends = {"sqlite": {"PRIVFAIR_REGISTRY": str(tmp / "registry")},
                    "postgresql": {"PRIVFAIR_REGISTRY": url,
                                   "PRIVFAIR_REGISTRY_KEY_FILE": str(tmp / "key" / "registry.key")}}
        out: dict = {"machine": f"{os.cpu_count()} CPU cores", "what": "reserve + spend + publish "
                     "cycles through privfair.store.registry, one dataset per configuration",
                     # A shared machine: what else ran colours every figure.
                     "load_average_at_start": round(os.getloadavg()[0], 1), "results": {}}
        start = time.perf_counter()
        for kind, env in backends.items():
            out["results"][kind] = [run_config(env, tmp, f"bench_{kind}_{c}", c, args.cycles)
                                    for c in args.clients]
        one = {k: v[0]["latency_ms"]["median"] for k, v in out["results"].items()
               if v and v[0]["clients"] == 1}
        out["added_latency_ms_per_release"] = one
        out["postgresql_target_50ms_met"] = one.get("postgresql", 1e9) <= 50
        out["seconds"] = round(time.perf_counter() - start, 1)
        out["load_average_at_end"] = round(os.getloadavg()[0], 1)
    finally:
        server.stop()
    text = json.dumps(out, indent=2)
    print(text)
    results = ROOT / "benchmarks" / "results" / "registry_load.json"
    results.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
