"""Issue 41.2: no field of a published manifest is a floating-point noise draw.

Each kind publishes its small request (``kind_cases.py``) twice on the same data with two
test seeds; a float field whose value moves between the two releases depends on the noise.
Such a field must be a value of the exact samplers' lattice (an integer: a noisy count), or
one of :data:`DERIVED`, each a named post-processing of exact noisy values (a fit, a metric
of the synthetic table, a rate from a noisy count) with the reason it is not a draw.
Together with ``test_exact_noise.py`` (every mechanism draws exact noise) this is the
outsider's check: a field that carried float noise at full precision (the float Gaussian's
``noisy_total`` = 396.25441449808216 of issue 41) fails here; so does every kind run with
a broken, floating-point sampler in the layer.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kind_cases import CASES, EDGE_LIST_CASES, edge_list_example

from privfair.core import mechanisms
from privfair.release.protocol import run_release
from privfair.release.registry import KINDS

ACCOUNTING = ("accounting parameters: fixed by public inputs and by earlier noisy decisions "
              "(MST's edges, AIM's annealing, PrivPC's steps, the noisy row count), never a "
              "draw; sums of them differ in their last bit with the order of the entries")
N_HAT = ("a function of an exact noisy row count (an integer): DP-SGD's q = batch/n̂ and the σ, "
         "learning rate and ε calibrated to it")
FIT = "the graphical model fitted to the exact noisy marginals (post-processing)"
SYNTHETIC = "measured on the released synthetic table (post-processing)"
DPSGD = ("DP-SGD's training: its per-step Gaussian noise (gradients; DPSGD-F's per-step group "
         "counts) is floating-point and never published; these are post-processing of the "
         "trained weights (docs/privacy.md, 'Exact noise')")

#: Noise-dependent float fields that are post-processing of exact noisy values (or of
#: DP-SGD's training), by path pattern (``manifest.json`` paths, list indices as ``[]``),
#: with why. A new noise-dependent float field fails until it is an integer of the lattice
#: or listed here with its reason.
DERIVED: dict[str, str] = {
    r"ledger\[\]\..*": ACCOUNTING,
    r"entries\[\]\..*": ACCOUNTING,  # ledger.json
    r"guarantee\.spent\.rho": ACCOUNTING,
    r"structure\.small_n\.selection\.rho_.*": ACCOUNTING,
    r"structure\.small_n\.noisy_total": ("the mean of the exact noisy one-way marginals' "
                                           "totals (integers)"),
    r"method\.estimated_total": FIT,
    r"method\.estimation\.loss": FIT,
    r"hyper_parameters\.fairness_centre": ("PFLR's DP group centre: a ratio of the exact "
                                            "grid-Laplace group counts"),
    r"metrics\..*": ("the model's metrics from its exact noisy confusion counts (discrete "
                      "Gaussian integers) and their σ"),
    r"(fairness\.model_graph|fairness_check)\.data_fairness\..*": SYNTHETIC,
    r"method\.dp_sgd\.(sample_rate|noise_multiplier|epsilon_dp_sgd_alone)": N_HAT,
    r"hyper_parameters\.(sample_rate|noise_multiplier|count_noise_multiplier|learning_rate)":
        N_HAT,
    r"method\.training_history\[\]\..*": DPSGD,
    r"hyper_parameters\.group_clip_bounds_last_epoch\[\]": DPSGD,
    # issue 42.1: the GAN's table against the independence model of its own noisy anchors
    r"versus_independence\.noisy_one_way\..*": ("one-way marginals implied by the GAN's "
                                                 "exact noisy pair counts (ratios of integers)"),
    r"versus_independence\.(scores|marginal_shift)\..*": SYNTHETIC,
    r"versus_independence\.small_n\.pair_noise_tvd": N_HAT,
    # present only where DP-SGD ran (not where the GAN small-n rule fell back): public δ
    r"method\.dp_sgd\.epsilon_dp_sgd_alone_delta": "the run's public δ",
}

#: The releases checked: kind_cases' request of each kind, plus AIM for the table kind and a
#: DP-SGD model (their noise paths differ from MST's and PFLR's).
RELEASES: dict[str, tuple[str, dict[str, Any]]] = {
    "table-mst": ("table", {}),
    "table-aim": ("table", {"method": "aim"}),
    "gan": ("gan", {}),
    "model-pflr": ("model", {}),
    "model-dpsgd": ("model", {"model": "dpsgd-f"}),
    "graph": ("graph", {}),
    "embedding": ("embedding", {}),
}
SLOW = {"gan", "model-dpsgd"}


def floats(node: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """Every float of a JSON document, with its path (list indices as ``[]``)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from floats(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for value in node:
            yield from floats(value, f"{path}[]")
    elif isinstance(node, float) and not isinstance(node, bool):
        yield path, node


def documents(folder: Path) -> dict[str, Any]:
    return {str(p.relative_to(folder)): json.loads(p.read_text())
            for p in sorted(folder.rglob("*.json"))}


def release(label: str, seed: int, root: Path, toy: tuple[Path, Path], monkeypatch) -> Path:
    name, extra = RELEASES[label]
    kind = next(k for k in KINDS if k.name == name)
    case = CASES.get(name) or EDGE_LIST_CASES[name]
    contract, data = toy if name in CASES else edge_list_example()
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(root / "registry"))
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(root / "state"))
    params = {**case.params(contract, data, root), **extra, "seed": seed,
              "insecure_seed": True}
    return Path(run_release(kind, kind.params.model_validate(params)))


def noise_floats(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, float]]:
    """The float fields of ``a`` whose value differs in ``b`` (same path, same position)."""
    moved = []
    for name in a:
        if name not in b:
            continue
        left, right = list(floats(a[name])), list(floats(b[name]))
        other: dict[str, list[float]] = {}
        for path, value in right:
            other.setdefault(path, []).append(value)
        seen: dict[str, int] = {}
        for path, value in left:
            i = seen[path] = seen.get(path, -1) + 1
            values = other.get(path, [])
            if i >= len(values) or values[i] != value:
                moved.append((f"{name}:{path}", value))
    return moved


def violations(moved: list[tuple[str, float]]) -> list[str]:
    """The noise-dependent floats that are neither a lattice value nor a listed derivation."""
    bad = []
    for where, value in moved:
        if math.isfinite(value) and value == round(value):
            continue  # an integer: a noisy count of the exact samplers, or derived from them
        path = where.split(":", 1)[1]
        if any(re.fullmatch(pattern, path) for pattern in DERIVED):
            continue
        bad.append(f"{where} = {value!r}")
    return bad


def two_releases(label, tmp_path, toy, monkeypatch):
    first = documents(release(label, 11, tmp_path / "a", toy, monkeypatch))
    second = documents(release(label, 12, tmp_path / "b", toy, monkeypatch))
    return first, second


@pytest.mark.parametrize("label", [pytest.param(k, marks=pytest.mark.slow) if k in SLOW else k
                                   for k in RELEASES])
def test_no_manifest_field_is_a_float_noise_draw(label, tmp_path, toy_contract, toy_parquet,
                                                 monkeypatch):
    first, second = two_releases(label, tmp_path, (toy_contract, toy_parquet), monkeypatch)
    moved = noise_floats(first, second)
    assert violations(moved) == [], violations(moved)


def _float_gaussian_ints(size, *, sigma, rng=None, source=None):
    """A broken sampler: floating-point Gaussian noise where the exact integers belong."""
    return np.random.default_rng(int(rng.integers(2**62))).normal(0.0, float(sigma), size)


def _float_on_grid(steps, noise, granularity, shape):
    """The broken layer's sum: float noise added as floats (nothing rounds it away)."""
    return ((np.asarray(steps, dtype=np.float64).ravel() + np.asarray(noise)) * granularity
            ).reshape(shape)


def test_a_floating_point_sampler_in_the_layer_fails_the_walk(tmp_path, toy_contract,
                                                              toy_parquet, monkeypatch):
    monkeypatch.setattr(mechanisms, "_discrete_gaussian_ints", _float_gaussian_ints)
    monkeypatch.setattr(mechanisms, "_on_grid", _float_on_grid)
    first, second = two_releases("table-mst", tmp_path, (toy_contract, toy_parquet),
                                 monkeypatch)
    bad = violations(noise_floats(first, second))
    assert any("noisy_count" in b for b in bad), bad
