"""The ``embedding`` kind (``privfair embed``): DPNE node embeddings as a declared kind."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from privfair.cli import main
from privfair.contracts.datasets import contract_path, embedded_dataset_for
from privfair.contracts.schema import load_contract
from privfair.core.accounting import zcdp_rho
from privfair.release.kinds.embedding.kind import EMBEDDING
from privfair.release.registry import family
from privfair.store.registry import read_lifetime_ledger

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "data_contracts" / "example_graph.yaml"


def _embed(store: Path, *extra: str, contract: Path = EXAMPLE, seed: str = "5") -> int:
    return main(["embed", "--contract", str(contract), "--epsilon", "1", "--seed", seed,
                 "--insecure-seed", "--no-prefect", "--out", str(store),
                 "--work-dir", str(store.parent / "work"), *extra])


def _numbers(value):
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            yield from _numbers(item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield value


def _refusal(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines()
             if not line.startswith(("cost: ", "WARNING: "))]
    assert len(lines) == 1, lines
    return lines[0]


def test_the_example_graph_is_packaged_and_embedded():
    assert family("embed").kinds == (EMBEDDING,)
    assert contract_path("example_graph").read_bytes() == EXAMPLE.read_bytes()
    edges = pd.read_parquet(embedded_dataset_for("example_graph"))
    assert list(edges.columns) == ["source", "target"] and len(edges) == 122


def test_embed_publishes_the_packaged_example_at_a_fixed_insecure_seed(tmp_path, capsys):
    store = tmp_path / "store"
    assert _embed(store) == 0  # no --data: the packaged edge list
    folder = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert folder == store / "example_graph" / "v1"
    assert sorted(p.name for p in folder.iterdir()) == [
        "contract.yaml", "embeddings.parquet", "manifest.json", "report.html"]
    frame = pd.read_parquet(folder / "embeddings.parquet")
    assert list(frame.columns) == ["node", *(f"e{k}" for k in range(16))]
    assert frame["node"].tolist() == [f"n{i:02d}" for i in range(40)]
    assert frame.drop(columns="node").notna().all().all()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["kind"] == "embedding" and manifest["embedding"]["nodes"] == 40
    rho = zcdp_rho(epsilon=1.0, delta=1e-6)
    g = manifest["guarantee"]
    assert g["rho_reserved"] == pytest.approx(rho) and g["dpne_epsilon"] <= 1.0
    assert g["spent"]["rho"] <= rho * (1 + 1e-9)
    assert sorted(manifest["files"]) == ["contract.yaml", "embeddings.parquet", "report.html"]
    assert 122 not in set(_numbers(manifest))  # the edge count is private
    report = (folder / "report.html").read_text()
    assert "<img alt='PCA of the embeddings' src='data:image/png;base64," in report
    book = read_lifetime_ledger(None, load_contract(EXAMPLE))
    assert book.rho_spent == pytest.approx(rho)
    assert book.releases[-1]["kind"] == "embedding"


def test_a_second_embedding_with_one_seed_is_refused(tmp_path, capsys):
    assert _embed(tmp_path / "store", "--dim", "4") == 0
    capsys.readouterr()
    assert _embed(tmp_path / "store", "--dim", "4") == 2
    assert "already has a release made with this seed" in _refusal(capsys)


@pytest.mark.parametrize(("change", "needle"), [
    ("extra", "exactly two columns"),
    ("numeric", "column 'target' is numeric"),
    ("other nodes", "column 'target' declares other categories"),
])
def test_a_contract_that_is_not_an_edge_list_is_refused_naming_the_column(
        tmp_path, capsys, change, needle):
    text = EXAMPLE.read_text().replace("name: example_graph", "name: edges")
    head, target = text.split("  - name: target\n")
    target, budget = target.split("budget:")
    if change == "extra":
        target += "  - name: weight\n    type: categorical\n    categories: [a, b]\n"
    elif change == "numeric":
        target = "    type: numeric\n    bins: [0, 1, 2]\n"
    else:
        target = target.replace("n39]", "n40]")
    contract = tmp_path / "edges.yaml"
    contract.write_text(f"{head}  - name: target\n{target}budget:{budget}")
    data = tmp_path / "edges.parquet"
    pd.read_parquet(embedded_dataset_for("example_graph")).to_parquet(data, index=False)
    assert _embed(tmp_path / "store", "--data", str(data), contract=contract) == 2
    assert needle in _refusal(capsys)
    assert read_lifetime_ledger(None, load_contract(contract)).rho_spent == 0.0


def test_self_loops_and_repeated_edges_are_read_as_a_simple_graph(tmp_path, capsys):
    data = tmp_path / "edges.parquet"
    edges = pd.read_parquet(embedded_dataset_for("example_graph"))
    noisy = pd.concat([edges, edges.rename(columns={"source": "target", "target": "source"}),
                       pd.DataFrame({"source": ["n05"], "target": ["n05"]})])
    noisy.to_parquet(data, index=False)
    assert _embed(tmp_path / "store", "--data", str(data)) == 0


@pytest.mark.parametrize(("name", "value"), [
    ("epsilon", "1e300"), ("epsilon", "1e-300"), ("epsilon", "nan"), ("delta", "5e-324"),
    ("delta", "1"), ("dim", "0"), ("regularization", "0"), ("out", "rel*")])
def test_bad_numbers_are_refused_in_one_line_before_anything(tmp_path, capsys, name, value):
    flag = "--" + name.replace("_", "-")
    args = ["embed", "--contract", str(EXAMPLE), "--epsilon", "1", "--no-prefect",
            "--out", str(tmp_path / "store"), "--work-dir", str(tmp_path / "work")]
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and (f"invalid {name}" in err[0] or f"argument {flag}:" in err[0]), err
    assert not (tmp_path / "store").exists()
    assert read_lifetime_ledger(None, load_contract(EXAMPLE)).entries == []


@pytest.mark.prefect
def test_embed_flow_publishes(prefect_harness, tmp_path):
    from flows.kinds import FLOWS

    folder = FLOWS["embed"](epsilon=1.0, contract=str(EXAMPLE), out=str(tmp_path / "store"),
                            dim=4)
    manifest = json.loads((Path(folder) / "manifest.json").read_text())
    assert manifest["kind"] == "embedding"
    assert manifest["seed_policy"].startswith("fresh OS entropy")
