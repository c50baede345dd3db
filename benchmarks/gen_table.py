"""Generate a synthetic "new user" table and its data contract (benchmark input, not a release).

The table is drawn from a random chain-structured Bayesian network so that 2-way marginals
carry signal beyond the 1-way ones: each attribute depends on the previous one (and the
protected ``sex`` column on nothing). Columns alternate categorical and numeric; one declared
category of ``c1`` never occurs (a declared-but-absent category, as in issue 15).

    python benchmarks/gen_table.py --rows 1000 --attributes 21 --out /tmp/pf-1k
    python benchmarks/gen_table.py --rows 300000 --attributes 41 --out /tmp/pf-wide --parquet

Writes ``<out>/data.csv`` (or ``data.parquet``) and ``<out>/contract.yaml``; prints JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd


def _sizes(attributes: int, rng: np.random.Generator) -> list[int]:
    # outcome and sex are binary; the rest 3..12 levels (numeric ones become 5 bins).
    return [2, 2] + [int(s) for s in rng.integers(3, 13, size=attributes - 2)]


def generate(rows: int, attributes: int, *, seed: int = 0,
             concentration: float = 0.3) -> tuple[pd.DataFrame, dict]:
    """The raw table and the contract (as a dict) for ``rows`` x ``attributes``.

    ``concentration`` is the Dirichlet parameter of each conditional table: small values make
    strong 2-way dependence, large ones (e.g. 20) a nearly independent table.
    """
    rng = np.random.default_rng(seed)
    sizes = _sizes(attributes, rng)
    names = ["label", "sex"] + [f"c{i}" if i % 2 else f"n{i}" for i in range(1, attributes - 1)]
    codes: dict[str, np.ndarray] = {}
    previous: np.ndarray | None = None
    for name, size in zip(names, sizes, strict=True):
        if previous is None or name == "sex":
            p = rng.dirichlet(np.ones(size))
            codes[name] = rng.choice(size, size=rows, p=p)
        else:
            # conditional table: each parent value prefers a few child values
            table = rng.dirichlet(np.full(size, concentration), size=int(previous.max()) + 1)
            u = rng.random(rows)[:, None]
            codes[name] = (u > np.cumsum(table[previous], axis=1)).sum(axis=1).clip(0, size - 1)
        previous = codes[name]
    # the outcome depends on sex and the last attribute, so fairness checks have work to do
    codes["label"] = ((codes["sex"] + codes[names[-1]] + rng.integers(0, 2, rows)) % 2)
    frame: dict[str, object] = {}
    columns = []
    for name, size in zip(names, sizes, strict=True):
        if name.startswith("n"):
            edges = [0, 10, 20, 40, 80, 160]
            low = np.asarray(edges)[codes[name] % 5]
            high = np.asarray(edges)[codes[name] % 5 + 1]
            frame[name] = rng.integers(low, high)
            columns.append({"name": name, "type": "numeric", "integer": True, "bins": edges,
                            "out_of_domain": "clamp", "nulls": "refuse"})
        else:
            cats = [f"v{k}" for k in range(size)]
            if name == "c1":
                cats = cats + ["absent"]  # declared, never occurs
            frame[name] = np.asarray(cats)[codes[name]]
            columns.append({"name": name, "type": "categorical", "categories": cats,
                            "out_of_domain": "refuse", "nulls": "refuse"})
    rest = [n for n in names if n not in ("label", "sex")]
    contract = {
        "name": f"gen{attributes}", "version": "1.0.0",
        "description": f"generated benchmark table, {attributes} attributes",
        "columns": columns,
        "roles": {"protected": ["sex"], "admissible": rest[: len(rest) // 2],
                  "outcome": ["label"], "free": rest[len(rest) // 2:]},
        "budget": {"epsilon": 100.0, "delta": 1.0e-5},
    }
    return pd.DataFrame(frame), contract


def write(out: Path, rows: int, attributes: int, *, seed: int = 0,
          parquet: bool = False, concentration: float = 0.3) -> dict:
    import yaml

    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    frame, contract = generate(rows, attributes, seed=seed, concentration=concentration)
    data = out / ("data.parquet" if parquet else "data.csv")
    if parquet:
        frame.to_parquet(data, index=False)
    else:
        frame.to_csv(data, index=False)
    (out / "contract.yaml").write_text(yaml.safe_dump(contract, sort_keys=False))
    return {"data": str(data), "contract": str(out / "contract.yaml"), "rows": rows,
            "attributes": attributes, "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--attributes", type=int, default=21)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--parquet", action="store_true")
    parser.add_argument("--concentration", type=float, default=0.3)
    args = parser.parse_args()
    print(json.dumps(write(args.out, args.rows, args.attributes, seed=args.seed,
                           parquet=args.parquet, concentration=args.concentration),
                     indent=2))


if __name__ == "__main__":
    main()
