"""The ``graph`` kind on the release protocol: the issue 20 and 21.3 regressions, PrivPC*."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privfair.cli import main
from privfair.contracts.schema import load_contract
from privfair.release.kinds.causal_graph.kind import GRAPH, GraphKind
from privfair.release.protocol import run_release
from privfair.release.registry import FAMILIES, family
from privfair.store import publication
from privfair.store.registry import read_lifetime_ledger
from tests.conftest import TOY_CONTRACT, make_toy_frame


def _discover(contract: Path, data: Path, store: Path, *extra: str, seed: str = "3") -> int:
    return main(["discover", "--contract", str(contract), "--data", str(data), "--epsilon", "1",
                 "--seed", seed, "--insecure-seed", "--out", str(store), "--no-prefect",
                 "--work-dir", str(store.parent / "work"), *extra])


def _folder(capsys) -> Path:
    return Path(capsys.readouterr().out.strip().splitlines()[-1])


def _refusal(capsys) -> str:
    """The one refusal line on stderr (besides the cost line of a request that was planned)."""
    lines = [line for line in capsys.readouterr().err.splitlines()
             if not line.startswith(("cost: ", "WARNING: "))]
    assert len(lines) == 1, lines
    return lines[0]


def _nothing_reserved(contract: Path) -> bool:
    book = read_lifetime_ledger(None, load_contract(contract))
    return book.rho_spent == 0.0 and not book.pending and not book.releases


def test_graph_is_a_declared_kind_of_its_own_command():
    assert family("discover").kinds == (GRAPH,)
    assert isinstance(GRAPH, GraphKind) and GRAPH.name == "graph"
    assert [f.command for f in FAMILIES].count("discover") == 1
    assert {"read", "search (privpc)"} == {s.name for s in GRAPH.stages(
        type("P", (), {"search": "privpc"})())}


def test_a_second_release_with_one_seed_is_refused(toy_contract, toy_parquet, tmp_path, capsys):
    store = tmp_path / "store"
    assert _discover(toy_contract, toy_parquet, store) == 0
    capsys.readouterr()
    spent = read_lifetime_ledger(None, load_contract(toy_contract)).rho_spent
    assert _discover(toy_contract, toy_parquet, store) == 2
    err = _refusal(capsys)
    assert "seed" in err and "already has a release" in err
    assert read_lifetime_ledger(None, load_contract(toy_contract)).rho_spent == spent
    assert sorted(p.name for p in (store / "toy").iterdir() if p.is_dir()) == ["v1"]


def test_files_are_written_after_the_intent_into_a_0700_folder(toy_contract, toy_parquet,
                                                              tmp_path, capsys, monkeypatch):
    steps: list[str] = []
    modes: list[int] = []
    monkeypatch.setattr(publication, "reached", steps.append)
    write = GraphKind.write

    def recording_write(self, folder, context, state, **kw):
        steps.append("write")
        modes.append(folder.stat().st_mode & 0o777)
        assert list(folder.parent.glob(".intent-*.json")), "files written before the intent"
        return write(self, folder, context, state, **kw)

    monkeypatch.setattr(GraphKind, "write", recording_write)
    assert _discover(toy_contract, toy_parquet, tmp_path / "store") == 0
    assert steps[:3] == ["intent", "files", "write"] and "rename" in steps
    assert modes == [0o700]


def test_a_killed_publication_is_recovered_under_the_lock(toy_contract, toy_parquet, tmp_path,
                                                         capsys):
    store = tmp_path / "store"
    folder = store / "toy"
    staged = folder / ".tmp-v1-dead0000"
    staged.mkdir(parents=True)
    (staged / "graph.json").write_text("{}")
    (folder / ".intent-v1.json").write_text(json.dumps(
        {"version": "v1", "run_id": "killed", "staged": str(staged)}))
    assert _discover(toy_contract, toy_parquet, store) == 0
    assert _folder(capsys) == folder / "v1"
    assert not staged.exists() and not list(folder.glob(".intent-*"))


@pytest.mark.parametrize(("extra", "name"), [
    (("--delta", "5e-324"), "delta"),
    (("--epsilon", "1e-300"), "epsilon"),
    (("--epsilon", "1e300"), "epsilon"),
    (("--epsilon", "nan"), "epsilon"),
])
def test_numbers_the_accounting_cannot_hold_are_refused_before_anything(
        toy_contract, toy_parquet, tmp_path, capsys, extra, name):
    store = tmp_path / "store"
    assert _discover(toy_contract, toy_parquet, store, *extra) == 2
    err = _refusal(capsys)
    assert f"invalid {name}" in err or f"argument --{name}:" in err, err
    assert not store.exists() and _nothing_reserved(toy_contract)


def test_a_search_too_large_for_memory_is_refused_before_the_reservation(
        tmp_path, capsys, monkeypatch):
    """Issue 20: a huge domain was a MemoryError after charging; now check() refuses it."""
    categories = [f"c{i}" for i in range(100)]
    columns = "\n".join(f"  - name: x{k}\n    type: categorical\n    categories: {categories}"
                        for k in range(4))
    contract = tmp_path / "wide.yaml"
    contract.write_text(f"name: wide\nversion: '1'\ncolumns:\n{columns}\n"
                        "budget: {epsilon: 3.0, delta: 1.0e-6}\n")
    data = tmp_path / "wide.parquet"
    pd.DataFrame({f"x{k}": ["c0", "c1"] * 5 for k in range(4)}).to_parquet(data, index=False)
    monkeypatch.setenv("PRIVFAIR_MEMORY_GB", "0.001")
    assert _discover(contract, data, tmp_path / "store", "--max-rows", "100") == 2
    err = _refusal(capsys)
    assert "max_order" in err and "contingency table" in err
    assert _nothing_reserved(contract)


def test_a_bad_column_is_refused_from_the_schema_before_the_reservation(
        toy_contract, tmp_path, capsys):
    data = tmp_path / "bad.parquet"
    make_toy_frame().drop(columns=["edu"]).to_parquet(data, index=False)
    assert _discover(toy_contract, data, tmp_path / "store") == 2
    err = _refusal(capsys)
    assert "'edu'" in err and "missing" in err
    assert _nothing_reserved(toy_contract)
    frame = make_toy_frame()
    frame["hours"] = frame["hours"].astype(str)
    frame.to_parquet(data, index=False)
    assert _discover(toy_contract, data, tmp_path / "store") == 2
    assert "'hours'" in _refusal(capsys) and _nothing_reserved(toy_contract)


def _neutral(manifest: dict) -> dict:
    """The manifest without what a release of other data or at another time may change."""
    drop = {"version", "run_id", "started_at", "published_at", "graph", "ledger", "roles_audit",
            "guarantee", "files", "code_version", "lifetime_rho_spent_after",
            "lifetime_epsilon_spent_after",
            "validation"}  # noisy counts of the rows the policies touched (issue 21.2)
    return {k: v for k, v in manifest.items() if k not in drop}


def test_max_rows_never_refuses_and_the_release_does_not_depend_on_n(tmp_path, capsys,
                                                                   monkeypatch):
    """Issue 21.3: refusing n > max_rows revealed n by bisection. A larger table is
    subsampled to max_rows rows with scores for one replaced row; the release does not say
    which happened."""
    from privfair.causal import privpc

    max_rows = 400
    seen: list[tuple[int, bool]] = []
    search = privpc.priv_pc

    def recording(codes, domain, **kw):
        seen.append((len(codes), kw["replace_one"]))
        return search(codes, domain, **kw)

    monkeypatch.setattr(privpc, "priv_pc", recording)
    manifests, files = [], []
    for n, seed in ((max_rows + 1, "3"), (max_rows, "4")):
        contract, data = tmp_path / f"toy{n}.yaml", tmp_path / f"toy{n}.parquet"
        contract.write_text(TOY_CONTRACT)
        make_toy_frame(n).to_parquet(data, index=False)
        assert _discover(contract, data, tmp_path / "store", "--max-rows", str(max_rows),
                         seed=seed) == 0
        folder = _folder(capsys)
        files.append(sorted(p.name for p in folder.iterdir()))
        manifests.append(json.loads((folder / "manifest.json").read_text()))
    assert seen == [(max_rows, True), (max_rows, True)]
    assert files[0] == files[1]
    assert _neutral(manifests[0]) == _neutral(manifests[1])
    assert set(manifests[0]) == set(manifests[1])
    assert manifests[0]["search"]["max_rows"] == max_rows
    assert "subset" in manifests[0]["search"]["rows"]
    for m in manifests:  # neither n nor n - max_rows appears anywhere
        text = json.dumps(_neutral(m))
        assert str(max_rows + 1) not in text


NUMERIC_CONTRACT = """\
name: chain
version: "1"
columns:
  - name: x
    type: numeric
    bins: [-2.5, 0, 2.5]
  - name: y
    type: numeric
    bins: [-2.5, 0, 2.5]
  - name: z
    type: numeric
    bins: [-2.5, 0, 2.5]
budget: {epsilon: 100.0, delta: 1.0e-6}
"""


def test_privpc_star_publishes_the_chain_skeleton_of_numeric_data(tmp_path, capsys):
    """Issue 20: PrivPC* is one more method of the declared kind (numeric read stage); at a
    large ε its Fisher z tests on the released correlations find the chain's skeleton."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=2000)
    y = 0.8 * x + 0.6 * rng.normal(size=2000)
    z = 0.8 * y + 0.6 * rng.normal(size=2000)
    data = tmp_path / "chain.parquet"
    pd.DataFrame({"x": x, "y": y, "z": z}).to_parquet(data, index=False)
    contract = tmp_path / "chain.yaml"
    contract.write_text(NUMERIC_CONTRACT)
    code = main(["discover", "--contract", str(contract), "--data", str(data), "--epsilon", "50",
                 "--method", "privpc-star", "--seed", "1", "--insecure-seed", "--no-prefect",
                 "--out", str(tmp_path / "store"), "--work-dir", str(tmp_path / "work")])
    assert code == 0, capsys.readouterr().err
    folder = _folder(capsys)
    graph = json.loads((folder / "graph.json").read_text())
    skeleton = {frozenset(e) for e in graph["edges"] + graph["undirected"]}
    assert skeleton == {frozenset("xy"), frozenset("yz")}
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["method"] == "privpc-star" and manifest["domain"]["x"] == {
        "lower": -2.5, "upper": 2.5}
    assert manifest["guarantee"]["spent"]["rho"] <= manifest["guarantee"]["rho_reserved"] * (
        1 + 1e-9)
    assert sorted(p.name for p in folder.iterdir()) == [
        "contract.yaml", "graph.json", "ledger.json", "manifest.json", "report.html"]


def test_privpc_star_refuses_a_contract_without_two_numeric_columns(toy_contract, toy_parquet,
                                                                   tmp_path):
    contract = tmp_path / "one.yaml"
    contract.write_text(TOY_CONTRACT.replace(
        "  - name: hours\n    type: numeric\n    integer: true\n    bins: [1, 20, 40, 60, 100]",
        "  - name: hours\n    type: categorical\n    categories: [a]"))
    options = {"contract": str(contract), "data": str(toy_parquet), "epsilon": 1.0,
               "method": "privpc-star", "out": str(tmp_path / "store")}
    with pytest.raises(ValueError, match="1 numeric column"):
        run_release(GRAPH, options)
    with pytest.raises(ValueError, match="coarsen"):
        run_release(GRAPH, {**options, "contract": str(toy_contract),
                            "coarsen": "adult-ch4"})
