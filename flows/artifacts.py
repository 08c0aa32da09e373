"""The answer of a flow run on its Prefect run page: a Markdown artifact of the typed result
(the result renders itself, `markdown()`, with every file- or user-supplied text escaped)."""

from __future__ import annotations

import logging
from typing import Any, Protocol


class Renders(Protocol):
    def markdown(self) -> str: ...
    def headline(self) -> str: ...


def summary_markdown(result: Renders) -> str:
    """The answer at a glance: `result.summary()` where the result has one, else its headline
    and warnings (the full result is its own artifact)."""
    own = getattr(result, "summary", None)
    if callable(own):
        return str(own())
    from tracking.markdown import cell

    lines = [f"# {cell(result.headline())}", ""]
    lines += [f"**Warning:** {cell(w)}" for w in getattr(result, "warnings", ()) or ()]
    return "\n".join(lines)


def log_warnings(result: Renders) -> None:
    """Each of the result's warnings as a WARNING of the flow run's log (the run page's
    logs filter on it), not only as a line of the artifact."""
    warnings = getattr(result, "warnings", ()) or ()
    if not warnings:
        return
    from prefect.context import FlowRunContext
    from prefect.logging import get_run_logger

    logger = get_run_logger() if FlowRunContext.get() else logging.getLogger("greylab")
    for warning in warnings:
        logger.warning("%s", warning)


def rename_flow_run(name: str) -> str | None:
    """Name the current Prefect flow run after its outcome (as the MLflow run is named), so
    the runs list says the answer instead of a random name; returns the name given (None
    outside a flow run or when the API refuses: the study's answer stands)."""
    from prefect.client.orchestration import get_client
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    if context is None or context.flow_run is None:
        return None
    name = " ".join(name.split())[:120]
    try:
        with get_client(sync_client=True) as client:
            client.update_flow_run(context.flow_run.id, name=name)
    except Exception as exc:
        logging.getLogger("greylab").warning("flow run not renamed: %s", exc)
        return None
    return name


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


def retry_unless_input_error(task: Any, task_run: Any, state: Any) -> bool:
    """A task's `retry_condition_fn`: retry what may pass on a second try (a file still being
    written, a busy store), never bad input (`methods.errors.InputError`: the same input fails
    the same way); the run fails once, with the message."""
    from methods.errors import InputError

    return not isinstance(getattr(state, "data", None), InputError)


def once_for_bad_input(task: Any) -> Any:
    """`task` with its retries kept for other failures but none for bad input."""
    return task.with_options(retry_condition_fn=retry_unless_input_error)


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
    """End a study flow run: its warnings logged as WARNING, the Prefect flow run renamed
    after the outcome (`result.headline()`), a short summary artifact (`<study>-summary`:
    the answer at a glance, narrow enough for a laptop) and the full result as a Markdown
    artifact (`key`) on the run page, the MLflow parent run named after the outcome with the
    full Markdown as its description (when the study tracked one) and tagged with the new
    flow run name, and a Completed state whose message is the headline and whose data is the
    typed result (persisted as JSON)."""
    from prefect.states import Completed

    log_warnings(result)
    renamed = rename_flow_run(result.headline())
    summary = key.removesuffix("-result") + "-summary"
    publish_result(_Summary(result), summary, f"{description}: the answer at a glance")
    publish_result(result, key, description)
    if recorder is not None and recorder.parent is not None:
        try:
            recorder.outcome(recorder.run, result.headline(), result.markdown())
            if renamed:
                recorder.run.tags({"prefect.flow_run_name": renamed})
        except Exception as exc:  # a name and a note never cost the study its answer
            logging.getLogger("greylab").warning("MLflow run not named: %s", exc)
    return Completed(message=result.headline()[:500], data=result)


class _Summary:
    """A result's summary as something `publish_result` renders."""

    def __init__(self, result: Renders) -> None:
        self.result = result

    def markdown(self) -> str:
        return summary_markdown(self.result)

    def headline(self) -> str:
        return self.result.headline()
