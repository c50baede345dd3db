#!/usr/bin/env bash
# Smoke test of the deployments against a real Prefect server, as an operator runs them:
#
#   1. `prefect server start` (throw-away PREFECT_HOME, free port, scheduler polling every 1 s)
#   2. `python deployments/serve.py` (registers monthly-adult and ad-hoc, executes runs)
#   3. `prefect deployment run privfair-release/ad-hoc --param epsilon=0.5 ... --watch`
#   4. checks: the run completed; one release with epsilon 0.5 in the catalog, whose manifest
#      names that flow run; the dataset's concurrency limit exists and serialises two
#      simultaneous runs (acquired/released events alternate); the monthly deployment
#      has upcoming scheduled runs; a budget refusal fails with one line and no traceback,
#      and the automation of deployments/alerts.py POSTs it to a local webhook receiver.
#
# Usage: deployments/smoke.sh   (from anywhere; exit 0: all checks passed, 77: no Prefect
#        server could start here, nothing checked; anything else: a check failed)
# Env:   PYTHON (default .venv/bin/python), SMOKE_KEEP=1 keeps the temporary folder,
#        SMOKE_CONTRACT (default compas: a small embedded dataset, so the run is quick).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-$ROOT/.venv/bin/python}
PY=$(command -v "$PY")
BIN=$(dirname "$PY")
CONTRACT=${SMOKE_CONTRACT:-compas}
TMP=$(mktemp -d -t privfair-smoke-XXXXXX)
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

export PREFECT_HOME=$TMP/prefect-home DO_NOT_TRACK=1 PREFECT_SERVER_ANALYTICS_ENABLED=false
export PREFECT_API_URL=http://127.0.0.1:$PORT/api
export PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS=1
export PRIVFAIR_WORK_DIR=$TMP/work
export PRIVFAIR_REGISTRY=${PRIVFAIR_REGISTRY:-$TMP/registry}  # a throw-away lifetime ledger
STORE=$TMP/releases
PIDS=()

say() { printf 'smoke: %s\n' "$*" >&2; }
alive() { local stat; stat=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $stat != Z* ]]; }
fail() { say "FAIL: $*"; for f in "$TMP"/*.log; do say "--- $f"; tail -n 30 "$f" >&2; done; exit 1; }
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [[ -n "${SMOKE_KEEP:-}" ]]; then say "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

say "server on port $PORT (home $PREFECT_HOME)"
"$BIN/prefect" server start --host 127.0.0.1 --port "$PORT" --no-ui >"$TMP/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 240); do
    curl -fsS "$PREFECT_API_URL/health" >/dev/null 2>&1 && break
    alive "${PIDS[0]}" || break
    sleep 0.5
done
if ! curl -fsS "$PREFECT_API_URL/health" >/dev/null 2>&1; then
    # exit 77 ("skipped"): no server can run here; nothing about privfair was checked
    say "SKIP: no Prefect server could start: $(tail -n 3 "$TMP/server.log" | tr '\n' ' ')"
    exit 77
fi

say "alerts: automation -> webhook block -> local receiver"
HOOK_PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PY" - "$HOOK_PORT" "$TMP/alerts.jsonl" >"$TMP/receiver.log" 2>&1 <<'EOF' &
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(sys.argv[2], "ab") as fh:
            fh.write(body + b"\n")
        self.send_response(200)
        self.end_headers()

HTTPServer(("127.0.0.1", int(sys.argv[1])), Hook).serve_forever()
EOF
PIDS+=($!)
"$PY" deployments/alerts.py --webhook-url "http://127.0.0.1:$HOOK_PORT/alert" \
    >"$TMP/alerts.log" 2>&1 || fail "deployments/alerts.py failed"

say "serving the deployments"
"$PY" deployments/serve.py >"$TMP/serve.log" 2>&1 &
PIDS+=($!)
REGISTERED=
for _ in $(seq 30); do
    alive "${PIDS[-1]}" || fail "deployments/serve.py exited"
    if grep -q "being served" "$TMP/serve.log"; then REGISTERED=1; break; fi
    sleep 2
done
[[ -n $REGISTERED ]] || fail "deployments/serve.py registered no deployments in 60 s"

say "ad-hoc run: contract=$CONTRACT epsilon=0.5"
"$BIN/prefect" deployment run privfair-release/ad-hoc --param epsilon=0.5 \
    --param "contract=$CONTRACT" --param "out=$STORE" --watch --watch-timeout 600 \
    >"$TMP/run.log" 2>&1 || fail "the ad-hoc run did not complete"

say "checking the release, the run link, the concurrency limit and the schedule"
"$PY" - "$STORE" "$CONTRACT" <<'EOF' || fail "checks failed"
import json, sys
from pathlib import Path

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (DeploymentFilter, DeploymentFilterName,
                                            FlowRunFilter, FlowRunFilterState,
                                            FlowRunFilterStateType)

from privfair.store.registry import list_releases

store, contract = Path(sys.argv[1]), sys.argv[2]
rows = list_releases(store)
assert len(rows) == 1 and rows[0]["epsilon"] == 0.5, rows
manifest = json.loads((store / rows[0]["path"] / "manifest.json").read_text())
run = manifest["orchestrator"]
assert json.loads(rows[0]["orchestrator"]) == run, (rows[0], run)
assert run["ui_url"].endswith(f"/runs/flow-run/{run['flow_run_id']}"), run
with get_client(sync_client=True) as client:
    flow_run = client.read_flow_run(run["flow_run_id"])
    assert flow_run.state.is_completed() and flow_run.parameters["epsilon"] == 0.5
    assert "seed" not in flow_run.parameters, flow_run.parameters
    limit = client.read_global_concurrency_limit_by_name(f"privfair-release-{rows[0]['dataset']}")
    assert limit.limit == 1, limit
    upcoming = client.read_flow_runs(
        deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=["monthly-adult"])),
        flow_run_filter=FlowRunFilter(state=FlowRunFilterState(
            type=FlowRunFilterStateType(any_=["SCHEDULED"]))))
assert len(upcoming) >= 3, f"monthly-adult has {len(upcoming)} upcoming runs"
print(f"release {rows[0]['dataset']} {rows[0]['version']} from flow run "
      f"{run['flow_run_name']}; monthly-adult upcoming: "
      + ", ".join(str(r.expected_start_time) for r in upcoming[:3]))
EOF

say "two runs for one dataset at once: the concurrency limit must serialise them"
"$PY" - "$STORE" "$CONTRACT" <<'EOF' || fail "concurrency check failed"
import sys, time
import httpx
from prefect.client.orchestration import get_client
from prefect.deployments import run_deployment
from prefect.settings import PREFECT_API_URL

store, contract = sys.argv[1], sys.argv[2]
params = {"contract": contract, "epsilon": 0.25, "out": store}
runs = [run_deployment("privfair-release/ad-hoc", parameters=params, timeout=0)
        for _ in range(2)]
deadline = time.monotonic() + 600
with get_client(sync_client=True) as client:
    while time.monotonic() < deadline:
        states = [client.read_flow_run(r.id).state for r in runs]
        if all(s.is_final() for s in states):
            break
        time.sleep(2)
assert all(s.is_completed() for s in states), states
name = f"privfair-release-{contract}"
for _ in range(30):  # events arrive asynchronously
    body = httpx.post(f"{PREFECT_API_URL.value()}/events/filter", json={
        "filter": {"event": {"prefix": ["prefect.concurrency-limit."]}}, "limit": 50}).json()
    seq = sorted((e["occurred"], e["event"].rsplit(".", 1)[1]) for e in body["events"]
                 if e["resource"].get("prefect.resource.name") == name
                 and e["event"].endswith((".acquired", ".released")))
    if len([k for _, k in seq if k == "released"]) >= 3:
        break
    time.sleep(1)
kinds = [k for _, k in seq]
assert kinds[:6] == ["acquired", "released"] * 3, seq
print(f"slot {name}: " + " ".join(kinds))
EOF

say "budget refusal: epsilon=50 must fail with one line and no traceback"
if "$BIN/prefect" deployment run privfair-release/ad-hoc --param epsilon=50 \
    --param "contract=$CONTRACT" --param "out=$STORE" --watch --watch-timeout 300 \
    >"$TMP/refusal.log" 2>&1; then
    fail "an over-budget run completed"
fi
sleep 2  # let the served process flush its logs
grep -q "release refused: BudgetExceededError" "$TMP/serve.log" \
    || fail "no one-line refusal in the serve log"
if grep -q "Traceback" "$TMP/serve.log"; then fail "a traceback in the serve log"; fi
for _ in $(seq 60); do
    grep -q "release refused: BudgetExceededError" "$TMP/alerts.jsonl" 2>/dev/null && break
    sleep 1
done
grep -q "release refused: BudgetExceededError" "$TMP/alerts.jsonl" 2>/dev/null \
    || fail "no alert reached the webhook"
say "OK"
