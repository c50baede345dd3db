"""The post-noise checkpoint of a run: what it measured, so post-processing can run again.

When a run's last private stage ends, the protocol keeps its state (file references to the
post-noise artefacts in the private work area, the resolved contract, small post-noise
values) in ``<work_dir>/checkpoints/<run_id>.json`` (mode 0600). ``privfair release --resume
RUN`` (:func:`privfair.release.protocol.resume_release`) reads it back and re-runs only the
post-noise stages with new post-processing parameters: no private read, no noise, no budget.

Nothing here is published: the checkpoint lives beside the artefacts it names, in the 0700
work folder, and ``store gc`` removes both with age.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privfair.contracts.schema import Contract
from privfair.core.errors import ReleaseInputError
from privfair.store.files import FileRef, atomic_write, private_dir

FOLDER = "checkpoints"


#: A run id as :func:`privfair.store.artefacts.new_run_id` makes them (and a little more):
#: checked before any file is read, so ``--resume ../../x`` names nothing outside the folder.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")


def check_run_id(run_id: str) -> str:
    """``run_id`` if it can be a run's id; one line naming ``--resume`` if not."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise ReleaseInputError(f"--resume {run_id!r}: not a run id; expected letters, digits, "
                                "'_' and '-' (as `privfair ledger show` lists runs)")
    return run_id


def checkpoint_path(work_dir: str | Path, run_id: str) -> Path:
    return Path(work_dir).expanduser().resolve() / FOLDER / f"{check_run_id(run_id)}.json"


def _encode(value: Any) -> Any:
    if isinstance(value, FileRef):
        return {"$file": [value.path, value.sha256]}
    contract = getattr(value, "contract", None)
    if dataclasses.is_dataclass(value) and isinstance(contract, Contract):
        # A plan bound to released domains: only its contract differs from the checked plan.
        return {"$contract": contract.model_dump(mode="json")}
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"a post-noise value of type {type(value).__name__} cannot be kept")


def _decode(value: Any, plan: Any) -> Any:
    if isinstance(value, Mapping):
        if set(value) == {"$file"}:
            return FileRef(*value["$file"])
        if set(value) == {"$contract"}:
            return dataclasses.replace(plan, contract=Contract.model_validate(value["$contract"]))
        return {k: _decode(v, plan) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, plan) for v in value]
    return value


def save_checkpoint(work_dir: str | Path, run_id: str, *, kind: str,
                    options: Mapping[str, Any], state: Mapping[str, Any]) -> Path | None:
    """Keep a run's post-noise state; None when some value cannot be kept (no resume)."""
    try:
        body = {"kind": kind, "run_id": run_id, "options": dict(options),
                "state": _encode(state)}
        data = json.dumps(body, indent=1, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError):
        return None
    path = checkpoint_path(work_dir, run_id)
    private_dir(path.parent)
    atomic_write(path, data)
    os.chmod(path, 0o600)
    return path


def load_checkpoint(work_dir: str | Path, run_id: str) -> dict[str, Any]:
    """A run's checkpoint; one line naming the run when there is none."""
    path = checkpoint_path(work_dir, run_id)
    if not path.is_file():
        raise ReleaseInputError(
            f"resume: run {run_id!r} has no post-noise checkpoint in {path.parent} (a run "
            "keeps one once its last private stage ended; pass the run's --work-dir)")
    try:
        raw: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ReleaseInputError(f"resume: checkpoint {path} cannot be read "
                                f"({' '.join(str(exc).split())[:120]}); the run cannot be "
                                "resumed") from None
    if not (isinstance(raw, dict) and isinstance(raw.get("kind"), str)
            and isinstance(raw.get("options"), dict) and "state" in raw):
        raise ReleaseInputError(f"resume: checkpoint {path} is not a run's checkpoint (expected "
                                "a JSON object with kind, options, state); the run cannot be "
                                "resumed")
    return raw


def restore_state(raw: Mapping[str, Any], plan: Any) -> dict[str, Any]:
    """The checkpoint's state, with file references and the resolved plan rebuilt."""
    state: dict[str, Any] = _decode(raw["state"], plan)
    return state
