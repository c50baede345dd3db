"""The GAN's DP-SGD curve over the noisy row counts (issue 41.3): per-order envelope of the
run's own curves, as the settle step (σ the run's ledger alone allows) and as the declared
curve's per-order limit (what fit_gan does now) choose σ, converted to (ε, δ).

Adaptive RDP composition bounds the run by the supremum, order by order, of its curve over
the counts the noise can draw; the settle step's envelope converts to more than the run's ε
(2.245 at α = 8 for dpgan at ε = 2, δ = 1e-6 over n̂ in [600, 400,000]), the declared
limit's to at most ε. Also prints σ by count under each rule (the price of the valid bound).

    nice -n 10 python benchmarks/gan_settle_envelope.py --counts 12
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> None:
    import numpy as np

    from privfair.core.accounting import LedgerEntry, PrivacyLedger, rdp_epsilon, zcdp_rho
    from privfair.generative.calibration import count_rho
    from privfair.generative.gan import dpsgd_calibration, dpsgd_charges
    from privfair.release.kinds.gan.stages import curve_limit, declared_curve, gan_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--method", default="dpgan")
    parser.add_argument("--low", type=float, default=600.0)
    parser.add_argument("--high", type=float, default=400_000.0)
    parser.add_argument("--counts", type=int, default=12, help="log-spaced counts in the range")
    args = parser.parse_args()

    rho = zcdp_rho(epsilon=args.epsilon, delta=args.delta)
    policies = 0.02 * rho  # privfair.release.policy_counts.POLICY_SHARE, no DP domains
    config = gan_config(args.method, group_clipping=False, epochs=None)
    book = PrivacyLedger(rho_budget=rho, delta=args.delta)
    book.spend(LedgerEntry("policies", "gaussian", 1.0, rho=policies))
    book.spend(LedgerEntry("GAN counts", "gaussian", 1.0,
                           rho=count_rho(book, config.marginal_share)))

    class Plan:  # what declared_curve reads off a release plan
        method, group_clipping, gan_epochs, delta = args.method, False, None, args.delta
        split = {"domains": 0.0, "policies": policies}
    Plan.rho = rho
    declared = np.asarray(declared_curve(Plan()))
    limit = curve_limit(declared)

    def own(rows: float, bound) -> tuple[float, np.ndarray]:
        sigma, rate, steps = dpsgd_calibration(book, config, rows=rows, limit=bound)
        trial = PrivacyLedger.from_state_dict({**book.state_dict(), "epsilon_budget": 1e12})
        for kwargs in dpsgd_charges(config, sample_rate=rate, steps=steps, sigma=sigma):
            trial.spend_subsampled_gaussian(**kwargs)
        return sigma, np.asarray(trial.rdp())

    counts = sorted({float(round(c)) for c in np.geomspace(args.low, args.high, args.counts)}
                    | {48842.0})
    start = time.perf_counter()
    rules = {"ledger_alone_settle": None, "declared_limit": limit}
    envelope = {name: np.zeros_like(declared) for name in rules}
    rows_out = []
    for rows in counts:
        row: dict[str, object] = {"n_hat": rows}
        for name, bound in rules.items():
            sigma, curve = own(rows, bound)
            envelope[name] = np.maximum(envelope[name], curve)
            eps, alpha = rdp_epsilon(rdp=curve, delta=args.delta)
            row[name] = {"sigma": round(sigma, 4), "epsilon": round(eps, 4), "order": alpha,
                         "dominated_by_declared": bool(limit(curve) <= 1 + 1e-9)}
        rows_out.append(row)
    result = {
        "method": args.method, "epsilon": args.epsilon, "delta": args.delta,
        "declared_epsilon": rdp_epsilon(rdp=declared, delta=args.delta)[0],
        "envelope": {name: dict(zip(("epsilon", "order"),
                                    rdp_epsilon(rdp=curve, delta=args.delta), strict=True))
                     for name, curve in envelope.items()},
        "by_count": rows_out, "seconds": round(time.perf_counter() - start, 1)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
