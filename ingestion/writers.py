"""Files held open for writing by some process (Linux: `/proc/<pid>/fd`).

An upload that stalls longer than the settle window looks finished by its size and mtime; the
writer still holds the file open. `open_for_writing(folder)` lists the files directly in
`folder` that any process we may inspect holds open with write access (`/proc/<pid>/fdinfo`
flags `O_WRONLY`/`O_RDWR`); ingestion leaves them in the inbox. Residuals: processes of other
users are visible only to root (run the worker as the uploading user, or upload under a
`.part` name and rename when done); on systems without `/proc` nothing is found (the settle
window and the `.part` convention remain); a writer that closes the file and opens it again
later is not holding it (a file that grew after it was taken is re-ingested whole).
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
_ACCESS = os.O_WRONLY | os.O_RDWR


def _writes(fdinfo: Path) -> bool:
    try:
        text = fdinfo.read_text()
    except OSError:
        return True  # the fd exists and points at the file: assume the worst
    for line in text.splitlines():
        if line.startswith("flags:"):
            try:
                return bool(int(line.split()[1], 8) & _ACCESS)
            except (IndexError, ValueError):
                return True
    return True


def open_for_writing(folder: Path, proc: Path = PROC) -> dict[str, list[int]]:
    """`{file name: [pid, ...]}` of the files directly in `folder` that a process holds open
    with write access; empty where `/proc` is not available."""
    if not proc.is_dir():
        return {}
    try:
        base = str(folder.resolve())
    except OSError:
        return {}
    prefix = base.rstrip(os.sep) + os.sep
    found: dict[str, list[int]] = {}
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        fd_dir = Path(entry.path) / "fd"
        try:
            fds = list(os.scandir(fd_dir))
        except OSError:  # gone, or another user's process
            continue
        for fd in fds:
            try:
                target = os.readlink(fd.path)
            except OSError:
                continue
            if target.endswith(" (deleted)") or not target.startswith(prefix):
                continue
            name = target[len(prefix) :]
            if os.sep in name:
                continue
            if _writes(Path(entry.path) / "fdinfo" / fd.name):
                found.setdefault(name, []).append(int(entry.name))
    return found


def writer_note(pids: list[int], proc: Path = PROC) -> str:
    """`held open for writing by process 123 (scp)`: the skip reason."""
    shown = []
    for pid in sorted(set(pids))[:3]:
        try:
            command = (proc / str(pid) / "comm").read_text().strip()
        except OSError:
            command = "?"
        shown.append(f"{pid} ({command})")
    return (
        f"held open for writing by process {', '.join(shown)}: waiting for the upload to "
        "finish (upload under a .part name and rename it when done)"
    )
