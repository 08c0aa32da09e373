"""Per-generation checkpoints of a structure search (one JSON file, written atomically).

Content: a fingerprint (settings, seed, data hash), the next generation's index and
population (with inherited parameters), the RNG state (``bit_generator.state``), the history
rows and the best evaluation. A checkpoint with another fingerprint is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from methods.errors import InputError

FILE = "structure_search.json"


def data_fingerprint(data) -> str:
    h = hashlib.sha256()
    for arr in (np.ascontiguousarray(data.u, float), np.ascontiguousarray(data.y, float)):
        h.update(arr.tobytes())
    h.update(repr(float(data.dt)).encode())
    if getattr(data, "q", None) is not None:
        h.update(np.ascontiguousarray(data.q, float).tobytes())
    return h.hexdigest()


def _plain(obj):
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    return obj


def save_checkpoint(directory: Path, state: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FILE
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(_plain(state)))
    os.replace(tmp, path)
    return path


def load_checkpoint(directory: Path, fingerprint: dict) -> dict | None:
    """The saved state, or None if there is none. Raises InputError on a mismatch."""
    path = Path(directory) / FILE
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(
            f"{path}: unreadable checkpoint ({exc}); delete it to start over"
        ) from None
    if state.get("fingerprint") != json.loads(json.dumps(_plain(fingerprint))):
        raise InputError(
            f"{path}: the checkpoint belongs to a search with other settings, seed or data; "
            "use another checkpoint_dir or delete the file"
        )
    return state
