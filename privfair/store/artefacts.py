"""Post-noise artefacts of the table kinds: the ledger, measurements, structure and model.

Each is JSON or ``.npz`` (no pickle) written content-addressed by
:func:`privfair.store.files.write_artefact`, and read back through its checked
:class:`~privfair.store.files.FileRef`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Domain
from privfair.store.files import FileRef, json_bytes, write_artefact
from privfair.synth.estimation import GraphicalModel
from privfair.synth.measure import Compression, Measurement
from privfair.synth.structure import FairnessCheck, SelectedStructure
from privfair.synth.synthesizer import OneWayModel

# --- artefacts: ledger, measurements, structure, model -------------------------------------


def save_ledger(ledger: PrivacyLedger, artefacts: str | Path) -> FileRef:
    return write_artefact(artefacts, "ledger", json_bytes(ledger.state_dict()), "json")


def load_ledger(ref: FileRef) -> PrivacyLedger:
    return PrivacyLedger.from_state_dict(json.loads(ref.open_checked().read_text()))


def _domain_to_json(domain: Domain) -> dict[str, list[str] | list[int]]:
    # Lists, not a mapping: artefact JSON is written with sorted keys, and order matters.
    return {"attributes": list(domain.attributes), "sizes": list(domain.sizes)}


def _domain_from_json(raw: Mapping[str, Any]) -> Domain:
    return Domain(tuple(raw["attributes"]), tuple(raw["sizes"]))


def _compression_to_dict(c: Compression) -> dict[str, Any]:
    return {
        "original": _domain_to_json(c.original),
        "compressed": _domain_to_json(c.compressed),
        "mapping": {a: v.tolist() for a, v in c.mapping.items()},
        "merged": {a: v.tolist() for a, v in c.merged.items()},
        "prior": {a: v.tolist() for a, v in c.prior.items()},
    }


def _compression_from_dict(raw: Mapping[str, Any]) -> Compression:
    return Compression(
        _domain_from_json(raw["original"]), _domain_from_json(raw["compressed"]),
        {a: np.asarray(v, dtype=np.int64) for a, v in raw["mapping"].items()},
        {a: np.asarray(v, dtype=np.int64) for a, v in raw["merged"].items()},
        {a: np.asarray(v, dtype=np.float64) for a, v in raw.get("prior", {}).items()},
    )


def save_one_way(model: OneWayModel, raw: list[Measurement], artefacts: str | Path) -> FileRef:
    """The noisy one-way measurements and the (post-processed) independent model."""
    body = {
        "noisy_one_way": [m.to_dict() for m in raw],
        "compression": _compression_to_dict(model.compression),
        "measurements": [m.to_dict() for m in model.measurements],
        "total": model.total,
        "probabilities": {a: p.tolist() for a, p in model.probabilities.items()},
    }
    return write_artefact(artefacts, "one-way", json_bytes(body), "json")


def load_one_way(ref: FileRef) -> OneWayModel:
    raw = json.loads(ref.open_checked().read_text())
    return OneWayModel(
        _compression_from_dict(raw["compression"]),
        tuple(Measurement.from_dict(m) for m in raw["measurements"]),
        float(raw["total"]),
        {a: np.asarray(p, dtype=np.float64) for a, p in raw["probabilities"].items()},
    )


def save_measurements(ms: list[Measurement], artefacts: str | Path) -> FileRef:
    return write_artefact(artefacts, "selected", json_bytes([m.to_dict() for m in ms]), "json")


def load_measurements(ref: FileRef) -> list[Measurement]:
    return [Measurement.from_dict(m) for m in json.loads(ref.open_checked().read_text())]


def save_structure(structure: SelectedStructure, artefacts: str | Path) -> FileRef:
    return write_artefact(artefacts, "structure", json_bytes(structure.to_dict()), "json")


def load_structure(ref: FileRef) -> SelectedStructure:
    raw = json.loads(ref.open_checked().read_text())
    fairness = FairnessCheck(
        passed=raw["fairness"]["passed"],
        violations=tuple((v["protected"], v["outcome"], tuple(v["path"]))
                         for v in raw["fairness"]["violations"]),
        criterion=raw["fairness"]["criterion"],
    )
    return SelectedStructure(raw["method"], tuple(tuple(e) for e in raw["edges"]), fairness,
                             raw["search_nodes"], small_n=raw.get("small_n"))


def save_model(model: GraphicalModel, artefacts: str | Path) -> FileRef:
    """The fitted model as ``.npz`` (log-potentials + JSON metadata; no pickle)."""
    buffer = io.BytesIO()
    model.save(buffer)
    return write_artefact(artefacts, "model", buffer.getvalue(), "npz")


def model_meta(ref: FileRef) -> dict[str, Any]:
    return GraphicalModel.read_meta(ref.open_checked())


def load_model(ref: FileRef) -> GraphicalModel:
    return GraphicalModel.load(ref.open_checked())
