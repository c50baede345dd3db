"""Public side of a release: parameters, the checked plan, and its data-free check.

Everything here runs before any private read. :func:`check` refuses bad input and an
exhausted lifetime budget with one line and parses the contract once; later stages receive
the parsed, frozen :class:`~privfair.contracts.schema.Contract` through the plan.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from dataclasses import fields as dataclass_fields
from typing import Any, Literal

from pydantic import Field, field_validator

from privfair.contracts.fields import Delta, Eta
from privfair.contracts.schema import Contract
from privfair.core.errors import ContractError, PrivfairError, ReleaseInputError
from privfair.generative import GAN_METHODS
from privfair.release.checks import DATASET_NAME, check_eta_with_tot, check_memory
from privfair.release.options import PRIVATE_FIELD, ReleaseOptions
from privfair.release.policy_counts import POLICY_SHARE
from privfair.release.protocol import RequestPlan
from privfair.release.request import check_request, read_contract
from privfair.release.tabular.dask_engine import check_dask_address
from privfair.synth.structure import qualification_limit
from privfair.synth.synthesizer import (
    AIM_METHODS,
    FAIR_METHODS,
    INDEPENDENT,
    METHODS,
    BudgetSplit,
    pair_qualification,
)

log = logging.getLogger(__name__)

#: AIM's time budget when none is given: a default that always ends (issue 23.2), well above
#: what AIM takes on Adult and COMPAS (so their releases are unchanged) and leaving a minute
#: of a 5-minute run for reading, estimation, sampling and publication on wide tables.
DEFAULT_AIM_TIME_S = 240.0

#: The release methods the table pipeline offers (the Prefect form renders them as a choice).
Method = Literal["mst", "prefair-greedy", "prefair-exact", "aim", "aim-fair", "independent",
                 "dpgan", "fairgan", "fairgan-plus", "cfgan"]


# --- errors ---------------------------------------------------------------------------------


class InputValidationError(ReleaseInputError):
    """The input breaks its contract; the message names columns and checks, never values.

    No release raises it any more (issue 21.2: values get the contract's policies); kept for
    callers that catch it."""


class OutputValidationError(PrivfairError):
    """The synthetic table breaks the contract; nothing is published."""


# --- parameters -----------------------------------------------------------------------------


class ReleaseParams(ReleaseOptions):
    """Everything a table or GAN release needs; the Prefect form is generated from it.

    The shared fields (contract, data, ε, δ, store, seed) and their checks come from
    :class:`~privfair.release.options.ReleaseOptions`.
    """

    data: str | None = Field(
        None, description="Private table: a CSV or Parquet file, or a folder of Parquet files "
        "(a dataset; hive partitions such as state=CA/ are columns), read file by file, on the "
        "Dask workers with engine 'dask'. Empty: the contract's embedded data.")
    delta: Delta = Field(1e-9, json_schema_extra={"cli_required": True},
                         description=ReleaseOptions.model_fields["delta"].description)
    method: Method = Field("prefair-greedy", description="Structure selector, or a DP GAN.")
    n_rows: int | None = Field(
        None, ge=1, description="Synthetic rows. Empty: the noisy estimated total.")
    sample_mode: Literal["iid", "round"] = Field("iid", description="Sampling mode.")
    discrete_noise: bool = Field(
        True, description="Exact discrete Gaussian noise: always on (issue 41.2); the flag is "
        "kept so that older commands still run.")
    fairness_transform: Literal["none", "tot"] = Field(
        "none", json_schema_extra={"cli": "--fairness"}, description="Post-processing fairness transform of the synthetic table: 'tot' "
                            "is Calmon et al.'s optimised pre-processing (SAFES); no privacy "
                            "cost.")
    eta: Eta | None = Field(
        None, description="TOT discrimination bound η in [0, 1] (required with "
                          "fairness_transform='tot').")
    discrimination: Literal["additive", "ratio"] = Field(
        "additive", description="TOT discrimination control: |q(ŷ|g)−q(ŷ|g')| ≤ η or the "
                                "ratio form q(ŷ|g) ≤ (1+η)·q(ŷ|g').")
    distortion: str = Field(
        "safes-adult", description="TOT distortion function (registered name).")
    batch_size: int = Field(200_000, ge=1, le=10**9, json_schema_extra=PRIVATE_FIELD,
                            description="Rows per streamed batch.")
    max_iters: int = Field(10_000, ge=1, json_schema_extra=PRIVATE_FIELD,
                           description="Estimation iteration cap.")
    engine: Literal["local", "dask"] = Field(
        "local", description="Where the measurement stages count: in this process, or per "
        "row group on a Dask cluster (summed here; noise drawn once, here).")
    dask_address: str | None = Field(
        None, description="engine 'dask': scheduler address (default: a LocalCluster).")
    output: Literal["file", "partitioned"] = Field(
        "file", description="The synthetic table as one file (synthetic.parquet), or as a "
        "partitioned Parquet dataset (synthetic/part-*.parquet) sampled part by part, on the "
        "Dask cluster with engine 'dask', each part with its own generator spawned from the "
        "run's (post-processing: no privacy cost). Marginal methods, iid sampling, no TOT.")
    part_rows: int = Field(
        1_000_000, ge=1, description="output 'partitioned': synthetic rows per part file.")
    data_docs: bool = Field(
        False, description="Also keep the contract's Great Expectations suites and Data Docs "
        "of the synthetic table in the store (imports GX: ~4 s). The contract checks run "
        "either way.")
    max_time_s: float | None = Field(
        None, gt=0, json_schema_extra={"cli": "--max-time"},
        description=f"AIM methods: time budget in seconds (empty: {DEFAULT_AIM_TIME_S:g}), an "
        "alarm: a run past it logs a warning; it never changes the rounds, the noise or "
        "the release (issue 41.5).")
    causal_graph: str | None = Field(
        None, description="cfgan: YAML/JSON file declaring the causal DAG over the contract's "
                          "attributes (nodes, edges; undirected edges oriented by the roles).")
    gan_epochs: int | None = Field(
        None, ge=1, description="GAN methods: training epochs. Empty: the shipped default.")
    group_clipping: bool = Field(
        False, description="GAN methods: DPSGD-F per-group clipping bounds for D1.")
    release_classifier: bool = Field(
        False, description="fairgan-plus: also release the co-trained fair classifier η as a "
        "model (classifier/ in the release folder; `privfair predict` reads it).")
    allow_unfair: bool = Field(
        False, description="Publish a fair method's table even when it fails its own fairness "
        "check (recorded in the manifest); without it such a run publishes nothing.")

    @field_validator("discrete_noise")
    @classmethod
    def _exact_noise_only(cls, value: bool) -> bool:
        # Floating-point noise has a side channel (Mironov 2012): no release publishes it.
        if not value:
            raise ValueError("discrete_noise: floating-point noise is no longer offered; every "
                             "release draws exact discrete noise (issue 41.2)")
        return value

    def idle_fields(self) -> dict[str, str]:
        gan = self.method in GAN_METHODS
        return {
            name: need for name, need, used in (
                ("distortion", "--fairness tot", self.fairness_transform == "tot"),
                ("discrimination", "--fairness tot", self.fairness_transform == "tot"),
                ("dask_address", "--engine dask", self.engine == "dask"),
                ("part_rows", "--output partitioned", self.output == "partitioned"),
                ("max_time_s", f"an AIM method ({', '.join(AIM_METHODS)})",
                 self.method in AIM_METHODS),
                ("gan_epochs", "a GAN method", gan),
                ("group_clipping", "a GAN method", gan),
                ("causal_graph", "method cfgan", self.method == "cfgan"),
                ("max_iters", "a marginal method (not a GAN)", not gan),
                ("sample_mode", "a marginal method (not a GAN)", not gan),
                ("allow_unfair", "method fairgan or fairgan-plus (the methods that check "
                 "their own fairness)", self.method in ("fairgan", "fairgan-plus")),
            ) if not used}


#: Share of a release's ρ spent on publishing domains (CatHist categories of open-domain
#: columns, DP quantile edges of ``dp_bins`` columns) when the contract has such columns.
DOMAIN_SHARE = 0.1


def open_columns(contract: Contract) -> list[str]:
    return [c.name for c in contract.columns if c.type == "text"]


def check_contract_shape(contract: Contract, *, fair: bool) -> Any:
    """The contract's data-free checks of a table release (``contract check`` runs them too);
    returns the domain's shape (open-domain and DP-binned columns without categories yet)."""
    _check_open_domains(contract)
    if not DATASET_NAME.fullmatch(contract.name):
        raise ContractError(
            f"contract {contract.name!r}: the name cannot name a release folder; "
            "expected letters, digits, '.', '_' or '-' (not starting with '.')")
    # Open-domain and dp_bins columns get their domains from DP later; only names matter here.
    shape = contract.with_released_categories({c: [] for c in open_columns(contract)})
    # the contract requires finite lower and upper with dp_bins
    shape = shape.with_released_bins({c.name: [c.lower, c.upper] for c in shape.columns
                                      if c.dp_bins is not None
                                      and c.lower is not None and c.upper is not None})
    domain = shape.domain()
    contract.roles().check(domain, fair=fair)
    return domain


def _check_open_domains(contract: Contract) -> None:
    """Open-domain columns need an "other" bucket for the values CatHist does not release."""
    for name in open_columns(contract):
        if contract.column(name).open_bucket() is None:
            raise ContractError(
                f"contract {contract.name!r}: open-domain column {name!r} needs "
                "out_of_domain: \"other:<label>\" for the values CatHist does not release")
        spec = contract.column(name).open_domain
        if spec is None or spec.universe is None:
            # CatHist draws outside values from the declared universe; a bare size cannot be
            # sampled, and drawing from anything else breaks its privacy guarantee.
            raise ContractError(
                f"contract {contract.name!r}: open-domain column {name!r} needs "
                "open_domain.universe: {values: [...]} or {words: {alphabet, max_length}}")


# --- plan and check -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ReleasePlan(RequestPlan):
    """The public, checked settings of one run; never holds the seed or private values."""

    contract_fingerprint: str
    contract_version: str
    declared_contract_fingerprint: str
    split: dict[str, float]
    n_rows: int | None
    sample_mode: str
    discrete_noise: bool
    fairness_transform: str
    eta: float | None
    discrimination: str
    distortion: str
    batch_size: int
    max_iters: int
    #: AIM methods: time budget (seconds) of the rounds.
    max_time_s: float | None = None
    #: Keep GX suites and output Data Docs in the store (opt-in: GX costs ~4 s to import).
    data_docs: bool = False
    #: Counting engine of the measurement stages ("local" or "dask") and the Dask scheduler.
    engine: str = "local"
    dask_address: str | None = None
    #: The synthetic table as one file, or as a partitioned dataset of ``part_rows`` parts.
    output: str = "file"
    part_rows: int = 1_000_000
    #: GAN methods: the checked causal DAG (cfgan), epochs, DPSGD-F clipping.
    causal_graph: dict[str, Any] | None = None
    gan_epochs: int | None = None
    group_clipping: bool = False
    release_classifier: bool = False
    #: Publish a fair method's table that fails its own fairness check (recorded).
    allow_unfair: bool = False


def small_n_line(plan: ReleasePlan) -> str | None:
    """The per-pair small-n rule as the plan and ``--dry-run`` state it (issue 34).

    Public inputs only: the declared domain, the roles, ρ and, when the contract declares
    ``expected_rows``, how many candidate pairs would qualify at that row count. A release
    decides the same way on its noisy total. None for methods without 2-way marginals.
    """
    if plan.method in GAN_METHODS or plan.method == INDEPENDENT:
        return None
    contract = plan.contract
    rho = plan.rho - plan.split["domains"] - plan.split["policies"]
    limit = qualification_limit(plan.method, rho=rho)
    rule = (f"small-n rule: a pair's 2-way marginal is measured only where noise alone "
            f"would put an expected TVD <= {limit:.3g} on it; the "
            f"structure is a forest over the pairs that qualify (independence when none "
            f"does)")
    if contract.unresolved_columns:
        return rule + "; domains are published by a DP step, so pairs are decided then"
    domain = contract.domain()
    if len(domain) < 2:
        return None
    # The row count from which each pair qualifies: the rule is monotone in the total.
    full = pair_qualification(1e18, domain, contract.roles(), method=plan.method, rho=rho)
    needed = sorted(full.pair_sigma * math.sqrt(2 / math.pi) * domain.size(a) * domain.size(b)
                    / (2 * full.limit) for a, b in full.kept)
    if needed:
        rule += (f"; at this ε a pair qualifies from about {math.ceil(needed[0]):,} rows "
                 f"(smallest pair) and all {len(needed)} from {math.ceil(needed[-1]):,}")
    if contract.expected_rows is not None:
        at = pair_qualification(float(contract.expected_rows), domain, contract.roles(),
                                method=plan.method, rho=rho)
        rule += (f"; at expected_rows = {contract.expected_rows:,}: {len(at.kept)} of "
                 f"{at.candidates} candidate pairs qualify, a forest of {at.forest_edges} of "
                 f"{len(domain) - 1} edges" + (" (independence)" if at.fallback else ""))
        if at.fallback:
            rule += (f". In words: at about {contract.expected_rows:,} rows this release will "
                     "be the independence model (each column on its own, no pair measured)"
                     + (f"; the first pair needs about {math.ceil(needed[0]):,} rows at this "
                        "ε, or a larger ε" if needed else ""))
    else:
        rule += ("; declare expected_rows: in the contract (a public guess) to be told "
                 "whether this release will be the independence model")
    return rule


def check(params: ReleaseParams | Mapping[str, Any], *,
          method_check: Callable[..., Mapping[str, Any]] | None = None) -> ReleasePlan:
    """Check everything that can be checked without reading private data.

    Refuses (one-line error, nothing written): invalid parameters, a bad contract, a missing
    data file or one whose schema does not fit the contract (column names; Parquet types:
    :func:`~privfair.contracts.encoding.check_source_schema`, public facts read before the
    reservation), an unwritable store, and a release that would exceed the dataset's lifetime
    budget. Nothing after the reservation refuses on a value (issue 21.2).

    ``method_check(params, contract, domain)``: the kind's own data-free checks of its
    method, run once the contract's shape is checked; returns extra fields of the plan (the
    gan kind's checked causal graph).
    """
    params = params if isinstance(params, ReleaseParams) else ReleaseParams.model_validate(
        params)
    contract_path, contract = read_contract(params)
    if params.method not in METHODS + GAN_METHODS:  # pragma: no cover - the Literal refuses it
        raise ValueError(f"method must be one of {list(METHODS)}, got {params.method!r}")
    domain = check_contract_shape(contract, fair=params.method in FAIR_METHODS)
    roles = contract.roles()
    # the kind's own checks of its method (the gan kind's roles and causal graph)
    extra = dict(method_check(params, contract, domain)) if method_check is not None else {}
    if params.release_classifier and params.method not in GAN_METHODS:
        raise ReleaseInputError(f"release_classifier: only method 'fairgan-plus' trains a "
                                f"classifier, got method {params.method!r}")
    if params.output == "partitioned":
        refused = ("a GAN method" if params.method in GAN_METHODS
                   else "sample_mode 'round'" if params.sample_mode == "round"
                   else "fairness_transform 'tot'" if params.fairness_transform == "tot"
                   else "data_docs" if params.data_docs else None)
        if refused:
            raise ReleaseInputError(f"output 'partitioned' samples part by part; {refused} "
                                    "needs the whole table (output 'file')")
    if params.fairness_transform == "tot":
        from privfair.contracts.tot_settings import preflight_tot, tot_setting

        if not roles.protected or not roles.outcome:
            raise ReleaseInputError("fairness_transform 'tot' needs protected and outcome "
                                    "attributes in the contract's roles")
        try:  # columns, distortion and program size, from the declared domain alone
            preflight_tot(contract, tot_setting(contract, distortion=params.distortion,
                                                discrimination=params.discrimination,
                                                eta=params.eta))
        except ValueError as exc:
            raise ReleaseInputError(str(exc)) from None
    request = check_request(params, contract_path, contract, dataset=True)
    if request.data_source == "dataset" and params.method in GAN_METHODS:
        raise ReleaseInputError(f"data folder {request.data_path}: a Parquet dataset needs a "
                                f"marginal method, not {params.method!r}")
    check_eta_with_tot(eta=params.eta, fairness_transform=params.fairness_transform)
    n_rows = params.n_rows
    if n_rows is not None and params.output == "partitioned":
        n_rows = min(n_rows, params.part_rows)  # one part in memory at a time (per worker)
    check_memory(domain, n_rows=n_rows)
    if params.engine == "dask":  # scheme, TLS, a 2-s connect: before the reservation

        check_dask_address(params.dask_address)
    fields = request.plan_fields(method=params.method)
    rho = fields["rho"]
    domains_rho = DOMAIN_SHARE * rho if contract.unresolved_columns else 0.0
    # The noisy counts of rows the contract's policies touched (issue 21.2): a fixed public
    # share, inside the declared cost.
    policies_rho = POLICY_SHARE * rho
    rest = rho - domains_rho - policies_rho
    split = ({"domains": domains_rho, "policies": policies_rho, "gan": rest}
             if params.method in GAN_METHODS
             else {"domains": domains_rho, "policies": policies_rho,
                   **asdict(BudgetSplit.for_method(params.method, rest))})
    decided = {
        **fields, "contract_fingerprint": contract.fingerprint(),
        "contract_version": contract.version,
        "declared_contract_fingerprint": contract.fingerprint(), "split": split,
        "max_time_s": (params.max_time_s if params.max_time_s is not None or params.method
                       not in AIM_METHODS else DEFAULT_AIM_TIME_S),
        **extra,
    }
    # Every other plan field is the parameter of the same name, as given: copied by name,
    # so a new parameter cannot be left out of the plan by hand.
    given = {f.name: getattr(params, f.name) for f in dataclass_fields(ReleasePlan)
             if f.name in type(params).model_fields and f.name not in decided}
    return ReleasePlan(**decided, **given)
