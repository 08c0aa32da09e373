"""Lab files for the ingestion tests: valid press tables and drive recordings, and ten bad
files, each broken in a different way, with the words its quarantine report must contain."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def press_frame(rng: np.random.Generator, n_series: int = 2, n_steps: int = 4) -> pd.DataFrame:
    rows = [
        {
            "series": s,
            "step": j,
            "force_setpoint_N": 100.0 * j,
            "force_N": round(100.0 * j + float(rng.uniform(0, 1)), 6),
            "sensor": k,
            "displacement_um": round(float(rng.normal(10.0 * j, 0.5)), 6),
        }
        for s in range(n_series)
        for j in range(n_steps)
        for k in ("s1", "s2")
    ]
    return pd.DataFrame(rows)


def drive_frame(rng: np.random.Generator, n: int = 40, position: bool = False) -> pd.DataFrame:
    t = np.arange(n) * 0.01  # uniform grid, exactly representable steps in CSV (repr)
    frame = pd.DataFrame(
        {
            "t_s": t,
            "torque_Nm": np.round(rng.normal(0, 1, n), 6),
            "velocity_rad_s": np.round(rng.normal(0, 2, n), 6),
        }
    )
    if position:
        frame["position_rad"] = np.round(np.cumsum(frame["velocity_rad_s"]) * 0.01, 6)
    return frame


def write(folder: Path, name: str, frame: pd.DataFrame) -> Path:
    path = folder / name
    if name.endswith(".parquet"):
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)
    return path


def bad_files(rng: np.random.Generator) -> dict[str, tuple[object, str]]:
    """name -> (frame, or raw bytes, expected words in the report)."""
    p = press_frame(rng)
    nan = p.copy()
    nan.loc[3, "force_N"] = np.nan
    neg = p.copy()
    neg.loc[2, "force_N"] = -5.0
    text = p.astype({"displacement_um": object})
    text.loc[5, "displacement_um"] = "abc"
    grid = drive_frame(rng)
    grid.loc[7, "t_s"] = 0.0705
    return {
        "line-1__missing-column.csv": (
            p.drop(columns=["displacement_um"]),
            "missing column(s) ['displacement_um']",
        ),
        "line-1__nan.csv": (nan, "force_N"),
        "line-1__duplicate-key.csv": (
            pd.concat([p, p.iloc[[0]]], ignore_index=True),
            "duplicate key",
        ),
        "line-2__negative-force.csv": (neg, "greater_than_or_equal_to(0)"),
        "line-2__text-in-number.csv": (text, "'abc'"),
        "empty.csv": (b"", "empty"),
        "unknown-columns.csv": (
            pd.DataFrame({"a": [1, 2], "b": [3, 4], "c": [5, 6]}),
            "neither a press measurement table",
        ),
        "rig__non-uniform-time.csv": (grid, "uniformly sampled"),
        "corrupt.parquet": (b"PAR1 this is not parquet", "cannot be read as parquet"),
        "line-1__incomplete-series.csv": (p.drop(index=[5]), "every series must have every step"),
    }


def build_inbox(inbox: Path, rng: np.random.Generator) -> dict[str, object]:
    """50 files: 40 valid (press and drive, CSV and Parquet, several campaigns, odd names),
    10 bad. Returns {"press": [(campaign, frame)], "drive": [...], "bad": {name: words}}."""
    inbox.mkdir(parents=True, exist_ok=True)
    press: list[tuple[str, pd.DataFrame]] = []
    drive: list[tuple[str, pd.DataFrame]] = []
    campaigns = ["line-1", "line-2", None]
    for i in range(24):
        campaign = campaigns[i % 3]
        ext = "parquet" if i % 4 == 0 else "csv"
        name = f"{campaign}__run{i:02d}.{ext}" if campaign else f"Run {i:02d} (copy).{ext}"
        frame = press_frame(rng, n_series=2 + i % 2)
        write(inbox, name, frame)
        press.append((campaign or "default", frame))
    for i in range(16):
        ext = "parquet" if i % 3 == 0 else "csv"
        name = f"rig__rec{i:02d}.{ext}" if i % 2 else f"rig-b__rec;{i:02d}\nx.{ext}"
        frame = drive_frame(rng, n=30 + i, position=i % 4 == 1)
        write(inbox, name, frame)
        drive.append(("rig" if i % 2 else "rig-b", frame))
    bad = {}
    for name, (content, words) in bad_files(rng).items():
        if isinstance(content, bytes):
            (inbox / name).write_bytes(content)
        else:
            write(inbox, name, content)
        bad[name] = words
    return {"press": press, "drive": drive, "bad": bad}
