"""The Markdown model card of a model release (``model_card.md``), from its manifest only.

Every figure on it is public: the guarantee, the ledger, and held-out metrics that were
derived from DP counts (their ``privacy`` line says how); a manifest without metrics says
none were published.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privfair.core.accounting import zcdp_rho
from privfair.reporting.noisy import NOISY_BY_DESIGN, count_estimate, count_reading


def _num(value: Any, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def model_card(manifest: Mapping[str, Any]) -> str:
    """Markdown model card: guarantee, what the release costs and why, ε curve, ledger, DP
    held-out metrics per group with their noise, and a verdict consistent with them."""
    g = manifest["guarantee"]
    lines = [f"# Model card: {manifest['dataset']} {manifest['version']} ({manifest['model']})",
             "", f"Differential privacy: ({g['epsilon']:g}, {g['delta']:g})-DP; spent "
             f"epsilon = {g['spent']['epsilon']:.4g} at delta = {g['delta']:g} "
             f"({g['spent'].get('conversion', '')} conversion). Neighbours: "
             f"{g['spent']['neighbours']}.", ""]
    probe = manifest.get("prediction_probe") or {}
    if manifest.get("trivial"):
        which = probe.get("constant_class")
        lines += ["**Warning: this model is trivial (predicts one class): it predicts "
                  f"{repr(which) if which else 'the same class'} for every input"
                  + (f" (decided from the model itself: {probe['how']})" if probe.get("how")
                     else "") + "; it is not called fair whatever its figures say.**", ""]
    lines += cost_lines(manifest)
    if g.get("epsilon_curve"):
        lines += ["## Epsilon curve", "", "| delta | epsilon |", "|---|---|"]
        lines += [f"| {r['delta']:g} | {r['epsilon']:.4g} |" for r in g["epsilon_curve"]]
        lines.append("")
    lines += ["## Ledger", "", "| step | mechanism | epsilon | sigma | q | steps |",
              "|---|---|---|---|---|---|"]
    for e in manifest["ledger"]:
        lines.append(f"| {e['name']} | {e['mechanism']} | {_short(e.get('epsilon'))} | "
                     f"{_short(e.get('sigma'))} | {_short(e.get('sample_rate'))} | "
                     f"{e.get('steps') or ''} |")
    lines += metrics_lines(manifest)
    lines += policy_counts_lines((manifest.get("validation") or {}).get("input"))
    f = manifest["features"]
    lines += ["", "## Inputs", "", f"Outcome {f['outcome']!r} (1 = {f['positive']!r}); groups "
              f"from {f['group']!r} (not an input). Encoding: {f['encoding']}; "
              f"{len(f['names'])} inputs.", ""]
    return "\n".join(lines)


def _short(value: Any) -> str:
    return "" if value is None or value == "" else f"{float(value):.4g}"


def cost_lines(manifest: Mapping[str, Any]) -> list[str]:
    """What the release reserved of the dataset's lifetime, against a table release at the
    same (ε, δ), and why (issue 35.1): every figure public (the declared cost, the ledger's
    mechanisms and the lifetime budget)."""
    g, life = manifest["guarantee"], manifest.get("lifetime") or {}
    reserved = life.get("rho_reserved")
    if reserved is None or not life.get("epsilon_budget"):
        return []
    budget = zcdp_rho(epsilon=float(life["epsilon_budget"]),
                      delta=float(life["delta_budget"]))
    table = zcdp_rho(epsilon=float(g["epsilon"]), delta=float(g["delta"]))
    pure = [e for e in manifest.get("ledger", ()) if e.get("mechanism") == "laplace"
            and e.get("epsilon")]
    sgd = [e for e in manifest.get("ledger", ()) if e.get("steps")]
    lines = ["## What this release costs, and why", "",
             f"It reserved rho = {reserved:.4g} of the dataset's lifetime rho = {budget:.4g} "
             f"({100 * reserved / budget:.1f} %). A synthetic-table release at the same "
             f"(epsilon, delta) = ({g['epsilon']:g}, {g['delta']:g}) reserves rho = "
             f"{table:.4g} ({100 * table / budget:.1f} %).", ""]
    if pure:
        eps = sum(float(e["epsilon"]) for e in pure)
        lines += [f"Why: {', '.join(e['name'] for e in pure)} "
                  f"{'is' if len(pure) == 1 else 'are'} pure epsilon-DP (Laplace noise, "
                  f"epsilon = {eps:.4g} in all), which makes no use of delta. A table "
                  "release adds Gaussian noise, whose privacy loss is small at the delta "
                  "the release allows. The lifetime composes every release's Renyi curve and "
                  "reads it at its own delta, where a pure epsilon-DP mechanism weighs far "
                  "more than Gaussian noise of the same (epsilon, delta): this model spends "
                  "most of its share on the Laplace steps.", ""]
    elif sgd:
        lines += ["Why: DP-SGD's cost is the Renyi curve of many subsampled Gaussian steps "
                  "(its declared curve assumes the public lower bound on rows, min_rows). "
                  "That curve is not the straight line of a table release's rho; the "
                  "lifetime reads the sum of all curves at its own delta, and the reserved rho "
                  "is what this curve takes from that sum.", ""]
    return lines


def metrics_lines(manifest: Mapping[str, Any]) -> list[str]:
    """The held-out figures (ratios of noisy counts), with their noise and a verdict that
    agrees with them (issue 35.1)."""
    m = manifest.get("metrics")
    lines = ["", "## Held-out metrics", ""]
    if m is None:
        return [*lines, "None published (holdout = 0, or no held-out evaluation for this "
                "model)."]
    sigma = m.get("noise_sigma")
    unseen = m.get("within_noise_of_zero") or []
    if m.get("trivial") or manifest.get("trivial"):
        verdict = "not called fair: the model predicts one class"
    elif unseen:
        verdict = ("not called fair: the noisy counts cannot show that the model predicts "
                   f"the {' and '.join(unseen)} class on held-out rows")
    else:
        verdict = "fair" if m["fair"] else "not fair"
    lines += [f"**{m['privacy']}.**", ""]
    if sigma:
        lines += [f"Every figure below is a ratio of noisy counts: each cell of the confusion "
                  f"matrices carries Gaussian noise of sigma = {sigma:.3g} rows and is clipped "
                  "at 0, so a rate over n noisy rows moves by about "
                  f"+-{2 * sigma * 2 ** 0.5:.3g}/n (2 sigma), and a rate of exactly 0 or 1 "
                  "can come from a clipped cell.", ""]
    if m.get("trivial") or manifest.get("trivial"):
        lines += ["This model predicts one class for every input, so the held-out rows "
                  "predicted the other class are 0: their noisy counts hold noise only "
                  "(clipped at 0), and any rate below that is not exactly 0 or 1 differs from "
                  "it by that noise.", ""]
    elif unseen:
        probe = manifest.get("prediction_probe") or {}
        share = probe.get("positive_share")
        lines += [f"The noisy count of held-out rows predicted {' and '.join(unseen)} is "
                  f"within 2 sigma of 0 ({m.get('within_noise_floor', 0):.3g} rows): these "
                  "counts cannot tell whether the model ever predicts it there. On inputs "
                  "drawn from the contract's domain (a public probe, not the real rows) the "
                  "model predicts both classes ("
                  + (f"{100 * share:.1f} % of probe inputs positive; " if share is not None
                     else "") + f"{probe.get('how', 'checked from its weights')}).", ""]
    if m.get("beats_majority_beyond_noise") is False:
        lines += [f"Not shown better than always predicting the majority class: accuracy "
                  f"{_num(m['accuracy'])} against {_num(m['majority_baseline_accuracy'])} "
                  f"differs by less than the noise of the counts (2 sigma: +-"
                  f"{_num(m.get('accuracy_noise_margin'))}).", ""]
    lines += [f"Accuracy {_num(m['accuracy'])}; majority-class baseline "
              f"{_num(m['majority_baseline_accuracy'])}; positive-prediction rate "
              f"{_num(m['positive_prediction_rate'])}; risk difference "
              f"{_num(m['risk_difference'])} ({verdict}; fair if <= "
              f"{m['fair_threshold']}).", "",
              "| group | noisy rows | accuracy | positive-prediction rate | TPR |",
              "|---|---|---|---|---|"]
    for label, row in m["per_group"].items():
        lines.append(f"| {label} | {_num(row.get('noisy_rows'), 0)} | "
                     f"{_num(row['accuracy'])} | {_num(row['positive_prediction_rate'])} | "
                     f"{_num(row['true_positive_rate'])} |")
    return lines


def policy_counts_lines(record: Mapping[str, Any] | None) -> list[str]:
    """The contract's policies and the noisy counts of the rows they touched (issue 21.2),
    each as a count never below 0 with its noise and a reading (issue 35.4)."""
    if not record or record.get("touched_rows") is None:
        return []
    noise = record.get("noise", {})
    sigma = noise.get("sigma")
    lines = ["", "## Input policies", "",
             "Training never refuses or stops on a private value: values outside the declared "
             "domain and nulls get the column's policy. The rows each policy touched are "
             f"released as noisy counts ({noise.get('mechanism', 'gaussian')} noise, sigma = "
             f"{_num(sigma, 2)}, charged to this release's ledger). {NOISY_BY_DESIGN}", "",
             "| column | out_of_domain | nulls |", "|---|---|---|"]
    lines += [f"| {name} | {p.get('out_of_domain')} | {p.get('nulls')} |"
              for name, p in (record.get("policies") or {}).items()]
    lines += ["", f"| column | action | rows touched (noisy estimate, sigma = {_num(sigma, 2)})"
              " | reading |", "|---|---|---|---|"]
    lines += [f"| {r['column']} | {r['action']} | {count_estimate(r['noisy_count']):,} | "
              f"{count_reading(r['noisy_count'], sigma, cells=len(record['touched_rows']))} |"
              for r in record["touched_rows"]]
    return lines
