"""The Markdown model card of a model release (``model_card.md``), from its manifest only.

Every figure on it is public: the guarantee, the ledger, and held-out metrics that were
derived from DP counts (their ``privacy`` line says how); a manifest without metrics says
none were published.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privfair.reporting.noisy import NOISY_BY_DESIGN, count_estimate, count_reading


def _num(value: Any, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def model_card(manifest: Mapping[str, Any]) -> str:
    """Markdown model card: guarantee, ε curve, ledger, DP held-out metrics per group."""
    g = manifest["guarantee"]
    lines = [f"# Model card: {manifest['dataset']} {manifest['version']} ({manifest['model']})",
             "", f"Differential privacy: ({g['epsilon']:g}, {g['delta']:g})-DP; spent "
             f"epsilon = {g['spent']['epsilon']:.4g} at delta = {g['delta']:g} "
             f"({g['spent'].get('conversion', '')} conversion). Neighbours: "
             f"{g['spent']['neighbours']}.", ""]
    if manifest.get("trivial"):
        lines += ["**Warning: this model is trivial (predicts one class); it is not called "
                  "fair whatever its figures say.**", ""]
    if g.get("epsilon_curve"):
        lines += ["## Epsilon curve", "", "| delta | epsilon |", "|---|---|"]
        lines += [f"| {r['delta']:g} | {r['epsilon']:.4g} |" for r in g["epsilon_curve"]]
        lines.append("")
    lines += ["## Ledger", "", "| step | mechanism | epsilon | sigma | q | steps |",
              "|---|---|---|---|---|---|"]
    for e in manifest["ledger"]:
        lines.append(f"| {e['name']} | {e['mechanism']} | {e.get('epsilon') or ''} | "
                     f"{e.get('sigma') or ''} | {e.get('sample_rate') or ''} | "
                     f"{e.get('steps') or ''} |")
    m = manifest.get("metrics")
    lines += ["", "## Held-out metrics", ""]
    if m is None:
        lines.append("None published (holdout = 0, or no held-out evaluation for this "
                     "model).")
    else:
        fair = ("not fair: " + "trivial (predicts one class)" if m.get("trivial")
                else "fair" if m["fair"] else "not fair")
        lines += [f"**{m['privacy']}.**", "",
                  f"Accuracy {_num(m['accuracy'])}; majority-class baseline "
                  f"{_num(m['majority_baseline_accuracy'])}; positive-prediction rate "
                  f"{_num(m['positive_prediction_rate'])}; risk difference "
                  f"{_num(m['risk_difference'])} ({fair}; fair if <= "
                  f"{m['fair_threshold']}).", "",
                  "| group | accuracy | positive-prediction rate | TPR |", "|---|---|---|---|"]
        for label, row in m["per_group"].items():
            lines.append(f"| {label} | {_num(row['accuracy'])} | "
                         f"{_num(row['positive_prediction_rate'])} | "
                         f"{_num(row['true_positive_rate'])} |")
    lines += policy_counts_lines((manifest.get("validation") or {}).get("input"))
    f = manifest["features"]
    lines += ["", "## Inputs", "", f"Outcome {f['outcome']!r} (1 = {f['positive']!r}); groups "
              f"from {f['group']!r} (not an input). Encoding: {f['encoding']}; "
              f"{len(f['names'])} inputs.", ""]
    return "\n".join(lines)


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
              f"{count_reading(r['noisy_count'], sigma)} |" for r in record["touched_rows"]]
    return lines
