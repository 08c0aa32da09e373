"""Progress of long flows: a Prefect progress artifact (seen in the UI) and, when the flow
runs inside the command line, a local callback that drives a progress bar."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

ProgressCallback = Callable[[str, int, int], None]
# A process-wide sink (not a ContextVar): Prefect may run the flow body in another context.
_sink: list[ProgressCallback] = []


@contextlib.contextmanager
def progress_sink(callback: ProgressCallback) -> Iterator[None]:
    """Route progress of flows run in this context to `callback(label, done, total)`."""
    _sink.append(callback)
    try:
        yield
    finally:
        _sink.remove(callback)


class Progress:
    """Counts finished units of work for one label; call `advance()` as each one ends."""

    def __init__(self, label: str, total: int, *, key: str | None = None) -> None:
        self.label, self.total, self.done = label, max(int(total), 1), 0
        self._artifact: Any = None
        try:
            from prefect.artifacts import create_progress_artifact

            self._artifact = create_progress_artifact(
                progress=0.0, key=key, description=f"{label}: 0/{self.total}"
            )
        except Exception:  # outside a flow run there is nothing to attach the artifact to
            self._artifact = None
        self._emit()

    def advance(self, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        if self._artifact is not None:
            from prefect.artifacts import update_progress_artifact

            update_progress_artifact(
                self._artifact,
                progress=100.0 * self.done / self.total,
                description=f"{self.label}: {self.done}/{self.total}",
            )
        self._emit()

    def _emit(self) -> None:
        for callback in list(_sink):
            callback(self.label, self.done, self.total)
