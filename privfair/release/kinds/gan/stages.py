"""GAN release stages (``--method dpgan | fairgan | fairgan-plus | cfgan``).

* :func:`check_gan_request` (public, in the gan kind's check): roles and the CFGAN causal
  graph, from a publisher's file, checked against the contract before any private read.
* :func:`declared_curve` and :func:`curve_limit` (public): the run declares, from public
  inputs only, the Rényi curve it reserves in the lifetime ledger (its DP domains, policy
  counts and (S, Y)/anchor counts at their shares, and DP-SGD on D1 at the Poisson rate of
  the public lower bound :data:`GAN_MIN_ROWS`); once the noisy row count fixes the rate, D1's
  σ is the smallest whose whole curve stays at or below the declared one at every order.
  The declared curve is what the run is charged, in the lifetime and in its guarantee.
* :func:`train_gan` (private side): the only stage that reads codes; it charges the release
  ledger for the (S, Y) counts and for DP-SGD on D1 before training, and returns the trained
  generator, a post-noise artefact.
* :func:`sample_gan` (post-noise): samples the synthetic codes and measures data fairness on
  them (RD(D), BER of a linear classifier predicting S), which is post-processing.

Why the declared curve bounds the run (issue 41.3). The run is two mechanisms: M₁ draws the
counts (a fixed curve a(α)), whose noisy row count n̂ picks D1's rate q(n̂) = b/n̂, its steps
T(n̂) and σ(n̂); then M₂(·; n̂) is DP-SGD at those, of curve b_n̂(α). For neighbours D, D′,
with p, p′ the densities of n̂ and L₂ the privacy loss of M₂(·; n̂),

    exp((α−1) D_α(M(D) ‖ M(D′))) = ∫ p(y)^α p′(y)^(1−α) E[exp((α−1) L₂) | n̂ = y] dy
                                  ≤ exp((α−1) (a(α) + sup_y b_y(α))),

so M is RDP with a(α) + sup_y b_y(α) at each order α: the supremum over every count the noise
can draw, order by order (Mironov 2017, Proposition 1, with the second mechanism chosen from
the first's output). D1's σ is calibrated so that a(α) + b_y(α) ≤ c(α), the declared curve,
at every α for whichever y was drawn; c is fixed from public inputs before any read, so
sup_y b_y(α) ≤ c(α) − a(α) and the run is c-RDP, which converts to at most the run's ε at
its δ (:func:`declared_curve` calibrates it so). The lifetime is charged c too
(:mod:`privfair.release.protocol`): the run's own curve a + b_n̂ is smaller but depends on
n̂, and admitting later runs against it would compose less than the run may cost.

The GAN small-n rule (issue 42.1) is one more choice of M₂ from n̂: when the noisy pairs
cannot carry signal at n̂, M₂ is a Gaussian measurement of every one-way marginal, its ρ the
largest whose curve ρα keeps a + ρα at or below c at every order (and the run's ledger
accepts), so the same bound holds whichever branch n̂ picked.

What is not a proof, and was coded until issue 41.3: once n̂ fixed q, take the σ the run's
ledger alone allows, i.e. the smallest whose own curve a + b_n̂ converts to at most ε at *its*
best order, and settle the reservation to that curve. Each such curve converts to ε, but
the supremum over the counts does not: at ε = 2, δ = 1e-6 (dpgan's defaults) the curves at
n̂ = 600 and n̂ = 400,000 convert to 2.0 each (best orders 12 and 8), their per-order maximum
to 2.245 at α = 8. The price of the valid bound is noise: the declared curve (q = 1/2 at
the public lower bound of rows) binds at the high orders, and σ at n̂ = 48,842 is 10.36
(own curve 0.54 of ε = 2) where the ledger alone would take 1.24
(``benchmarks/gan_settle_envelope.py``). A declared curve shaped for larger tables would
buy that back; it must still be fixed before the count is drawn.

Torch is imported only when a GAN stage runs.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from privfair.contracts.schema import Contract
from privfair.core.domain import Domain
from privfair.core.errors import ReleaseInputError, RoleError
from privfair.generative import GAN_METHODS
from privfair.generative.calibration import (
    count_rho,
    noise_multiplier_on_ledger,
    subsampled_gaussian_epsilon,
)
from privfair.release.ingest import code_batches
from privfair.release.seeds import stage_rng
from privfair.store.artefacts import load_ledger, save_ledger
from privfair.store.files import FileRef, write_artefact

if TYPE_CHECKING:
    from privfair.generative.gan import GANConfig

__all__ = ["GAN_METHODS", "GAN_MIN_ROWS", "MIN_PARITY_ROWS", "PARITY_THRESHOLD",
           "check_gan_request", "constrained_attributes", "curve_limit", "data_fairness",
           "declared_curve", "independence_instead", "load_causal_graph", "small_n_line", "parity_check", "parity_excess", "sample_gan", "train_gan"]

#: |RD(D)| at or below this counts as statistical parity of the released table (Xu ch. 6).
PARITY_THRESHOLD = 0.05
#: A protected group with fewer released rows than this is too small to judge: its positive
#: rate is mostly sampling noise (native-country's groups of a handful of rows read |RD| 0.5
#: on the Adult contract); it is reported, not compared (issue 42.2).
MIN_PARITY_ROWS = 50
#: Standard errors of a difference of two groups' rates in the released table allowed beside
#: PARITY_THRESHOLD: a gap within it is sampling error of the release, not disparity.
PARITY_SAMPLING_ERRORS = 2.0


def parity_excess(fairness: Mapping[str, Any]) -> float:
    """How far the judged groups' largest gap exceeds its sampling allowance (≤ 0 within
    it): |RD| − allowance, compared with :data:`PARITY_THRESHOLD` (nan if nothing to judge)."""
    return abs(float(fairness["rd"])) - float(fairness.get("parity_allowance", 0.0))
#: The public lower bound on the training rows that a GAN's declared curve assumes (as a
#: model release's ``min_rows``): fewer rows give a larger Poisson rate and more noise, never
#: a larger charge.
GAN_MIN_ROWS = 1000


def load_causal_graph(path: str | Path) -> dict[str, Any]:
    """Read a causal graph declaration (YAML or JSON: nodes, edges, undirected)."""
    from privfair.generative.dag import CausalGraphError

    file = Path(path).expanduser()
    if not file.is_file():
        raise CausalGraphError(f"causal graph file {file} does not exist")
    try:
        raw = yaml.safe_load(file.read_text())
    except yaml.YAMLError as exc:
        raise CausalGraphError(f"causal graph file {file} is not YAML/JSON: "
                               f"{str(exc).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise CausalGraphError(f"causal graph file {file}: expected a mapping with nodes and "
                               "edges")
    return raw


def _roles(contract: Contract, method: str) -> tuple[str, str]:
    """The protected attribute the generator is conditioned on (the first constrained one)
    and the outcome."""
    roles = contract.roles()
    if not roles.protected or not roles.outcome:
        raise RoleError(f"method {method!r} needs a protected and an outcome attribute in the "
                        "contract's roles")
    return _constrained(contract, method)[0], roles.outcome[0]


def _constrained(contract: Contract, method: str) -> tuple[str, ...]:
    """Every protected attribute the fairness terms constrain: the contract's
    ``fairness.protected``, by default all of ``roles.protected``. CFGAN intervenes on binary
    attributes only, so by default it constrains the binary ones (the manifest states the
    parity of the others); a ``fairness.protected`` it cannot constrain is refused."""
    from privfair.contracts.tot_settings import constrained_protected

    constrained = constrained_protected(contract)[0]
    if method == "cfgan" and (contract.fairness is None or contract.fairness.protected is None):
        domain = contract.domain()
        binary = tuple(a for a in constrained if domain.size(a) == 2)
        return binary or constrained
    return constrained


def constrained_attributes(contract: Contract, method: str) -> tuple[str, ...]:
    """The protected attributes a GAN method's fairness terms constrain (public)."""
    return _constrained(contract, method)


def check_gan_request(contract: Contract, domain: Domain, method: str,
                      causal_graph: Mapping[str, Any] | None, *,
                      release_classifier: bool = False) -> dict[str, Any] | None:
    """Public checks of a GAN release; returns the checked causal graph (CFGAN) or None."""
    from privfair.generative.dag import CausalGraphError, parse_dag

    protected, outcome = _roles(contract, method)
    if release_classifier:
        if method != "fairgan-plus":
            raise ReleaseInputError(f"release_classifier: only method 'fairgan-plus' trains a "
                                    f"classifier, got method {method!r}")
        _classifier_encoding(contract, protected, outcome)
    if method != "cfgan":
        return None
    if causal_graph is None:
        raise CausalGraphError("method 'cfgan' needs a causal graph: a causal_graph section in "
                               "the contract or --causal-graph, a YAML/JSON file with the DAG "
                               "over the contract's attributes")
    constrained = _constrained(contract, method)
    for attribute in constrained:
        if domain.size(attribute) != 2:
            raise CausalGraphError(
                f"method 'cfgan': protected attribute {attribute!r} must be binary, it has "
                f"{domain.size(attribute)} categories (CFGAN constrains every attribute of "
                f"contract key fairness.protected, by default roles.protected)")
    dag = parse_dag(causal_graph, domain, protected=constrained, outcome=(outcome,))
    return dag.to_dict()


def gan_config(method: str, *, group_clipping: bool, epochs: int | None,
               constrained: tuple[str, ...] = ()) -> GANConfig:
    """The GAN's training configuration (public: the run's parameters); ``constrained``: the
    protected attributes its fairness terms constrain (the contract's)."""
    from privfair.generative.gan import GANConfig

    config = GANConfig(method=method, group_clipping=group_clipping, constrained=constrained)
    # without epochs the config's own default stands
    return config if epochs is None else dataclasses.replace(config, epochs=epochs)


def declared_curve(plan: Any) -> tuple[float, ...]:
    """The Rényi curve a GAN run reserves, from its public plan (see the module docstring)."""
    return _declared_curve(rho=float(plan.rho), delta=float(plan.delta),
                           domains=float(plan.split.get("domains", 0.0)),
                           policies=float(plan.split.get("policies", 0.0)),
                           method=plan.method, group_clipping=bool(plan.group_clipping),
                           epochs=plan.gan_epochs)


@functools.lru_cache(maxsize=32)  # --resume and the Prefect path plan a run again
def _declared_curve(*, rho: float, delta: float, domains: float, policies: float, method: str,
                    group_clipping: bool, epochs: int | None) -> tuple[float, ...]:
    from privfair.core.accounting import LedgerEntry, PrivacyLedger
    from privfair.generative.gan import dpsgd_charges, dpsgd_schedule

    config = gan_config(method, group_clipping=group_clipping, epochs=epochs)
    book = PrivacyLedger(rho_budget=rho, delta=delta)
    if policies > 0:
        book.spend(LedgerEntry("policies", "gaussian", 1.0, rho=policies))
    # The counts take a share of what is left after the policies: the most they can cost
    # whatever the DP domains spend (fit_gan sizes them on the run's ledger).
    counts = count_rho(book, config.marginal_share)
    if domains > 0:
        book.spend(LedgerEntry("domains", "gaussian", 1.0, rho=domains))
    book.spend(LedgerEntry("GAN counts", "gaussian", 1.0, rho=counts))
    rate, steps = dpsgd_schedule(config, rows=GAN_MIN_ROWS)

    def charges(sigma: float) -> list[dict[str, Any]]:
        return dpsgd_charges(config, sample_rate=rate, steps=steps, sigma=sigma)

    for kwargs in charges(noise_multiplier_on_ledger(book, charges=charges)):
        book.spend_subsampled_gaussian(**kwargs)
    return tuple(float(v) for v in book.rdp())


def small_n_line(plan: Any) -> str:
    """The GAN's small-n rule as the plan and ``--dry-run`` state it (issue 42.1): from the
    public domain, roles, method and ρ, the row count below which the run publishes the
    independence model instead of training, and, with the contract's ``expected_rows`` (a
    stated guess), which of the two it will be."""
    from privfair.core.accounting import LedgerEntry, PrivacyLedger, gaussian_sigma
    from privfair.generative.calibration import GAN_NOISE_TVD_LIMIT, anchor_pairs

    contract = plan.contract
    if contract.unresolved_columns:
        return ("GAN small-n rule: domains are published by a DP step, so whether the GAN "
                "trains or the release is the independence model is decided then")
    domain = contract.domain()
    protected, outcome = _roles(contract, plan.method)
    config = gan_config(plan.method, group_clipping=bool(plan.group_clipping),
                        epochs=plan.gan_epochs)
    pairs = anchor_pairs(domain, protected, outcome, plan.method)
    measured = tuple(dict.fromkeys([(protected, outcome), *pairs]))
    book = PrivacyLedger(rho_budget=float(plan.rho), delta=float(plan.delta))
    for name in ("policies", "domains"):
        if float(plan.split.get(name, 0.0)) > 0:
            book.spend(LedgerEntry(name, "gaussian", 1.0, rho=float(plan.split[name])))
    sigma = gaussian_sigma(rho=count_rho(book, config.marginal_share) / len(measured),
                           sensitivity=1.0)
    cells = float(np.mean([domain.size(a) * domain.size(b) for a, b in measured]))
    rows = sigma * float(np.sqrt(2 / np.pi)) * cells / (2 * GAN_NOISE_TVD_LIMIT)
    line = (f"GAN small-n rule: the GAN trains only where its noisy pair marginals carry "
            f"signal (expected noise TVD <= {GAN_NOISE_TVD_LIMIT:g} a pair, at the noisy row "
            f"count); at this ε that needs about {int(np.ceil(rows)):,} rows; below, no GAN "
            "is trained: the rest of the budget measures every one-way marginal and the "
            "release is the independence model")
    expected = getattr(contract, "expected_rows", None)
    if expected is not None:
        line += (f". At expected_rows = {int(expected):,} this release will be "
                 + ("the independence model" if expected < rows else "a trained GAN"))
    return line


def curve_limit(declared: Any) -> Callable[[np.ndarray], float]:
    """``curve ↦`` the largest ratio, over the orders, of ``curve`` to the ``declared`` one:
    ≤ 1 when the run stays at or below what it reserved at every order."""
    bound = np.asarray(declared, dtype=float)

    def limit(curve: np.ndarray) -> float:
        curve = np.asarray(curve, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(bound > 0, curve / bound, np.where(curve > 0, np.inf, 0.0))
        return float(np.max(ratio))

    return limit


def _classifier_encoding(contract: Contract, protected: str, outcome: str) -> Any:
    """The model-release encoding of η's inputs: every column but S and Y, one-hot."""
    from privfair.contracts.model_features import FeatureEncoding

    encoding = FeatureEncoding.from_contract(contract, outcome=outcome, group=protected)
    if encoding.excluded:
        raise ReleaseInputError(
            f"release_classifier: columns {list(encoding.excluded)} have no domain in the "
            "contract alone (text or dp_bins), so η cannot be released as a model")
    if contract.domain().size(outcome) != 2:
        raise ReleaseInputError(f"release_classifier: outcome {outcome!r} must be binary")
    return encoding


def classifier_record(fitted: Any, contract: Contract) -> dict[str, Any]:
    """FairGAN+'s η as a model release's weights and encoding (post-processing: η saw only
    generated rows, or real ones inside D1's charged DP-SGD step under ``classifier_rows=
    "real_and_generated"``).

    η is linear on the one-hot blocks of every attribute but S and Y, in domain order, with
    two outputs; its positive-class logit is ``(w₁ − w₀)·x + (b₁ − b₀)``, which is the
    ``coef`` layout (features, then the intercept) that ``privfair predict`` reads.
    """
    encoding = _classifier_encoding(contract, fitted.protected, fitted.outcome)
    state = fitted.classifier_state
    weight, bias = np.asarray(state["0.weight"]), np.asarray(state["0.bias"])
    coef = np.concatenate([weight[1] - weight[0], [bias[1] - bias[0]]]).astype(float)
    if coef.size != encoding.dimension:  # pragma: no cover - same contract, same order
        raise ValueError("release_classifier: η's inputs do not match the contract encoding")
    return {"coef": coef.tolist(), "features": encoding.to_dict()
            | {"names": list(encoding.feature_names)},
            "model": ("fairgan-plus η (linear, trained on generated rows only)"
                      if fitted.config.classifier_rows == "generated" else
                      "fairgan-plus η (linear, trained on generated rows and, through "
                      "DP-SGD, real rows)"),
            "classifier_fairness": fitted.config.classifier_fairness}


def _read_codes(codes: FileRef, domain: Domain, batch_size: int) -> dict[str, np.ndarray]:
    parts: dict[str, list[np.ndarray]] = {a: [] for a in domain}
    for batch in code_batches(codes, batch_size=batch_size):
        for a in domain:
            parts[a].append(batch[a])
    return {a: np.concatenate(v) if v else np.zeros(0, dtype=np.int64)
            for a, v in parts.items()}


def train_gan(codes: FileRef, contract: Contract, ledger: FileRef, artefacts: str | Path, *,
              method: str, causal_graph: Mapping[str, Any] | None, epochs: int | None,
              group_clipping: bool, seed: int | None, batch_size: int = 200_000,
              discrete: bool = True, progress: Callable[[int, int], None] | None = None,
              limit: Callable[[np.ndarray], float] | None = None) -> tuple[FileRef, FileRef]:
    """Train the GAN's D1 with DP-SGD on the codes; returns (generator artefact, ledger).

    ``limit`` (:func:`curve_limit` of the declared curve) bounds the run's whole Rényi curve
    at every order besides the run's ledger: D1's σ is the smallest that both accept."""
    from privfair.generative.gan import fit_gan

    domain = contract.domain()
    protected, outcome = _roles(contract, method)
    config = gan_config(method, group_clipping=group_clipping, epochs=epochs,
                        constrained=_constrained(contract, method) if method != "dpgan"
                        else ())
    dag = None
    if causal_graph is not None and method == "cfgan":
        # Re-declare the oriented edges as undirected so the artefact keeps saying which
        # orientations came from the public constraints.
        oriented = [list(e) for e in causal_graph.get("oriented_from_undirected", [])]
        dag = {"nodes": causal_graph["nodes"],
               "edges": [e for e in causal_graph["edges"] if list(e) not in oriented],
               "undirected": oriented}
    book = load_ledger(ledger)
    fitted = fit_gan(_read_codes(codes, domain, batch_size), domain, protected=protected,
                     outcome=outcome, ledger=book, rng=stage_rng(seed, "gan"), config=config,
                     dag=dag, discrete_noise=discrete, limit=limit, small_n_rule=True,
                     progress=(lambda e, n, info: progress(e, n)) if progress else None)
    if causal_graph is not None and method == "cfgan":
        fitted.privacy["causal_graph_source"] = causal_graph.get("source", "declared")
    return (write_artefact(artefacts, "gan-generator", fitted.to_bytes(), "npz"),
            save_ledger(book, artefacts))


def data_fairness(codes: Mapping[str, np.ndarray], domain: Domain, *, protected: str,
                  outcome: str, rng: np.random.Generator) -> dict[str, Any]:
    """RD(D) and the BER of a linear classifier predicting S from X (Xu §6.4.2).

    RD(D) = P(Y = last code | S = last code) − P(Y = last code | S = first code) for binary
    S (signed, as in ch. 6), the largest gap between groups otherwise. BER is 1 − balanced
    accuracy of a logistic regression on one-hot X (every attribute but S and Y), fitted on
    70% of the table and scored on the rest; 0.5 is the fairest value.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score

    s = np.asarray(codes[protected])
    positive = np.asarray(codes[outcome]) == domain.size(outcome) - 1
    sizes = np.bincount(s, minlength=domain.size(protected))
    rates = [float(positive[s == k].mean()) if sizes[k] else float("nan")
             for k in range(domain.size(protected))]
    # only groups with enough released rows are judged (MIN_PARITY_ROWS); the gap of the two
    # groups farthest apart is allowed the sampling error of their difference
    judged = [k for k in range(len(rates)) if sizes[k] >= MIN_PARITY_ROWS]
    rd, allowance = float("nan"), 0.0
    if len(judged) >= 2:
        low = min(judged, key=lambda k: rates[k])
        high = max(judged, key=lambda k: rates[k])
        rd = (rates[judged[-1]] - rates[judged[0]] if len(judged) == 2 and len(rates) == 2
              else rates[high] - rates[low])
        pooled = float(positive[np.isin(s, [low, high])].mean())
        allowance = PARITY_SAMPLING_ERRORS * float(np.sqrt(
            pooled * (1 - pooled) * (1 / sizes[low] + 1 / sizes[high])))
    features = [a for a in domain if a not in (protected, outcome)]
    n = len(s)
    x = np.zeros((n, sum(domain.size(a) for a in features)), dtype=np.float32)
    start = 0
    for a in features:
        x[np.arange(n), start + np.asarray(codes[a])] = 1.0
        start += domain.size(a)
    order = rng.permutation(n)
    cut = int(0.7 * n)
    train, test = order[:cut], order[cut:]
    ber = float("nan")
    # Balanced accuracy needs both sides of the split to hold two groups (a rare group of
    # one protected attribute may fall wholly on one side): BER is undefined otherwise.
    if len(np.unique(s[train])) > 1 and len(np.unique(s[test])) > 1:
        clf = LogisticRegression(max_iter=500).fit(x[train], s[train])
        ber = 1.0 - float(balanced_accuracy_score(s[test], clf.predict(x[test])))
    return {"rd": rd, "positive_rate_by_group": rates, "ber": ber,
            "ber_classifier": "logistic regression on one-hot X, 70/30 split of the release",
            "groups_judged": len(judged), "groups_too_small": int(np.count_nonzero(
                (sizes > 0) & (sizes < MIN_PARITY_ROWS))),
            "parity_allowance": allowance}


def _causal_effects(fitted: Any, codes: Mapping[str, np.ndarray],
                    rng: np.random.Generator) -> dict[str, Any]:
    """TE and the path-specific effect CFGAN targets, estimated on the released table."""
    from privfair.generative.effects import causal_effect

    dag, config = fitted.dag, fitted.config
    kwargs = {"protected": fitted.protected, "outcome": fitted.outcome, "rng": rng}
    out: dict[str, Any] = {
        "estimator": "truncated factorisation on the DAG, CPTs counted from the released "
                     "table, ancestral sampling",
        "total_effect": causal_effect(codes, fitted.domain, dag, **kwargs)}
    if config.effect == "se":
        paths = dag.path_edges(fitted.protected, fitted.outcome,
                               through=config.redlining or None)
        out["path_specific_effect"] = causal_effect(codes, fitted.domain, dag, paths=paths,
                                                    **kwargs)
        out["paths"] = sorted([list(e) for e in paths])
    return out


def parity_check(codes: Mapping[str, np.ndarray], domain: Domain, *, protected: str,
                 outcome: str, checked: tuple[str, ...], reported: tuple[str, ...],
                 constrained: tuple[str, ...], rng: np.random.Generator,
                 measured_on: str) -> dict[str, Any]:
    """The release's one fairness verdict: statistical parity of ``codes`` (the rows to be
    published) for every ``checked`` protected attribute (the contract's
    ``fairness.protected``, by default every protected role), whichever the method
    constrains (``constrained``; dpgan constrains none, and says so). ``reported``
    attributes are measured and shown, not judged. Post-processing of DP output."""
    fairness = data_fairness(codes, domain, protected=protected, outcome=outcome, rng=rng)
    attributes = list(dict.fromkeys([protected, *checked, *reported]))
    fairness["per_protected"] = {
        a: {**data_fairness(codes, domain, protected=a, outcome=outcome, rng=rng),
            "constrained": a in constrained, "checked": a in checked}
        for a in attributes}
    judged = {a: p for a, p in fairness["per_protected"].items() if p["checked"]}
    violations = [
        {"protected": a, "outcome": outcome, "rd": p["rd"],
         "allowance": p.get("parity_allowance", 0.0),
         "why": f"|RD(D)| = {abs(float(p['rd'])):.3f} is above {PARITY_THRESHOLD} plus its "
                f"sampling allowance {float(p.get('parity_allowance', 0.0)):.3f}"}
        for a, p in judged.items()
        if np.isfinite(p["rd"]) and parity_excess(p) > PARITY_THRESHOLD]
    # fewer than two groups large enough to judge: no evidence either way, stated, not failed
    unjudged = [a for a, p in judged.items() if not np.isfinite(p["rd"])]
    return {
        "passed": not violations,
        "criterion": (f"statistical parity of the released table, |RD(D)| <= "
                      f"{PARITY_THRESHOLD} plus {PARITY_SAMPLING_ERRORS:g} standard errors "
                      "of the two groups' rates, over the groups with at least "
                      f"{MIN_PARITY_ROWS} released rows (an attribute with fewer than two "
                      "such groups is not judged), for each protected attribute of the "
                      f"contract's fairness.protected ({', '.join(checked)}; measured on "
                      f"{measured_on}; post-processing)"),
        "violations": violations,
        "not_judged": unjudged,
        "data_fairness": fairness,
        "protected": protected, "outcome": outcome,
        "checked": list(checked),
        "constrained": list(constrained),
        "measured_on": measured_on,
    }


def _write_codes(codes: Mapping[str, np.ndarray], domain: Domain,
                 artefacts: str | Path) -> FileRef:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # pyarrow-stubs 20 rejects numpy columns; pyarrow takes them
    table = pa.table({a: np.asarray(codes[a]).astype(np.int64)  # type: ignore[misc]
                      for a in domain})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    return write_artefact(artefacts, "synthetic-codes", buffer.getvalue(), "parquet")


def independence_instead(generative: Mapping[str, Any], contract: Contract,
                         artefacts: str | Path, *, n_rows: int, seed: int | None
                         ) -> tuple[FileRef, dict[str, Any]] | None:
    """A fair GAN whose table fails the parity its method promises publishes the
    independence model of the run's own noisy marginals instead (issue 42.2): outcome and
    protected attributes drawn apart, so parity holds up to sampling, stated in the record.
    None when the run kept no noisy one-way marginals (nothing of its own to fall back on).
    Post-processing of DP output: the same draw as the candidate the comparison scored."""
    from privfair.release.kinds.gan.independence import independence_sample, scores

    versus = dict(generative.get("versus_independence") or {})
    if not versus.get("noisy_one_way"):
        return None
    domain = contract.domain()
    one_way = {a: np.asarray(versus["noisy_one_way"][a], dtype=float) for a in domain}
    codes = independence_sample(one_way, n_rows, rng=stage_rng(seed, "independence"))
    failed = generative["fairness_check"]
    check = parity_check(
        codes, domain, protected=failed["protected"], outcome=failed["outcome"],
        checked=tuple(failed["checked"]),
        reported=tuple(failed["data_fairness"]["per_protected"]),
        constrained=tuple(failed["constrained"]), rng=stage_rng(seed, "independence"),
        measured_on="the independence model's rows, published because the GAN's table "
                    "failed this check")
    check["gan_table"] = {"passed": False, "violations": failed["violations"]}
    shift = scores(codes, domain, {}, one_way)["per_attribute"]
    versus.update(published="independence", marginal_shift=shift,
                  why=("the GAN's table failed the parity its method promises ("
                       + "; ".join(f"{v['protected']}: {v['why']}" for v in failed["violations"])
                       + "); the independence model of the run's noisy marginals draws the "
                       "outcome apart from the protected attributes"))
    return _write_codes(codes, domain, artefacts), {
        **generative, "fairness_check": check, "versus_independence": versus}


def sample_gan(generator: FileRef, contract: Contract, artefacts: str | Path, *,
               n_rows: int | None, delta: float, seed: int | None,
               release_classifier: bool = False) -> tuple[FileRef, dict[str, Any]]:
    """Sample synthetic codes from the trained generator (post-processing), and publish the
    better of them and the independence model of the run's own noisy marginals
    (:mod:`privfair.release.kinds.gan.independence`).

    Returns the codes artefact and the manifest record: DP-SGD parameters, the accountant's
    ε for them alone, the DAG (CFGAN), the comparison with independence and the
    data-fairness measures of the released table.
    """
    from privfair.contracts.tot_settings import constrained_protected
    from privfair.generative.gan import FittedGAN, fair_attributes
    from privfair.release.kinds.gan.independence import compare_with_independence

    fitted = FittedGAN.load(generator.open_checked())
    if fitted.non_private:  # a public fact of the artefact, checked before any row is drawn
        raise ReleaseInputError(
            "generator: this GAN was trained by fit_gan_non_private (no differential "
            "privacy; evaluation only) and cannot be released")
    domain = fitted.domain
    n = fitted.expected_rows if n_rows is None else int(n_rows)
    rng = stage_rng(seed, "sample")
    small_n = fitted.privacy.get("small_n")
    if fitted.independence is not None:  # the small-n rule chose independence; stated
        rule: dict[str, Any] = fitted.privacy["small_n"]
        codes = fitted.sample(n, rng=rng)
        versus = {"compared": False, "published": "independence", "small_n": rule,
                  "reason": (f"GAN small-n rule: the run's noisy pair marginals would carry an "
                             f"expected noise TVD of {rule['pair_noise_tvd']:.3f} per pair "
                             f"at its noisy row count (limit {rule['limit']:g}); no GAN "
                             "was trained and the rest of the budget measured every one-way "
                             "marginal")}
    else:
        codes, versus = compare_with_independence(
            fitted.sample(n, rng=rng), domain, anchors=fitted.anchors,
            marginals=fitted.marginals, rng=stage_rng(seed, "independence"))
        versus["small_n"] = small_n
    ref = _write_codes(codes, domain, artefacts)
    # dpgan has no fairness term: it constrains nothing, its check is shown, not claimed
    constrained = (() if fitted.config.method == "dpgan"
                   else fair_attributes(fitted.config, fitted.protected))
    check = parity_check(
        codes, domain, protected=fitted.protected, outcome=fitted.outcome,
        checked=tuple(constrained_protected(contract)[0]),
        reported=tuple(contract.roles().protected), constrained=tuple(constrained), rng=rng,
        measured_on=("the GAN's synthetic rows" if versus["published"] == "gan" else
                     "the independence model's rows, published instead of the GAN's"))
    dp: dict[str, Any] | None = None
    if fitted.privacy.get("dp_sgd") is not None:
        dp = dict(fitted.privacy["dp_sgd"])
        dp["epsilon_dp_sgd_alone"] = subsampled_gaussian_epsilon(
            noise_multiplier=dp["noise_multiplier"], sample_rate=dp["sample_rate"],
            steps=dp["steps"], delta=delta)
        dp["epsilon_dp_sgd_alone_delta"] = delta
    if fitted.dag is not None and fitted.independence is None:
        check["data_fairness"]["causal_effects"] = _causal_effects(fitted, codes, rng)
    edges = fitted.dag.to_dict()["edges"] if fitted.dag else []
    record = {
        "method": {"gan": fitted.config.to_dict(), "dp_sgd": dp,
                   "marginals": fitted.privacy["marginals"],
                   "training_history": fitted.history,
                   "estimated_total": float(fitted.expected_rows)},
        "structure": {"method": fitted.config.method, "edges": edges,
                      "causal_graph": ({**fitted.dag.to_dict(), "source": fitted.privacy.get(
                                        "causal_graph_source", "declared by the publisher"),
                                        "cost_budget": False}
                                       if fitted.dag else None)},
        "versus_independence": versus,
        "fairness_check": check,
    }
    if release_classifier and fitted.classifier_state is not None:
        record["classifier"] = classifier_record(fitted, contract)
    return ref, json.loads(json.dumps(record, default=float))
