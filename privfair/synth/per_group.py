"""One marginal model per group of a protected column, under parallel composition.

DP noise is the same size in every cell, so a pooled model serves small groups worst; fitting
one model per group can improve both utility and parity ("Disparate Impact in Synthetic Data
Generation", 2026). :class:`PerGroupSynthesizer` does it for the marginal methods:

1. the group counts of ``column`` are measured once with the Gaussian mechanism (a small share
   of ρ, ``count_share``);
2. every group whose *noisy* count reaches the public ``min_group_rows`` gets its own model;
   the other groups share one "rest" model. Which groups are large is decided from the noisy
   counts only, so the partition is a post-processing of a charged release;
3. each part's :class:`~privfair.synth.synthesizer.FairSynthesizer` is fitted on the part's
   rows with the **whole** remaining ρ, on a ledger of its own;
4. samples are drawn per part in proportion to the noisy counts and concatenated.

Why step 3 is sound (parallel composition): the parts partition the rows by a function of the
record alone (its ``column`` code) and of the released noisy counts, so a record lies in
exactly one part. Adding or removing one record (privfair's neighbouring relation) changes the
input of one part's fit only; the other fits see identical data. The parts' releases together
are therefore ρ_model-zCDP, not G·ρ_model: the run costs ρ_count + max over parts of the ρ
each part spent, which is what the shared ledger is charged (one composition entry, beside
the parts' own ledgers in ``part_ledgers_``). (Under replace-one neighbours a record could
move between two parts, and the bound would be 2·ρ_model; privfair uses add/remove.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from privfair.core.accounting import LedgerEntry, PrivacyLedger, zcdp_rho
from privfair.core.domain import Domain, Roles
from privfair.core.mechanisms import gaussian_mechanism
from privfair.synth.synthesizer import FairSynthesizer

__all__ = ["GroupPart", "PerGroupSynthesizer", "PARALLEL_STEP"]

#: Name of the shared ledger's composition entry.
PARALLEL_STEP = "per-group models (parallel composition over disjoint groups)"


@dataclass(frozen=True)
class GroupPart:
    """One part of the partition: the codes of ``column`` it holds and their noisy rows."""

    name: str
    codes: tuple[int, ...]
    noisy_rows: float


class PerGroupSynthesizer:
    """One :class:`FairSynthesizer` per group of ``column`` whose noisy count supports it.

    Parameters
    ----------
    domain, roles : Domain, Roles
        As :class:`FairSynthesizer`.
    epsilon, delta : float
        The (ε, δ)-DP guarantee of the whole fit (counts and every part).
    column : str
        The protected column whose groups get their own model.
    method : str
        A marginal method of :class:`FairSynthesizer` (``"mst"``, ``"aim"``, ...).
    min_group_rows : float
        Public threshold: a group gets its own model when its noisy count reaches it; the
        others share one model.
    count_share : float
        Share of ρ spent on the noisy group counts, in (0, 1).
    options : mapping, optional
        Further keyword arguments of every part's :class:`FairSynthesizer`.

    Attributes
    ----------
    parts_ : tuple of GroupPart
    models_ : tuple of FairSynthesizer
    part_ledgers_ : tuple of PrivacyLedger
    ledger_ : PrivacyLedger
        The shared ledger: the count measurement and one parallel-composition entry.
    """

    def __init__(self, *, domain: Domain, roles: Roles, epsilon: float, delta: float,
                 column: str, method: str = "mst", min_group_rows: float = 200.0,
                 count_share: float = 0.05, options: Mapping[str, Any] | None = None) -> None:
        if column not in domain:
            raise ValueError(f"column: {column!r} is not in the declared domain")
        if column not in roles.protected:
            raise ValueError(f"column: {column!r} is not a protected column; expected one of "
                             f"{list(roles.protected)}")
        if not 0 < count_share < 1:
            raise ValueError(f"count_share must be in (0, 1), got {count_share!r}")
        if not (np.isfinite(min_group_rows) and min_group_rows >= 0):
            raise ValueError(f"min_group_rows must be a finite number >= 0, got "
                             f"{min_group_rows!r}")
        self.domain, self.roles, self.column, self.method = domain, roles, column, method
        self.epsilon, self.delta = epsilon, delta
        self.min_group_rows, self.count_share = float(min_group_rows), float(count_share)
        self.options = dict(options or {})
        # Fail on bad settings before any data is read.
        FairSynthesizer(domain=domain, roles=roles, epsilon=epsilon, delta=delta,
                        method=method, **self.options)

    @property
    def rho(self) -> float:
        """The whole fit's ρ (of ε, δ)."""
        return zcdp_rho(epsilon=self.epsilon, delta=self.delta)

    def fit(self, data: pd.DataFrame, *, rng: np.random.Generator,
            ledger: PrivacyLedger | None = None) -> PerGroupSynthesizer:
        """Measure the group counts, then fit one model per part on its rows (full ρ_model)."""
        rho = self.rho
        ledger = ledger or PrivacyLedger(rho_budget=rho, delta=self.delta)
        ledger.check(rho)  # the whole plan, before the first private read
        rho_count, rho_model = self.count_share * rho, (1 - self.count_share) * rho
        size = self.domain.size(self.column)
        values = data[self.column].to_numpy()
        exact = np.bincount(values, minlength=size)[:size]
        # One record changes one group's count by one: L2 sensitivity 1.
        noisy = gaussian_mechanism(exact, sigma=float(np.sqrt(1 / (2 * rho_count))),
                                   sensitivity=1.0, rng=rng, ledger=ledger,
                                   name=f"per-group counts ({self.column})")
        large = [c for c in range(size) if noisy[c] >= self.min_group_rows]
        rest = tuple(c for c in range(size) if c not in large)
        parts = [GroupPart(f"{self.column}={c}", (c,), float(max(noisy[c], 0.0)))
                 for c in large]
        if rest:
            parts.append(GroupPart(f"{self.column} in {list(rest)}", rest,
                                   float(max(noisy[list(rest)].sum(), 0.0))))
        # Parallel composition: the parts are disjoint (a record is in its own group's part
        # only), so the run costs one part's ρ. Charged before any part draws noise, at the
        # most a part's ledger lets it spend.
        ledger.spend(LedgerEntry(name=PARALLEL_STEP, mechanism="parallel-composition",
                                 sensitivity=1.0, rho=rho_model, queries=len(parts)))
        models, ledgers = [], []
        for part, part_rng in zip(parts, rng.spawn(len(parts)), strict=True):
            rows = data[np.isin(values, part.codes)].reset_index(drop=True)
            part_ledger = PrivacyLedger(rho_budget=rho_model, delta=self.delta)
            model = FairSynthesizer(domain=self.domain, roles=self.roles,
                                    epsilon=self.epsilon, delta=self.delta,
                                    method=self.method, **self.options)
            model.fit(rows, rng=part_rng, ledger=part_ledger, rho=rho_model)
            models.append(model)
            ledgers.append(part_ledger)
        self.parts_, self.models_ = tuple(parts), tuple(models)
        self.part_ledgers_, self.ledger_ = tuple(ledgers), ledger
        return self

    def sample(self, n_rows: int, *, rng: np.random.Generator) -> pd.DataFrame:
        """``n_rows`` rows, split over the parts in proportion to their noisy counts."""
        if not hasattr(self, "models_"):
            raise RuntimeError("call fit() before sample()")
        weights = np.array([p.noisy_rows for p in self.parts_], dtype=float)
        weights = weights / weights.sum() if weights.sum() > 0 else \
            np.full(len(weights), 1 / len(weights))
        counts = rng.multinomial(n_rows, weights)
        frames = []
        for part, model, count, part_rng in zip(self.parts_, self.models_, counts,
                                                rng.spawn(len(self.parts_)), strict=True):
            if count == 0:
                continue
            frame = model.sample(int(count), rng=part_rng)
            if len(part.codes) == 1:  # a one-group part: its column is that group
                frame[self.column] = part.codes[0]
            frames.append(frame)
        out = pd.concat(frames, ignore_index=True)
        return out.iloc[rng.permutation(len(out))].reset_index(drop=True)
