"""Issue 32.2: every declared sensitivity checked on worst-case neighbours, not assumed.

Each release path runs on a small table D and on a neighbour D′ (a row added in the rarest
cell, a row with an extreme or out-of-domain value under each policy, a null, a row removed)
with the same seed, inside ``recorded_queries()``. The D′ run *replays* D's noisy outputs
(every layer mechanism still charges and records D′'s exact answer, then returns what it
returned on D), so an adaptive release (AIM, MST, PreFair) asks D′ the same questions it
asked D, conditioned on the same past outputs, as the privacy proof does. The recorded
queries pair up by order and name, and for each the change of the exact answer must lie
within its declared sensitivity: L2 for Gaussian noise, L1 for Laplace (summed row L2 for
DPNE's row Laplace), L∞ of the scores for the exponential mechanism.

The last tests show the suite fails on two broken declarations: AIM's measurements declared
at half their sensitivity, and marginals declared at sensitivity 1 instead of √k.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import pytest

# Every module that calls the layer is imported now, before a test wraps its names: one
# imported during a wrapped run would bind the wrapper for good.
import privfair.causal.privpc
import privfair.domains.cathist
import privfair.embedding.dpne
import privfair.learn.functional
import privfair.release.policy_counts
import privfair.synth.synthesizer  # noqa: F401  (imports synth.aim, measure, structure)
from privfair.contracts.encoding import encode
from privfair.contracts.schema import parse_contract
from privfair.core.accounting import PrivacyLedger
from privfair.core.mechanisms import Query, recorded_queries

#: Layer functions whose outputs are replayed (CatHist's sparse histogram is not: its
#: output's length is the active domain's, and CatHist is not adaptive; it is run alone).
REPLAYED = ("gaussian_mechanism", "exponential_mechanism", "exponential_first_admissible",
            "laplace_mechanism", "grid_laplace_mechanism", "row_laplace_mechanism",
            "subsampled_gaussian")

CONTRACT = parse_contract("""\
name: neighbours
version: "1"
columns:
  - {name: sex, type: categorical, categories: [F, M], nulls: drop}
  - {name: race, type: categorical, categories: [A, B, other], out_of_domain: "other:other"}
  - {name: edu, type: categorical, categories: [HS, BA, MA], nulls: "as:HS"}
  - {name: hours, type: numeric, bins: [0, 20, 40, 60], out_of_domain: clamp,
     nulls: "as:[20, 40)"}
  - {name: income, type: categorical, categories: [low, high], out_of_domain: drop}
roles:
  protected: [sex, race]
  admissible: [edu, hours]
  outcome: [income]
budget: {epsilon: 3.0, delta: 1.0e-6}
""")


def _table(n: int = 2000, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "sex": rng.choice(["F", "M"], n).astype(object),
        "race": rng.choice(["A", "B"], n, p=[0.8, 0.2]).astype(object),
        "edu": rng.choice(["HS", "BA", "MA"], n, p=[0.5, 0.4, 0.1]).astype(object),
        "hours": rng.uniform(1, 59, n).round(),
        "income": rng.choice(["low", "high"], n).astype(object)})


#: 2 000 rows: enough that AIM and the trees run their rounds rather than the small-n
#: independence fallback.
D = _table()
#: name -> D′, each one record away from D.
NEIGHBOURS: dict[str, pd.DataFrame] = {
    # "other" race, MA, high income and hours in the last bin: absent from D's small cells.
    "row in the rarest cell": pd.concat([D, pd.DataFrame([{
        "sex": "F", "race": "other", "edu": "MA", "hours": 59.0, "income": "high"}])],
        ignore_index=True),
    "extreme value under each policy": pd.concat([D, pd.DataFrame([{
        "sex": None, "race": "Zulu", "edu": None, "hours": 1e12, "income": "medium"}])],
        ignore_index=True),
    "out-of-domain value dropped": pd.concat([D, pd.DataFrame([{
        "sex": "F", "race": "A", "edu": "BA", "hours": 30.0, "income": "medium"}])],
        ignore_index=True),
    "null": pd.concat([D, pd.DataFrame([{
        "sex": None, "race": "B", "edu": "HS", "hours": None, "income": "low"}])],
        ignore_index=True),
    "row removed": D.iloc[1:].reset_index(drop=True),
}


# --- replay and pairing ---------------------------------------------------------------------


class Replay:
    """Records every layer output in ``record`` mode and returns them, in order, in
    ``replay`` mode (after the real call has charged and recorded the exact answer)."""

    def __init__(self) -> None:
        self.outputs: list[Any] = []
        self.replaying = False
        self.position = 0

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            out = function(*args, **kwargs)
            if not self.replaying:
                self.outputs.append(copy.deepcopy(out))
                return out
            if self.position >= len(self.outputs):
                raise AssertionError("D' drew more noise than D: a data-dependent query count")
            recorded = self.outputs[self.position]
            self.position += 1
            return copy.deepcopy(recorded)

        return wrapped


@contextmanager
def replaying(monkeypatch: pytest.MonkeyPatch) -> Iterator[Replay]:
    """Wrap every layer function named in :data:`REPLAYED` wherever privfair imported it
    (whatever it is bound to now: a break a test installed gets wrapped too)."""
    replay = Replay()
    with monkeypatch.context() as patch:
        for name, module in list(sys.modules.items()):
            # The layer's own module keeps the originals (a module imported later binds those).
            if (not name.startswith("privfair.") or name == "privfair.core.mechanisms"
                    or name.startswith("privfair.evaluation")):
                continue
            for attribute in REPLAYED:
                function = getattr(module, attribute, None)
                if callable(function):
                    patch.setattr(module, attribute, replay.wrap(function))
        # DP-SGD's noise object: its draws are replayed too (DPSGD-F's clipping bounds come
        # from its noisy counts, so D' must see D's).
        from privfair.core.mechanisms import SubsampledGaussian

        for method in ("add_gradient_noise", "add_count_noise"):
            patch.setattr(SubsampledGaussian, method,
                          replay.wrap(getattr(SubsampledGaussian, method)))
        yield replay


def paired_queries(monkeypatch: pytest.MonkeyPatch, run: Callable[..., Any],
                   d: pd.DataFrame, d_prime: pd.DataFrame, *, seed: int = 0
                   ) -> list[tuple[Query, Query]]:
    """``run(frame, rng)`` on D, then on D′ replaying D's outputs; the queries paired."""
    with replaying(monkeypatch) as replay:
        with recorded_queries() as on_d:
            run(d, np.random.default_rng(seed))
        replay.replaying = True
        with recorded_queries() as on_n:
            run(d_prime, np.random.default_rng(seed))
    assert on_d, "the run recorded no query: its noise is not drawn through the layer"
    assert [q.name for q in on_d] == [q.name for q in on_n], \
        "D and D' asked different queries: a data-dependent query list"
    return list(zip(on_d, on_n, strict=True))


def _norm(mechanism: str, change: np.ndarray) -> float:
    if mechanism == "exponential":
        return float(np.max(np.abs(change), initial=0.0))
    if mechanism in ("laplace", "grid-laplace", "sparse-laplace"):
        return float(np.sum(np.abs(change)))
    if mechanism == "row-laplace":
        return float(np.sum(np.linalg.norm(change, axis=1)))
    return float(np.linalg.norm(change.ravel()))  # gaussian, subsampled-gaussian


def violations(pairs: list[tuple[Query, Query]]) -> list[str]:
    """Every query whose exact answer moved by more than its declared sensitivity."""
    found = []
    for q_d, q_n in pairs:
        assert q_d.mechanism == q_n.mechanism and q_d.exact.shape == q_n.exact.shape, q_d.name
        assert q_d.sensitivity == q_n.sensitivity, f"{q_d.name}: sensitivity depends on data"
        moved = _norm(q_d.mechanism, q_n.exact - q_d.exact)
        if moved > q_d.sensitivity * (1 + 1e-9) + 1e-9:
            found.append(f"{q_d.name} ({q_d.mechanism}): moved {moved:.6g} > declared "
                         f"{q_d.sensitivity:.6g}")
    return found


# --- the release paths --------------------------------------------------------------------------


def _policy_counts(frame: pd.DataFrame, rng: np.random.Generator) -> None:
    from privfair.release.policy_counts import measure_policy_counts

    measure_policy_counts(encode(frame, CONTRACT).tally, CONTRACT,
                          PrivacyLedger(rho_budget=1e9), rho=0.1, rng=rng)


def _table_method(method: str) -> Callable[[pd.DataFrame, np.random.Generator], None]:
    """The table kind's measurement chain: the contract's encoder, the policy counts, then
    ``FairSynthesizer.measure`` (every private read and noise draw of a fit)."""

    def run(frame: pd.DataFrame, rng: np.random.Generator) -> None:
        from privfair.release.policy_counts import measure_policy_counts
        from privfair.synth.synthesizer import FairSynthesizer

        encoded = encode(frame, CONTRACT)
        ledger = PrivacyLedger(rho_budget=1e9)
        measure_policy_counts(encoded.tally, CONTRACT, ledger, rho=0.02, rng=rng)
        synth = FairSynthesizer(domain=CONTRACT.domain(), roles=CONTRACT.roles(),
                                epsilon=3.0, delta=1e-6, method=method, max_iters=20)
        synth.measure(pd.DataFrame(encoded.codes), rng=rng, ledger=ledger)

    return run


TABLE_METHODS = ("mst", "prefair-greedy", "prefair-exact", "aim", "aim-fair", "independent")


@pytest.mark.parametrize("neighbour", list(NEIGHBOURS))
def test_policy_counts_within_sensitivity(monkeypatch, neighbour: str) -> None:
    pairs = paired_queries(monkeypatch, _policy_counts, D, NEIGHBOURS[neighbour])
    assert violations(pairs) == []
    # The worst cases use the whole sensitivity: √(columns with a cell).
    if neighbour == "extreme value under each policy":
        (q_d, q_n), = pairs
        assert np.linalg.norm(q_n.exact - q_d.exact) == pytest.approx(q_d.sensitivity, 0.01)


#: What each method must draw on D (its real path, not the small-n fallback).
EXPECTED = {"mst": {"gaussian", "exponential"}, "prefair-greedy": {"gaussian", "exponential"},
            "prefair-exact": {"gaussian"}, "aim": {"gaussian", "exponential"},
            "aim-fair": {"gaussian", "exponential"}, "independent": {"gaussian"}}


@pytest.mark.parametrize("method", TABLE_METHODS)
def test_table_method_within_sensitivity(monkeypatch, method: str) -> None:
    for neighbour, frame in NEIGHBOURS.items():
        pairs = paired_queries(monkeypatch, _table_method(method), D, frame)
        assert violations(pairs) == [], (method, neighbour)
        assert {q.mechanism for q, _ in pairs} == EXPECTED[method], (method, neighbour)
        assert len(pairs) >= len(EXPECTED[method]) + 1, (method, neighbour)


def test_model_card_confusion_counts_within_sensitivity(monkeypatch) -> None:
    """One more held-out row moves one cell of the per-group confusion counts by 1."""
    from privfair.release.kinds.model.evaluation import confusion_counts, release_confusion

    rng0 = np.random.default_rng(6)
    y, pred, groups = (rng0.integers(0, 2, 50) for _ in range(3))
    frames = (pd.DataFrame({"y": y, "p": pred, "g": groups}),
              pd.DataFrame({"y": np.append(y, 1), "p": np.append(pred, 0),
                            "g": np.append(groups, 1)}))

    def run(frame: pd.DataFrame, rng: np.random.Generator) -> None:
        counts = confusion_counts(frame["y"].to_numpy(), frame["p"].to_numpy(),
                                  frame["g"].to_numpy(), 2)
        release_confusion(counts, sigma=3.0, ledger=PrivacyLedger(rho_budget=1e9), rng=rng)

    assert violations(paired_queries(monkeypatch, run, *frames)) == []


@pytest.mark.parametrize("method", ["dpsgd", "dpsgd-f"])
def test_dpsgd_step_within_sensitivity(monkeypatch, method: str) -> None:
    """One Poisson-subsampled step (q = 1/2) of DP-SGD / DPSGD-F on D and on D′ (a row
    with a huge feature, in group 1) with the same torch seed, D′ replaying D's noise: the
    clipped gradient sum (and DPSGD-F's group counts) move within the declared bound. One
    step: a second would sample its batch from a torch stream the extra row shifted."""
    import torch

    from privfair.learn.dpsgd import SGDSettings, train

    rng0 = np.random.default_rng(7)
    frame = pd.DataFrame(rng0.normal(size=(40, 3)), columns=["x0", "x1", "x2"]).assign(
        y=rng0.integers(0, 2, 40).astype(float), g=rng0.integers(0, 2, 40))
    extra = pd.DataFrame([{"x0": 1e3, "x1": -1e3, "x2": 1e3, "y": 1.0, "g": 1}])
    settings = SGDSettings(method=method, sample_rate=0.5, steps=1, expected_batch_size=20.0,
                           noise_multiplier=1.0, clip=1.0, learning_rate=0.1,
                           weight_decay=0.0)

    def run(data: pd.DataFrame, rng: np.random.Generator) -> None:
        train(data[["x0", "x1", "x2"]].to_numpy(), data["y"].to_numpy(),
              data["g"].to_numpy(), settings=settings, n_groups=2,
              ledger=PrivacyLedger(rho_budget=1e9, delta=1e-6),
              generator=torch.Generator().manual_seed(3))

    pairs = paired_queries(monkeypatch, run, frame,
                           pd.concat([frame, extra], ignore_index=True))
    assert {q.mechanism for q, _ in pairs} == {"subsampled-gaussian"}
    assert violations(pairs) == []


def _functional_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """One-hot rows over 3 features; D′ adds the row x = e₀, y = 0, s = 1 (centre 1/2), which
    moves λ1, μ and Λ2 each by the most one row can."""
    rng0 = np.random.default_rng(4)
    x = np.eye(3)[rng0.integers(0, 3, size=40)]
    y = rng0.integers(0, 2, size=40).astype(float)
    s = rng0.integers(0, 2, size=40).astype(float)
    return (pd.DataFrame(np.column_stack([x, y, s])),
            pd.DataFrame(np.column_stack([np.vstack([x, [1, 0, 0]]), np.append(y, 0),
                                          np.append(s, 1)])))


def _functional(model: str, term: str) -> Callable[[pd.DataFrame, np.random.Generator], None]:
    from privfair.learn.functional import noisy_objective

    def run(frame: pd.DataFrame, rng: np.random.Generator) -> None:
        values = frame.to_numpy()
        noisy_objective(values[:, :3], values[:, 3], values[:, 4], epsilon=1.0,
                        ledger=PrivacyLedger(rho_budget=1e9), rng=rng, variant=model,
                        row_l1_bound=1.0, centre=0.5, alpha=0.3, fairness_share=0.5,
                        fairness_term=term)

    return run


@pytest.mark.parametrize("model, term", [("pflr", "absolute"), ("pflr", "signed"),
                                         ("pflr-star", "absolute"), ("pflr-star", "signed"),
                                         ("privlr", "absolute")])
def test_functional_models_within_sensitivity(monkeypatch, model: str, term: str) -> None:
    """The functional mechanism (PrivLR, PFLR, PFLR*, each fairness term of issue 40) on
    one-hot rows; D′ adds a row at the corner that moves the polynomial most."""
    pairs = paired_queries(monkeypatch, _functional(model, term), *_functional_frames())
    assert {q.mechanism for q, _ in pairs} == {"grid-laplace"}
    assert violations(pairs) == []


def test_fails_when_pflr_absolute_term_keeps_privlr_sensitivity(monkeypatch) -> None:
    """PFLR's absolute term releases μ beside λ1 and Λ2: declared at PrivLR's B/2 + B²/8
    (μ's part not re-derived), the row moves the release by 1/2 + 1/2 + 1/8 > 5/8."""
    import privfair.learn.functional as functional

    real = functional.grid_laplace_mechanism

    def without_mu(values, *, sensitivity, name, **kwargs):
        if name == "functional mechanism (PFLR)":
            sensitivity = 0.5 + 1 / 8
        return real(values, sensitivity=sensitivity, name=name, **kwargs)

    monkeypatch.setattr(functional, "grid_laplace_mechanism", without_mu)
    found = violations(paired_queries(monkeypatch, _functional("pflr", "absolute"),
                                      *_functional_frames()))
    assert len(found) == 1 and "moved 1.125 > declared 0.625" in found[0], found


def test_dpne_within_sensitivity(monkeypatch) -> None:
    """DPNE: an edge added between the two busiest nodes, and one between isolated ones."""
    from privfair.embedding.dpne import EdgeList, dpne

    base = np.array([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [4, 5]])
    graphs = {"base": base, "busy": np.vstack([base, [[2, 3]]]),
              "isolated": np.vstack([base, [[6, 7]]])}

    def run(frame: pd.DataFrame, rng: np.random.Generator) -> None:
        dpne(EdgeList(8, frame.to_numpy()), dim=2, epsilon=1.0,
             ledger=PrivacyLedger(rho_budget=1e9), rng=rng)

    for name in ("busy", "isolated"):
        pairs = paired_queries(monkeypatch, run, pd.DataFrame(graphs["base"]),
                               pd.DataFrame(graphs[name]))
        assert violations(pairs) == [], name


#: The exhaustive search's worst edge neighbours (two isolated edges joined by one more):
#: ‖M' − M‖₁ = 2.5, the largest over every graph on up to five nodes.
WORST_EDGES = np.array([[0, 2], [0, 4], [1, 3]])


def _dpm_run(frame: pd.DataFrame, rng: np.random.Generator) -> None:
    from privfair.embedding.dpne import EdgeList, dpm

    dpm(EdgeList(5, frame.to_numpy()), dim=2, epsilon=1.0, ledger=PrivacyLedger(rho_budget=1e9),
        rng=rng)


def test_dpm_within_sensitivity(monkeypatch) -> None:
    """dpM: the worst pair moves M by 2.5 in L1, inside the declared 3."""
    joined = np.vstack([WORST_EDGES, [[0, 1]]])
    pairs = paired_queries(monkeypatch, _dpm_run, pd.DataFrame(WORST_EDGES),
                           pd.DataFrame(joined))
    assert violations(pairs) == []
    (pair,) = pairs
    assert np.abs(pair[1].exact - pair[0].exact).sum() == pytest.approx(2.5)


# --- the suite fails on broken declarations -----------------------------------------------------


def test_fails_when_dpm_declares_half_its_sensitivity(monkeypatch) -> None:
    """dpM at half its bound (1.5), or at the paper's √2: the worst pair's 2.5 passes both."""
    import privfair.embedding.dpne as dpne_module

    joined = pd.DataFrame(np.vstack([WORST_EDGES, [[0, 1]]]))
    for declared in (dpne_module.DPM_SENSITIVITY / 2, dpne_module.PAPER_DPM_SENSITIVITY):
        monkeypatch.setattr(dpne_module, "DPM_SENSITIVITY", declared)
        found = violations(paired_queries(monkeypatch, _dpm_run, pd.DataFrame(WORST_EDGES),
                                          joined))
        # real answers: the exact grid Laplace (issue 41.2)
        assert found == [f"dpM: Laplace on M (grid-laplace): moved 2.5 > declared {declared:.6g}"]


def test_fails_when_aim_declares_half_its_sensitivity(monkeypatch) -> None:
    """AIM's measurements charged at half their sensitivity (same σ, a quarter of the ρ on
    the ledger): the rarest-cell neighbour moves a measured marginal by 1 > 0.5."""
    import privfair.synth.aim as aim

    real = aim.gaussian_mechanism

    def halved(values, *, sensitivity, **kwargs):
        return real(values, sensitivity=sensitivity / 2, **kwargs)

    monkeypatch.setattr(aim, "gaussian_mechanism", halved)
    found = violations(paired_queries(monkeypatch, _table_method("aim"), D,
                                      NEIGHBOURS["row in the rarest cell"]))
    assert found and all("AIM" in v for v in found), found


def test_fails_when_marginals_declare_sensitivity_1(monkeypatch) -> None:
    """k marginals measured together declared at sensitivity 1 instead of √k: the one-way
    measurement of every attribute moves by √5 in L2 when a row is added."""
    import privfair.synth.measure as measure

    real = measure.gaussian_mechanism

    def unit(values, *, sensitivity, **kwargs):
        return real(values, sensitivity=1.0, **kwargs)

    monkeypatch.setattr(measure, "gaussian_mechanism", unit)
    found = violations(paired_queries(monkeypatch, _table_method("mst"), D,
                                      NEIGHBOURS["row in the rarest cell"]))
    assert any("moved 2.23607 > declared 1" in v for v in found), found
