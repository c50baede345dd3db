"""The data-free check every kind's request shares, written once (issue 33.1).

A kind's ``check`` runs it in two calls around its own checks::

    path, contract = read_contract(params)          # contract file, parsed, a folder name
    ...                                             # the kind's checks of its contract
    request = check_request(params, path, contract) # data, its schema, store, folders
    return KindPlan(**request.plan_fields(method="kind:method"), ...)  # run id, ρ, ...

so each kind adds only its own fields and refusals. Everything here reads public facts only:
the contract, the data file's schema (column names, Parquet types; never a row), folders.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfair.contracts.encoding import check_dataset_schema, check_source_schema
from privfair.contracts.schema import Contract, load_contract
from privfair.core.errors import ContractError
from privfair.release.checks import (
    DATASET_NAME,
    check_folders,
    check_state_folder,
    check_store_writable,
    resolve_contract,
    resolve_data,
    resolved_folder,
)
from privfair.release.options import ReleaseOptions
from privfair.store.files import new_run_id, utc_now
from privfair.store.outputs import check_output


def read_contract(params: ReleaseOptions) -> tuple[Path, Contract]:
    """The request's contract file and the parsed contract; refuses a contract whose name
    cannot name the release folder."""
    path = resolve_contract(params)
    contract = load_contract(path)
    if not DATASET_NAME.fullmatch(contract.name):
        raise ContractError(
            f"contract {contract.name!r}: the name cannot name a release folder; "
            "expected letters, digits, '.', '_' or '-' (not starting with '.')")
    return path, contract


@dataclass(frozen=True)
class Request:
    """The checked public facts every kind's request holds."""

    params: ReleaseOptions
    contract_path: Path
    contract: Contract
    data_path: Path
    #: ``"file"``, ``"embedded"`` (the contract's dataset) or ``"dataset"`` (a Parquet folder).
    data_source: str
    store: Path

    def plan_fields(self, *, method: str) -> dict[str, Any]:
        """The fields of :class:`~privfair.release.protocol.RequestPlan`, with a fresh run id;
        ``method`` is the ledger's label of the run."""
        p = self.params
        return {
            "run_id": new_run_id(), "dataset": self.contract.name, "contract": self.contract,
            "contract_path": str(self.contract_path), "data_path": str(self.data_path),
            "data_source": self.data_source, "store": str(self.store),
            "work_dir": str(Path(p.work_dir).expanduser().resolve()), "method": method,
            "epsilon": p.epsilon, "delta": p.delta,
            "rho": p.budget.rho,
            "started_at": utc_now(), "seeded": p.seed is not None,
        }


def _path_inputs(params: ReleaseOptions) -> dict[str, str | Path | None]:
    """The kind's other options that name an existing file (``--coarsen``,
    ``--causal-graph``), by option: inputs the run's outputs must not overwrite."""
    found: dict[str, str | Path | None] = {}
    for name, value in params:
        if name in ("out", "work_dir", "data", "contract") or not isinstance(value, str):
            continue
        if value.strip() and Path(value).expanduser().is_file():
            found["--" + name.replace("_", "-")] = value
    return found


def check_request(params: ReleaseOptions, contract_path: Path, contract: Contract, *,
                  schema: Contract | None = None, dataset: bool = False) -> Request:
    """The data file (or the contract's embedded dataset; with ``dataset`` also a folder of
    Parquet files), its schema against ``schema`` (default: the contract; a kind that reads
    some columns only passes its view), then the store and the work folder."""
    data_path, source = resolve_data(params, contract, dataset=dataset)
    # The store and the work folder never overwrite an input, privfair's state, another
    # store or a release (issue 45.1), before anything is read.
    inputs: dict[str, str | Path | None] = {**_path_inputs(params), "--data": data_path,
                                             "--contract": contract_path}
    check_output(params.out, flag="--out", inputs=inputs, store=True)
    check_output(params.work_dir, flag="--work-dir", inputs=inputs)
    if source == "dataset":  # every file's footer and the folder names, never a row
        check_dataset_schema(data_path, contract)
    else:  # names, Parquet types: before the reservation
        check_source_schema(data_path, contract if schema is None else schema)
    store = resolved_folder(params.out, "--out")
    resolved_folder(params.work_dir, "--work-dir")  # names the file system cannot hold
    check_state_folder()
    check_store_writable(store)
    check_folders(out=params.out, store=store, contract=contract, work_dir=params.work_dir)
    return Request(params=params, contract_path=contract_path, contract=contract,
                   data_path=data_path, data_source=source, store=store)
