"""Post-noise stages: estimation, sampling, the fairness transform and output validation.

Everything here is post-processing of DP measurements; nothing reads private data.
"""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privfair.contracts.schema import Contract
from privfair.core.errors import FairnessViolationError
from privfair.release.seeds import stage_rng
from privfair.release.tabular.plan import OutputValidationError
from privfair.store.artefacts import load_measurements, load_model, load_one_way, save_model
from privfair.store.files import (
    CODES_PARQUET,
    FileRef,
    atomic_write,
    json_bytes,
    private_dir,
    write_artefact,
)
from privfair.synth.synthesizer import (
    fit_model,
    generate_columns,
)

log = logging.getLogger(__name__)


# --- post-noise side ------------------------------------------------------------------------


def estimate(one_way: FileRef, selected: FileRef, artefacts: str | Path, *,
             max_iters: int = 10_000, tol: float = 1e-6,
             callback: Callable[[int, float], None] | None = None,
             warm_start: FileRef | None = None,
             max_time_s: float | None = None) -> FileRef:
    """Fit the graphical model to the noisy measurements (post-processing only).

    ``warm_start`` is AIM's last round's model, the answer if the fit (from the one-way
    model) ends unconverged at a higher loss (see :func:`~privfair.synth.synthesizer.fit_model`);
    ``max_time_s`` caps the fit (see :func:`privfair.synth.estimation.estimate`).
    """
    last = load_model(warm_start).potentials if warm_start is not None else None
    model = fit_model(load_one_way(one_way), load_measurements(selected), tol=tol,
                      max_iters=max_iters, callback=callback, fallback=last,
                      max_time_s=max_time_s)
    return save_model(model, artefacts)


def sample(model: FileRef, one_way: FileRef, artefacts: str | Path, *, n_rows: int | None,
           mode: str = "iid", seed: int | None = None) -> FileRef:
    """Draw synthetic codes (post-processing); ``n_rows`` defaults to the noisy total."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fitted = load_model(model)
    compression = load_one_way(one_way).compression
    n = round(fitted.total) if n_rows is None else int(n_rows)
    # Narrow codes (mostly one byte a cell): the stages after this only decode them. The
    # numpy columns go to Arrow without a copy (no pandas frame in between).
    # pyarrow-stubs 20 rejects numpy columns; pyarrow takes them without a copy
    table = pa.table(generate_columns(fitted, compression, n,  # type: ignore[arg-type]
                                      rng=stage_rng(seed, "sample"), mode=mode))
    buffer = io.BytesIO()
    pq.write_table(table, buffer, **CODES_PARQUET)
    return write_artefact(artefacts, "synthetic-codes", buffer.getvalue(), "parquet")


def fairness_transform(synthetic: FileRef, contract: Contract, artefacts: str | Path, *,
                       transform: str, eta: float | None = None,
                       discrimination: str = "additive",
                       distortion: str = "safes-adult", seed: int | None = None,
                       kept: Path | None = None, reuse_kept: bool = False
                       ) -> tuple[FileRef, dict[str, Any]]:
    """Optional fairness transform of the synthetic table (post-processing, no privacy cost).

    ``"tot"`` fits Calmon et al.'s optimised pre-processing on the synthetic codes — D the
    contract's protected attributes (``fairness.protected``), Y its outcome, X the contract's
    ``tot.features`` (every other attribute when the contract has no ``tot`` block) — and
    applies it to them. Returns the (possibly new) synthetic codes and the manifest record.

    ``kept`` (:func:`tot_input_path`): where an infeasible TOT keeps the table it was fitted
    on, so that ``--resume RUN --eta`` at the smallest feasible η its message names fits the
    same table (``reuse_kept``; a fresh sample would have another smallest η).
    """
    if transform == "none":
        return synthetic, {"name": "none", "applied": False}
    if transform != "tot":
        raise ValueError(f"fairness_transform must be 'none' or 'tot', got {transform!r}")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privfair.contracts.tot_settings import tot_setting
    from privfair.fair.tot import InfeasibleFairnessError, ProblemTooLargeError, TOTransform

    setting = tot_setting(contract, distortion=distortion, discrimination=discrimination,
                          eta=eta)
    if setting.eta is None:  # pragma: no cover - the plan's preflight_tot refuses it
        raise ValueError(f"fairness_transform 'tot' needs eta ({setting.key('eta')})")
    domain = contract.domain()
    tot = TOTransform(d_cols=list(setting.protected), x_cols=list(setting.features),
                      y_col=setting.outcome, domain=domain, eta=setting.eta,
                      discrimination=setting.discrimination, distortion=setting.distortion,
                      clist=setting.clist, dlist=setting.dlist,
                      max_variables=setting.max_variables,
                      distortion_scope=setting.distortion_scope, groups=setting.groups)
    reused = reuse_kept and kept is not None and kept.is_file()
    if reused and kept is not None:
        synthetic = FileRef.of(kept)
    codes = read_codes(synthetic).astype(np.int64)  # TOT builds keys from the codes
    try:
        fitted = tot.fit(codes)
    except InfeasibleFairnessError:
        if kept is not None and not reused:
            private_dir(kept.parent)
            atomic_write(kept, synthetic.read_checked())
            os.chmod(kept, 0o600)
        raise
    except ProblemTooLargeError as exc:
        raise ProblemTooLargeError(
            f"TOT: {exc.n_variables:,} variables, above max_variables="
            f"{setting.max_variables:,}; {setting.size_fix()}",
            n_variables=exc.n_variables, dense_variables=exc.dense_variables,
            max_variables=exc.max_variables) from None
    moved = fitted.transform(codes, rng=stage_rng(seed, "tot"))
    # pyarrow-stubs 20 rejects numpy columns; pyarrow takes them
    table = pa.table({a: moved[a].to_numpy().astype(np.int64)  # type: ignore[misc]
                      for a in domain})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, **CODES_PARQUET)
    ref = write_artefact(artefacts, "synthetic-codes", buffer.getvalue(), "parquet")
    record = {"name": "tot", "applied": True, "post_processing": True,
              "additional_privacy_cost": 0.0, **tot.to_manifest()}
    record["fairness_check"] = check_tot_discrimination(record)
    if reused:
        record["fitted_on"] = ("the synthetic table the run's infeasible TOT was fitted on, "
                               "kept for --resume (its smallest feasible eta was named there)")
    public: dict[str, Any] = json.loads(json_bytes(record))
    return ref, public


def tot_input_path(work_dir: str | Path, run_id: str) -> Path:
    """Where a run's infeasible TOT keeps its synthetic table: beside its checkpoint."""
    from privfair.release.checkpoint import checkpoint_path

    path = checkpoint_path(work_dir, run_id)
    return path.with_name(f"{run_id}.tot-input.parquet")


#: Slack for solver round-off when re-checking TOT's discrimination bound.
_TOT_CHECK_TOL = 1e-6


def check_tot_discrimination(record: dict[str, Any]) -> dict[str, Any]:
    """Re-check the fitted TOT map's discrimination against η; refuse a map that misses it.

    The map's outcome-given-group table is what was built, so the guarantee is checked on
    it rather than assumed from the solver's status.
    """
    params, achieved = record["parameters"], record["achieved_discrimination"]
    form, eta = params["discrimination"], float(params["eta"])
    key = "max_additive_gap" if form == "additive" else "max_ratio_gap"
    gap = float(achieved[key])
    check = {
        "passed": gap <= eta + _TOT_CHECK_TOL,
        "criterion": ("max over outcomes of |q(y|g) - q(y|g')| <= eta" if form == "additive"
                      else "max over outcomes of q(y|g) / q(y|g') - 1 <= eta"),
        "eta": eta, "achieved": gap, "before_transform": float(achieved[f"input_{key}"]),
    }
    if not check["passed"]:
        raise FairnessViolationError(
            f"fairness transform 'tot': the fitted map's {form} discrimination {gap:.4g} "
            f"exceeds eta={eta:g}; nothing is published")
    return check


def read_codes(ref: FileRef) -> pd.DataFrame:
    """Synthetic codes as stored: narrow unsigned columns (widen before arithmetic)."""
    import pyarrow.parquet as pq

    return pq.read_table(ref.open_checked()).to_pandas()


def decode_codes(codes: pd.DataFrame, contract: Contract) -> pd.DataFrame:
    """Synthetic codes -> declared labels."""
    from privfair.contracts import encoding as disc

    return disc.decode(codes, contract)


#: The synthetic table :func:`validate_output` decoded last, by the content hash of its codes
#: and the contract's fingerprint: publication in the same process takes it
#: (:func:`decoded_synthetic`) instead of reading and decoding the same file again. One
#: entry, post-noise data only.
_DECODED: dict[tuple[str, str], pd.DataFrame] = {}


def decoded_synthetic(synthetic: FileRef, contract: Contract) -> pd.DataFrame:
    """The decoded synthetic table of ``synthetic`` (codes read and checked against their
    hash), or the one validation decoded from the same content, which it hands over."""
    labelled = _DECODED.pop((synthetic.sha256, contract.fingerprint()), None)
    return decode_codes(read_codes(synthetic), contract) if labelled is None else labelled


def validate_output(synthetic: FileRef, contract: Contract,
                    *, n_rows: int | None = None) -> dict[str, Any]:
    """GX checks of the decoded synthetic table (public, so the summary can be detailed)."""
    from privfair.contracts.validation import validate_frames

    _DECODED.clear()
    labelled = decode_codes(read_codes(synthetic), contract)
    outcome = validate_frames([labelled], contract, side="output", n_rows=n_rows)
    if not outcome.passed:
        raise OutputValidationError(
            f"synthetic table breaks contract {contract.name!r}: {outcome.problem_line()}")
    # only a table that will be published is kept for publication
    _DECODED[(synthetic.sha256, contract.fingerprint())] = labelled
    return outcome.public_summary()
