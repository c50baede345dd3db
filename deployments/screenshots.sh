#!/usr/bin/env bash
# Screenshots for the README: a served ad-hoc release, its run page and artifacts in the
# Prefect UI, and its report.html, taken with headless Chromium (`apt-get install chromium`).
#
# Usage: deployments/screenshots.sh [OUT_DIR]     (default: docs/)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=$(cd "${1:-docs}" && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN=$(dirname "$PY")
CHROMIUM=${CHROMIUM:-chromium}
TMP=$(mktemp -d -t privfair-shots-XXXXXX)
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export PREFECT_HOME=$TMP/prefect-home DO_NOT_TRACK=1 PREFECT_SERVER_ANALYTICS_ENABLED=false
export PREFECT_API_URL=http://127.0.0.1:$PORT/api PRIVFAIR_WORK_DIR=$TMP/work
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

"$BIN/prefect" server start --host 127.0.0.1 --port "$PORT" >"$TMP/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 240); do curl -fsS "$PREFECT_API_URL/health" >/dev/null 2>&1 && break; sleep 0.5; done
"$PY" deployments/serve.py >"$TMP/serve.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 120); do
    "$BIN/prefect" deployment inspect privfair-release/ad-hoc >/dev/null 2>&1 && break
    sleep 1
done
"$BIN/prefect" deployment run privfair-release/ad-hoc --param epsilon=1 --param method=aim-fair \
    --param contract=compas --param "out=$TMP/releases" --watch --watch-timeout 900 >"$TMP/run.log"
RUN_ID=$("$PY" - "$TMP/releases" <<'EOF'
import json, sys
from pathlib import Path
manifest = next(Path(sys.argv[1]).glob("*/v1/manifest.json"))
print(json.loads(manifest.read_text())["orchestrator"]["flow_run_id"])
EOF
)
REPORT=$(ls "$TMP"/releases/*/v1/report.html)

shot() {  # url file [height]
    "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
        --virtual-time-budget=15000 --window-size="1400,${3:-1000}" \
        --screenshot="$OUT/$2" "$1" >/dev/null 2>&1
    echo "$OUT/$2"
}
UI=http://127.0.0.1:$PORT
shot "$UI/runs/flow-run/$RUN_ID" prefect_run.png 1100
"$PY" - "$RUN_ID" >"$TMP/artifacts.txt" <<'EOF'
import sys
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
with get_client(sync_client=True) as client:
    found = client.read_artifacts(artifact_filter=ArtifactFilter(
        flow_run_id=ArtifactFilterFlowRunId(any_=[sys.argv[1]])))
for a in found:
    if a.key in ("privfair-release", "privfair-release-ledger"):
        print(a.key.removeprefix("privfair-").replace("-", "_"), a.id)
EOF
while read -r key id; do shot "$UI/artifacts/artifact/$id" "prefect_artifact_$key.png" 1100; done \
    <"$TMP/artifacts.txt"
shot "file://$REPORT" release_report.png 1800
