"""The answer of a flow run on its Prefect run page: a Markdown artifact of the typed result
(the result renders itself, `markdown()`, with every file- or user-supplied text escaped)."""

from __future__ import annotations

import logging
from typing import Protocol


class Renders(Protocol):
    def markdown(self) -> str: ...


def publish_result(result: Renders, key: str, description: str) -> None:
    """Attach `result.markdown()` to the current flow run under `key` (lower-case letters,
    digits and dashes). Outside a flow run there is no run page: nothing is published."""
    from prefect.artifacts import create_markdown_artifact
    from prefect.context import FlowRunContext

    if FlowRunContext.get() is None:
        return
    try:
        create_markdown_artifact(markdown=result.markdown(), key=key, description=description)
    except Exception as exc:  # the study's result stands even when the API is unreachable
        logging.getLogger("greylab").warning("result artifact %s not stored: %s", key, exc)
