"""Issue 10, manifest-diff test: release D and its neighbour D′ (one row added) and check that
every manifest, report and artifact field that differs is a noisy output (or a timestamp),
and that no structural field (query counts, list lengths, bin counts) depends on the data.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from privfair.release.kinds import release_table as run_release

# Fields that are noisy outputs, post-processing of them, or clocks. Each is a prefix of a
# flattened manifest path.
NOISY = (
    "started_at", "published_at",                # clocks
    "method.estimated_total", "method.estimation",  # from noisy marginals
    "sampling.n_rows",                           # the rounded noisy total
    "structure.edges",                           # chosen by the exponential mechanism
    "files.",                                    # hashes of the noisy table and report
    "domain.labels.age", "contract.resolved_fingerprint",  # DP quantile bin edges of age
    "insecure_seed.fingerprint",                 # keyed by each work dir's own secret
)


def _flat(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{path}.{key}" if path else str(key)))
        return out
    if isinstance(value, list):
        out = {f"{path}#len": len(value)}
        for i, item in enumerate(value):
            out.update(_flat(item, f"{path}[{i}]"))
        return out
    return {path: value}


def _release(tmp_path: Path, name: str, frame: pd.DataFrame, contract: Path,
             monkeypatch) -> Path:
    # One insecure test seed for both: the noise is the same, so whatever differs is the data
    # showing through a noisy output (separate work dirs keep the seed-reuse check apart).
    # Separate registries: the lifetime ledger's running total depends on release order, not
    # on the data, and is checked by the store's own tests.
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / f"registry-{name}"))
    data = tmp_path / f"{name}.parquet"
    frame.to_parquet(data, index=False)
    return run_release({"contract": str(contract), "data": str(data), "method": "prefair-greedy",
                        "epsilon": 1.0, "delta": 1e-9, "out": str(tmp_path / f"store-{name}"),
                        "work_dir": str(tmp_path / f"work-{name}"), "max_iters": 100,
                        "seed": 11, "insecure_seed": True})


def test_neighbouring_releases_differ_only_in_noisy_fields(tmp_path, toy_contract, toy_frame,
                                                           monkeypatch) -> None:
    """Covers item 1 too: with a dp_bins column the quantile mechanism's n + 1 candidates
    used to reach the ledger as its query count, which differs between D and D′."""
    text = toy_contract.read_text()
    assert "bins: [18, 30, 45, 65, 90]" in text
    toy_contract.write_text(text.replace("bins: [18, 30, 45, 65, 90]",
                                         "dp_bins: 4\n    lower: 18\n    upper: 90", 1))
    neighbour = pd.concat([toy_frame, toy_frame.iloc[[3]]], ignore_index=True)
    first = _release(tmp_path, "d", toy_frame, toy_contract, monkeypatch)
    second = _release(tmp_path, "d2", neighbour, toy_contract, monkeypatch)
    a, b = (json.loads((f / "manifest.json").read_text()) for f in (first, second))
    fa, fb = _flat(a), _flat(b)

    # Same paths everywhere outside the noisy compression record: no list length, query
    # count or bin count that exists for one dataset and not the other.
    compression = "method.compression"
    assert ({k for k in fa if not k.startswith(compression)}
            == {k for k in fb if not k.startswith(compression)})
    differing = sorted(k for k in fa.keys() & fb.keys() if fa[k] != fb[k])
    ledger_diffs = [k for k in differing if k.startswith("ledger")]
    other = [k for k in differing if not k.startswith(("ledger", compression, *NOISY))]
    assert other == [], other

    # The ledger: same steps, mechanisms, ρ, σ and ε; a query count may differ only where it
    # is computed from published noisy output (the selection's remaining candidates after
    # earlier DP picks, the cells of the DP-selected, DP-compressed marginals).
    assert [(e["name"], e["mechanism"], e["rho"], e.get("sigma"), e.get("epsilon"))
            for e in a["ledger"]] == [(e["name"], e["mechanism"], e["rho"], e.get("sigma"),
                                       e.get("epsilon")) for e in b["ledger"]]
    for key in ledger_diffs:
        assert key.endswith(".queries"), key
        index = int(re.search(r"ledger\[(\d+)\]", key).group(1))
        assert a["ledger"][index]["name"].startswith(("select edge", "selected 2-way"))
    for manifest in (a, b):
        sizes = {c: r["compressed_size"] for c, r in manifest["method"]["compression"].items()}
        (selected,) = [e for e in manifest["ledger"] if e["name"] == "selected 2-way marginals"]
        assert selected["queries"] == sum(math.prod(sizes[c] for c in edge)
                                          for edge in manifest["structure"]["edges"])
        (one_way,) = [e for e in manifest["ledger"] if e["name"] == "one-way marginals"]
        assert one_way["queries"] == sum(manifest["domain"]["sizes"].values())

    # Artifacts: the same files, the same table schema; the report has the same HTML skeleton.
    assert sorted(p.name for p in first.iterdir()) == sorted(p.name for p in second.iterdir())
    assert pq.read_schema(first / "synthetic.parquet") == pq.read_schema(
        second / "synthetic.parquet")
    tags = [re.findall(r"<(/?[a-zA-Z0-9]+)", (f / "report.html").read_text())
            for f in (first, second)]
    assert tags[0] == tags[1]
