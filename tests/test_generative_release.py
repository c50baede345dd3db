"""GAN methods as releases (``privfair release --method dpgan|fairgan|fairgan-plus|cfgan``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")

from privfair.generative.dag import CausalGraphError  # noqa: E402
from privfair.release.registry import family  # noqa: E402
from privfair.release.run import release_table as run_release  # noqa: E402


def check(request):
    """The ``release`` command's data-free check, by the kind its method picks."""
    command = family("release")
    options = command.kinds[0].parse(request)
    return command.kind_for(options).check(options)

GRAPH = {"nodes": ["age", "sex", "race", "edu", "hours", "income"],
         "edges": [["sex", "edu"], ["edu", "income"], ["hours", "income"], ["sex", "hours"],
                   ["age", "income"]],
         "undirected": [["race", "income"]]}


def params(toy_contract, toy_parquet, tmp_path, method, **extra):
    return {"contract": str(toy_contract), "data": str(toy_parquet), "epsilon": 3.0,
            "delta": 1e-6, "method": method, "seed": 11, "insecure_seed": True,
            "out": str(tmp_path / "store"),
            "work_dir": str(tmp_path / "work"), "gan_epochs": 1, **extra}


@pytest.mark.parametrize("method", ["dpgan", "fairgan", "fairgan-plus", "cfgan"])
def test_tiny_release_with_each_gan_method(toy_contract, toy_parquet, tmp_path, method):
    # one epoch: FairGAN+ leaves race's parity (now checked too, issue 34.2) above 0.05
    extra = {"allow_unfair": True} if method == "fairgan-plus" else {}
    if method == "cfgan":
        graph = tmp_path / "graph.json"
        graph.write_text(json.dumps(GRAPH))
        extra["causal_graph"] = str(graph)
    final = run_release(params(toy_contract, toy_parquet, tmp_path, method, **extra))
    manifest = json.loads((final / "manifest.json").read_text())
    names = [e["name"] for e in manifest["ledger"]]
    assert names[0] == "rows touched by the contract's policies"  # issue 21.2
    assert names[1] == "GAN conditioning: counts of (sex, income)"
    assert names[-1] == "GAN D1 gradients (DP-SGD)"
    anchors = manifest["method"]["marginals"]["anchor_pairs"]
    assert names[2:-1] == [f"GAN anchor: counts of ({a}, {b})" for a, b in anchors
                           if (a, b) != ("sex", "income")]
    assert ["edu", "income"] in anchors
    spent = manifest["guarantee"]["spent"]
    assert spent["epsilon"] <= 3.0 * (1 + 1e-9)
    dp = manifest["method"]["dp_sgd"]
    entry = manifest["ledger"][-1]
    assert (entry["sample_rate"], entry["steps"]) == (dp["sample_rate"], dp["steps"])
    assert entry["sigma"] == pytest.approx(dp["noise_multiplier"] * dp["max_grad_norm"])
    assert 0 < dp["epsilon_dp_sgd_alone"] < spent["epsilon"]
    assert dp["trained_on_real_rows"] == ["D1"]
    fairness = manifest["fairness_check"]["data_fairness"]
    assert -1 <= fairness["rd"] <= 1 and 0 <= fairness["ber"] <= 1
    synthetic = pd.read_parquet(final / "synthetic.parquet")
    assert len(synthetic) == manifest["sampling"]["n_rows"]
    report = (final / "report.html").read_text()
    assert "GAN training chart" in report and "RD(D) of the released table" in report
    assert report.count("<g data-series=") == 2  # generator loss and marginal shift
    assert set(synthetic["income"]) <= {"low", "high"}
    graph = manifest["structure"]["causal_graph"]
    if method == "cfgan":
        assert graph["cost_budget"] is False
        assert -1 <= fairness["causal_effects"]["total_effect"] <= 1
        assert ["race", "income"] in graph["oriented_from_undirected"]
    else:
        assert graph is None
    # The lifetime composes the release's Rényi curve (DP-SGD has no ρ of its own).
    from privfair.contracts.schema import load_contract
    from privfair.core.accounting import RDP_ORDERS
    from privfair.store.registry import read_lifetime_ledger

    book = read_lifetime_ledger(tmp_path / "store", load_contract(toy_contract))
    (release,) = book.releases
    assert len(release["rdp"]) == len(RDP_ORDERS) and "rho" not in release
    assert 0 < book.epsilon_spent() <= 3.0 * (1 + 1e-9)  # its own curve, at most its ε


def test_cfgan_refusals_come_before_any_read(toy_contract, toy_parquet, tmp_path):
    with pytest.raises(CausalGraphError, match="causal_graph section in the contract or "
                       "--causal-graph"):
        check(params(toy_contract, toy_parquet, tmp_path, "cfgan"))
    graph = tmp_path / "cycle.yaml"
    graph.write_text("edges: [[sex, edu], [edu, hours], [hours, sex]]\n")
    with pytest.raises(CausalGraphError, match="cycle") as info:
        check(params(toy_contract, toy_parquet, tmp_path, "cfgan",
                         causal_graph=str(graph)))
    assert "\n" not in str(info.value)
    graph.write_text("edges: [[sex, zipcode]]\n")
    with pytest.raises(CausalGraphError, match="zipcode"):
        check(params(toy_contract, toy_parquet, tmp_path, "cfgan",
                         causal_graph=str(graph)))
    assert not (tmp_path / "store").exists()


def test_cfgan_takes_the_graph_declared_in_the_contract(toy_contract, toy_parquet, tmp_path):
    """Issue 12 item 3: the DAG comes from the contract's causal_graph section when no file is
    given, and the plan records where it came from; a graph naming an unknown column is
    refused when the contract is parsed."""
    from privfair.contracts.schema import load_contract
    from privfair.core.errors import ContractError

    declared = tmp_path / "with_graph.yaml"
    declared.write_text(toy_contract.read_text() + (
        "causal_graph:\n"
        "  edges: [[sex, edu], [edu, income], [hours, income], [sex, hours], [age, income]]\n"
        "  undirected: [[race, income]]\n"))
    plan = check(params(declared, toy_parquet, tmp_path, "cfgan"))
    assert plan.causal_graph["source"] == "the contract's causal_graph"
    assert ["race", "income"] in plan.causal_graph["oriented_from_undirected"]
    assert ["sex", "edu"] in plan.causal_graph["edges"]
    # A file given on the command line wins over the contract's section.
    graph = tmp_path / "graph.json"
    graph.write_text(json.dumps(GRAPH))
    plan = check(params(declared, toy_parquet, tmp_path, "cfgan", causal_graph=str(graph)))
    assert plan.causal_graph["source"].endswith("(--causal-graph)")
    bad = tmp_path / "bad_graph.yaml"
    bad.write_text(toy_contract.read_text() + "causal_graph:\n  edges: [[sex, zipcode]]\n")
    with pytest.raises(ContractError, match="causal_graph: \\['zipcode'\\]") as info:
        load_contract(bad)
    assert "\n" not in str(info.value)


def test_release_form_offers_the_gan_methods():
    """The GAN kind runs under the release flow; its stages are tasks like every kind's
    (never retried, cached or persisted: ``test_flows.py`` checks every stage of every kind)."""
    from flows.kinds import release
    from privfair.release.kinds.gan.kind import GAN
    from privfair.release.registry import family

    assert GAN in family("release").kinds
    fields = release.parameters.model_dump()["properties"]
    assert {"dpgan", "fairgan", "fairgan-plus", "cfgan"} <= set(fields["method"]["enum"])
    assert {"causal_graph", "gan_epochs", "group_clipping", "release_classifier"} <= set(fields)


@pytest.mark.prefect
def test_flow_release_with_a_gan(prefect_harness, toy_contract, toy_parquet, tmp_path):
    from flows.kinds import run_local
    from privfair.release.tabular.plan import ReleaseParams

    final = run_local(ReleaseParams(**params(toy_contract, toy_parquet, tmp_path, "fairgan",
                                             group_clipping=True)), command="release")
    manifest = json.loads((Path(final) / "manifest.json").read_text())
    assert manifest["method"]["name"] == "fairgan"
    assert [e["name"] for e in manifest["ledger"]][-1] == (
        "GAN D1 gradients and clipped counts (DPSGD-F, one subsampled Gaussian)")
    assert manifest["method"]["dp_sgd"]["group_clipping"] is True
    assert manifest["orchestrator"]["name"] == "prefect"


def test_fairgan_plus_releases_its_classifier_as_a_model(toy_contract, toy_parquet, tmp_path,
                                                        toy_frame):
    """Issue 12 item 4: η is released as a model (the `privfair train` format) inside the
    release folder, hashed in the release manifest, and `predict` reads it."""
    from privfair.release.kinds.model.train import predict

    final = run_release(params(toy_contract, toy_parquet, tmp_path, "fairgan-plus",
                               release_classifier=True, allow_unfair=True))
    manifest = json.loads((final / "manifest.json").read_text())
    assert manifest["classifier"]["folder"] == "classifier"
    assert {"classifier/weights.npz", "classifier/manifest.json",
            "classifier/contract.yaml", "classifier/model_card.md"} <= set(manifest["files"])
    model = json.loads((final / "classifier" / "manifest.json").read_text())
    assert model["kind"] == "model" and "post-processing" in model["privacy"]
    # η's inputs: every column but S (sex) and Y (income); race stays, as in FairGAN+.
    assert [f["column"] for f in model["features"]["features"]] == ["age", "race", "edu",
                                                                     "hours"]
    scores = predict(final / "classifier", toy_frame.head(50))
    assert len(scores) == 50 and scores["score"].between(0, 1).all()
    assert set(scores["prediction"]) <= {"low", "high"}


def test_classifier_weights_follow_the_contract_encoding(toy_contract):
    """The released coef gives η's own positive-class logit on every row (the mapping from
    the GAN's one-hot layout to the model encoding keeps the column order)."""
    from types import SimpleNamespace

    import numpy as np
    import torch

    from privfair.contracts.model_features import FeatureEncoding
    from privfair.contracts.schema import load_contract
    from privfair.generative.nets import OneHotLayout
    from privfair.release.kinds.gan.stages import classifier_record

    contract = load_contract(toy_contract)
    domain = contract.domain()
    layout = OneHotLayout(domain)
    x_only = layout.columns([a for a in domain if a not in ("sex", "income")])
    eta = torch.nn.Linear(len(x_only), 2)
    torch.nn.init.normal_(eta.weight, generator=torch.Generator().manual_seed(3))
    fitted = SimpleNamespace(
        protected="sex", outcome="income",
        config=SimpleNamespace(classifier_fairness="dp", classifier_rows="generated"),
        classifier_state={"0.weight": eta.weight.detach().numpy(),
                          "0.bias": eta.bias.detach().numpy()})
    record = classifier_record(fitted, contract)
    rng = np.random.default_rng(0)
    codes = {a: rng.integers(0, domain.size(a), 64) for a in domain}
    rows = layout.encode(codes)[:, x_only]
    with torch.no_grad():
        logits = eta(rows)
    expected = (logits[:, 1] - logits[:, 0]).numpy()
    encoding = FeatureEncoding.from_dict(record["features"])
    x = np.zeros((64, encoding.dimension))
    offset = 0
    for name, labels in encoding.features:
        x[np.arange(64), offset + codes[name]] = 1.0
        offset += len(labels)
    x[:, -1] = 1.0
    assert np.allclose(x @ np.asarray(record["coef"]), expected, atol=1e-5)


def test_release_classifier_is_refused_for_other_methods(toy_contract, toy_parquet, tmp_path):
    from privfair.release.tabular.plan import ReleaseInputError

    with pytest.raises(ReleaseInputError, match="only method 'fairgan-plus'") as info:
        check(params(toy_contract, toy_parquet, tmp_path, "fairgan",
                         release_classifier=True))
    assert "\n" not in str(info.value)
    with pytest.raises(ReleaseInputError, match="only method 'fairgan-plus'"):
        check(params(toy_contract, toy_parquet, tmp_path, "mst", release_classifier=True))


def test_ber_is_undefined_not_a_warning_when_one_side_holds_one_group():
    """A rare group of a protected attribute may fall wholly on one side of BER's 70/30
    split; balanced accuracy is then undefined (nan), never a warning that fails the run."""
    import warnings

    import numpy as np

    from privfair.core.domain import Domain
    from privfair.release.kinds.gan.stages import data_fairness

    domain = Domain(["s", "y", "x"], [2, 2, 3])
    n = 40
    codes = {"s": np.r_[np.ones(1, dtype=int), np.zeros(n - 1, dtype=int)],
             "y": np.arange(n) % 2, "x": np.arange(n) % 3}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for seed in range(20):  # the one member of group 1 lands in train or in test
            out = data_fairness(codes, domain, protected="s", outcome="y",
                                rng=np.random.default_rng(seed))
            assert np.isnan(out["ber"])
