"""The answer of a flow run on its Prefect run page: a Markdown artifact of the typed result
(the result renders itself, `markdown()`, with every file- or user-supplied text escaped)."""

from __future__ import annotations

import logging
from typing import Any, Protocol


class Renders(Protocol):
    def markdown(self) -> str: ...
    def headline(self) -> str: ...


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


def flow_run_tags() -> dict[str, str]:
    """The Prefect flow run of this study as MLflow tags (`prefect.flow_run_id`, its name and,
    with a Prefect UI, `prefect.flow_run_url`): an MLflow run found from its Prefect run and
    back. Empty outside a flow run."""
    from prefect.context import FlowRunContext
    from prefect.runtime import flow_run

    context = FlowRunContext.get()
    if context is None or context.flow_run is None:
        return {}
    tags = {"prefect.flow_run_id": str(context.flow_run.id),
            "prefect.flow_run_name": str(context.flow_run.name)}  # fmt: skip
    try:
        url = flow_run.ui_url
    except Exception:  # no UI configured (ephemeral server)
        url = None
    if url:
        tags["prefect.flow_run_url"] = str(url)
    return tags


def finish(result: Renders, key: str, description: str, recorder: Any = None) -> Any:
    """End a study flow run: the result as a Markdown artifact on the Prefect run page, the
    MLflow parent run named after the outcome with the same Markdown as its description
    (when the study tracked one), and a Completed state whose message is the outcome in one
    line (`result.headline()`) and whose data is the typed result (persisted as JSON)."""
    from prefect.states import Completed

    publish_result(result, key, description)
    if recorder is not None and recorder.parent is not None:
        try:
            recorder.outcome(recorder.run, result.headline(), result.markdown())
        except Exception as exc:  # a name and a note never cost the study its answer
            logging.getLogger("greylab").warning("MLflow run not named: %s", exc)
    return Completed(message=result.headline()[:500], data=result)
