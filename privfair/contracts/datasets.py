"""Datasets and contracts shipped inside the package.

``privfair/data/<name>.parquet`` holds the raw public datasets (built by
``scripts/build_embedded_data.py``) and ``privfair/data/contracts/<name>.yaml`` byte copies of
the canonical contracts in the repository's top-level ``data_contracts/`` folder, so that an
installed package (which has no ``data_contracts/``) finds them too. A test keeps the copies
identical.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pandas as pd

if TYPE_CHECKING:
    from privfair.contracts.schema import Contract

__all__ = [
    "DATASETS",
    "PackagedContract",
    "contract_path",
    "dataset_path",
    "default_contract_path",
    "default_dataset_path",
    "embedded_dataset_for",
    "load_codes",
    "load_dataset",
    "resolve_contract_name",
]

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
CONTRACTS_DIR = DATA_DIR / "contracts"

#: Names of the embedded datasets; each has a parquet file and a contract.
DATASETS: tuple[str, ...] = ("adult", "compas", "example_graph")


def _check_name(name: str) -> None:
    if name not in DATASETS:
        raise ValueError(f"dataset {name!r} is not embedded; expected one of {list(DATASETS)}")


def dataset_path(name: str) -> Path:
    """Path of the embedded raw dataset ``name`` (``"adult"`` or ``"compas"``)."""
    _check_name(name)
    return DATA_DIR / f"{name}.parquet"


#: The packaged contracts by name (the stems of ``privfair/data/contracts/*.yaml``; a test
#: keeps the two equal). The Prefect form offers them as a choice beside a free path.
PackagedContract = Literal["adult", "adult_pse_dr", "adult_safes", "compas", "example_graph",
                           "example_open_domain"]


def resolve_contract_name(value: str) -> Path:
    """The contract file ``value`` names: a packaged contract's name (``"compas"``) or a path.

    A bare name (no folder, no ``.yaml``/``.yml`` suffix) that is no file here names a
    packaged contract; an unknown one is refused with the packaged names (``ValueError``).
    """
    path = Path(value).expanduser()
    bare = path.name == value and path.suffix.lower() not in (".yaml", ".yml")
    if bare and (value in typing.get_args(PackagedContract) or not path.exists()):
        return contract_path(value)
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:  # Python 3.11 raises RuntimeError for a loop
        raise ValueError(f"contract {value}: cannot be resolved (a symbolic link loop?): "
                         f"{exc}") from None


#: Contracts that are views of an embedded dataset, by contract name.
_VIEWS = {"adult_safes": "adult", "adult_pse_dr": "adult"}


def embedded_dataset_for(contract_name: str) -> Path | None:
    """The embedded raw data a packaged contract describes (``None`` if there is none)."""
    name = _VIEWS.get(contract_name, contract_name)
    return DATA_DIR / f"{name}.parquet" if name in DATASETS else None


def default_dataset_path() -> Path:
    """Path of the embedded UCI Adult data (train + test, 48,842 raw rows)."""
    return dataset_path("adult")


def contract_path(name: str) -> Path:
    """Path of the packaged contract for ``name`` (also ``"example_open_domain"``).

    The packaged copy is used, not ``data_contracts/``, so the answer is the same in a
    checkout and in an installed wheel; the two are kept byte-identical.
    """
    path = CONTRACTS_DIR / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in CONTRACTS_DIR.glob("*.yaml"))
        raise ValueError(f"contract {name!r} is not packaged; expected one of {known}")
    return path


def default_contract_path() -> Path:
    """Path of the packaged copy of ``data_contracts/adult.yaml``."""
    return contract_path("adult")


def load_dataset(name: str) -> pd.DataFrame:
    """Read the embedded raw dataset ``name`` into a DataFrame (raw values, not codes)."""
    return pd.read_parquet(dataset_path(name))


def load_codes(name: str) -> tuple[pd.DataFrame, Contract]:
    """A packaged contract's embedded data discretised by it: ``(codes, contract)``.

    For evaluation and benchmarks only: it reads the (embedded) private table directly.
    """
    from privfair.contracts.encoding import discretize
    from privfair.contracts.schema import load_contract

    contract = load_contract(contract_path(name))
    raw = embedded_dataset_for(contract.name)
    if raw is None:
        raise ValueError(f"contract {name!r} describes no embedded dataset")
    return pd.DataFrame(discretize(pd.read_parquet(raw), contract)), contract
