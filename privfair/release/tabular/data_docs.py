"""Kept validation records: the contract's GX suites and the output-side Data Docs.

Both live in the release store beside the contract's fingerprint::

    <store>/<dataset>/validation/<fingerprint[:16]>/
        <contract>-input.json        the generated input suite (from the contract only)
        <contract>-output.json       the generated output suite (row count left open)
        data-docs/<run_id>/index.html  Great Expectations Data Docs of one run's synthetic table

The suites are derived from the contract alone and the Data Docs describe the synthetic table
(DP output), so everything here is public. Input-side validation *results* are private and
never kept here (see :func:`privfair.release.ingest.validate_input`).

Both are opt-in (``data_docs`` of a release, ``--data-docs``): Great Expectations is imported
inside the functions (~4 s on a 2-core machine, about as long as the rest of a small release),
while the contract checks themselves always run, through the pandas pre-check of
:mod:`privfair.contracts.validation`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from privfair.contracts.schema import Contract
from privfair.store.files import FileRef, atomic_write, json_bytes

__all__ = ["save_suites", "validation_folder", "validation_records", "write_output_data_docs"]

#: Data Docs' tutorial animations (3.4 MB) that a release site never shows.
_UNUSED_STATIC = ("glossary_scroller.gif", "validation_failed_unexpected_values.gif",
                  "iterative-dev-loop.png")


def validation_folder(store: str | Path, dataset: str, fingerprint: str) -> Path:
    return Path(store) / dataset / "validation" / fingerprint[:16]


def _suite_dict(suite: Any) -> dict[str, Any]:
    """The suite as JSON without GX's random ids, so one contract gives one file."""
    raw: dict[str, Any] = suite.to_json_dict()
    raw.pop("id", None)
    for expectation in raw.get("expectations", []):
        expectation.pop("id", None)
    return raw


def save_suites(contract: Contract, folder: str | Path) -> dict[str, str]:
    """Write the input and output suites generated from ``contract``; their file names."""
    from privfair.contracts.validation import build_suite, gx_context

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ctx = gx_context()
    names = {}
    for side in ("input", "output"):
        suite = build_suite(contract, side=side, context=ctx)
        path = folder / f"{contract.name}-{side}.json"
        atomic_write(path, json_bytes(_suite_dict(suite)))
        names[side] = path.name
    return names


def write_output_data_docs(synthetic: pd.DataFrame, contract: Contract, folder: str | Path,
                           *, run_id: str, n_rows: int | None = None) -> Path:
    """Validate the synthetic table through a GX checkpoint and build its Data Docs site.

    Returns the site's ``index.html`` (``<folder>/data-docs/<run_id>/``).
    """
    import great_expectations as gx

    from privfair.contracts.validation import build_suite, gx_context

    site_dir = Path(folder) / "data-docs" / run_id
    ctx = gx_context()
    ctx.add_data_docs_site(site_name="privfair", site_config={
        "class_name": "SiteBuilder",
        "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                          "base_directory": str(site_dir)},
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
    })
    suite = ctx.suites.add(build_suite(contract, side="output", n_rows=n_rows, context=ctx))
    batch = (ctx.data_sources.add_pandas(f"{contract.name}-synthetic")
             .add_dataframe_asset("synthetic").add_batch_definition_whole_dataframe("table"))
    definition = ctx.validation_definitions.add(
        gx.ValidationDefinition(name=f"{contract.name}-output", data=batch, suite=suite))
    checkpoint = ctx.checkpoints.add(gx.Checkpoint(
        name=f"{contract.name}-release", validation_definitions=[definition],
        actions=[gx.checkpoint.UpdateDataDocsAction(name="data-docs", site_names=["privfair"])],
        result_format="SUMMARY"))
    checkpoint.run(batch_parameters={"dataframe": synthetic})
    for name in _UNUSED_STATIC:
        (site_dir / "static" / "images" / name).unlink(missing_ok=True)
    index = site_dir / "index.html"
    if not index.is_file():  # pragma: no cover - GX always writes it
        shutil.rmtree(site_dir, ignore_errors=True)
        raise RuntimeError("Great Expectations wrote no Data Docs index")
    return index


def validation_records(synthetic: FileRef, contract: Contract, *, store: str | Path,
                       fingerprint: str, run_id: str, n_rows: int | None) -> dict[str, Any]:
    """Keep the contract's GX suites and this run's output Data Docs beside the fingerprint.

    Returns ``{"suites": {side: path}, "data_docs": path}``, paths relative to a release
    folder of the dataset (public: suites come from the contract, Data Docs describe the
    synthetic table).
    """
    from privfair.release.tabular.post_noise import decode_codes, read_codes

    folder = validation_folder(store, contract.name, fingerprint)
    suites = save_suites(contract, folder)
    labelled = decode_codes(read_codes(synthetic), contract)
    index = write_output_data_docs(labelled, contract, folder, run_id=run_id, n_rows=n_rows)
    up = Path("..") / folder.relative_to(Path(store) / contract.name)
    return {"suites": {side: str(up / name) for side, name in suites.items()},
            "data_docs": str(up / index.relative_to(folder))}


def read_suite(path: str | Path) -> dict[str, Any]:
    suite: dict[str, Any] = json.loads(Path(path).read_text())
    return suite
