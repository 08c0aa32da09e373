"""Reading the dataset back: all rows of a study, one press campaign as a table, or one
ingested drive recording."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ingestion.errors import IngestError
from ingestion.layout import LEDGER
from ingestion.ledger import Ledger, current_ingested
from ingestion.rules import DRIVE_OPTIONAL, SOURCE_COLUMN, Study, validate


def read_dataset(data_root: str | Path, study: Study | str) -> pd.DataFrame:
    """All ingested rows of one study, with a `campaign` column (from the partition path)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    folder = Path(data_root) / "datasets" / f"study={Study(study).value}"
    if not folder.is_dir():
        return pd.DataFrame()
    # Campaigns are names: "007" must stay "007", not become the integer 7.
    partitioning = ds.partitioning(pa.schema([("campaign", pa.string())]), flavor="hive")
    dataset = ds.dataset(folder, format="parquet", partitioning=partitioning)
    return dataset.to_table().to_pandas()


def campaign_table(data_root: str | Path, study: Study | str, campaign: str) -> pd.DataFrame:
    """One press campaign's rows from all its ingested files, in ledger order, validated again.

    The `series` numbers of each file are renumbered after those of earlier files, so
    repeated series from several lab files stay distinct (key series, step, sensor).
    """
    data_root, study = Path(data_root), Study(study)
    if study is not Study.press:
        raise IngestError(
            "drive recordings are separate experiments (each has its own time axis) and are "
            "not concatenated; read them with read_dataset() and group by source_sha256"
        )
    records = [
        r
        for r in current_ingested(Ledger(data_root / LEDGER).read()).values()
        if r.get("study") == study.value and r.get("campaign") == campaign
    ]
    if not records:
        raise IngestError(f"no ingested {study.value} data for campaign '{campaign}'")
    frames, offset = [], 0
    for record in records:
        frame = pd.read_parquet(data_root / record["part"]).drop(columns=[SOURCE_COLUMN])
        codes = pd.factorize(frame["series"], sort=True)[0]
        frame = frame.assign(series=codes + offset)
        offset += int(codes.max()) + 1
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    return validate(study, table, source=f"campaign '{campaign}' ({study.value})")


def drive_recording(data_root: str | Path, part: str) -> pd.DataFrame:
    """One ingested drive recording (its part, relative to the data root) as a recording
    table: `position_rad` only when the lab file had it, no `source_sha256`."""
    from schemas.drive import validate_drive_recording

    frame = pd.read_parquet(Path(data_root) / part).drop(columns=[SOURCE_COLUMN])
    empty = [c for c in DRIVE_OPTIONAL if c in frame and frame[c].isna().all()]
    return validate_drive_recording(frame.drop(columns=empty), source=part)
