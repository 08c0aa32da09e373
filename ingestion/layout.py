"""Where everything lives under the data root (the tree in the `ingestion` docstring).

```
datasets/study=<press|drive>/campaign=<name>/part-<sha256>.parquet   validated rows
archive/<sha256>-<safe name>                                          ingested originals
quarantine/<safe name> + <safe name>.error.txt                        rejects + reason
ledger.jsonl  .staging/  .ingest.lock
campaigns.toml                                                        studies per campaign
```
"""

from __future__ import annotations

from pathlib import Path

from ingestion.errors import IngestError
from ingestion.names import safe_name

LEDGER = "ledger.jsonl"
LOCK = ".ingest.lock"
STAGING = ".staging"
MANAGED = ("datasets", "archive", "quarantine")
ERROR_SUFFIX = ".error.txt"
#: the campaign file (`ingestion.campaigns`), written by the lab, read by `--trigger-studies`
CAMPAIGN_FILE = "campaigns.toml"


def part_path(data_root: Path, study: str, campaign: str, sha256: str) -> Path:
    return (
        data_root
        / "datasets"
        / f"study={study}"
        / f"campaign={campaign}"
        / f"part-{sha256}.parquet"
    )


def archive_path(data_root: Path, sha: str, name: str) -> Path:
    return data_root / "archive" / f"{sha}-{safe_name(name)}"


def error_report_path(target: Path) -> Path:
    """The `.error.txt` beside a quarantined file."""
    return target.with_name(target.name + ERROR_SUFFIX)


def free_name(folder: Path, name: str, sha: str) -> Path:
    """A quarantine path for `name` whose file and error report are both still free."""
    stem, dot, suffix = name.rpartition(".")
    stem, suffix = (stem, dot + suffix) if dot and stem else (name, "")
    candidates = [name, f"{stem}-{sha[:12]}{suffix}"]
    candidates += [f"{stem}-{sha[:12]}-{n}{suffix}" for n in range(1, 1000)]
    for candidate in candidates:
        path = folder / candidate
        if not path.exists() and not error_report_path(path).exists():
            return path
    raise IngestError(f"{folder}: no free quarantine name for {name}")


def check_folders(inbox: Path, data_root: Path) -> None:
    """The inbox must be an existing folder outside the dataset, archive and quarantine."""
    if not inbox.is_dir():
        raise IngestError(f"inbox {inbox}: not an existing folder")
    inbox_r, root_r = inbox.resolve(), data_root.resolve()
    for managed in MANAGED:
        folder = root_r / managed
        if inbox_r == folder or folder in inbox_r.parents or inbox_r in folder.parents:
            raise IngestError(
                f"inbox {inbox} overlaps the managed folder {folder}; use a separate inbox"
            )
    if inbox_r == root_r:
        raise IngestError(f"inbox {inbox} is the data root itself; use a subfolder like inbox/")
