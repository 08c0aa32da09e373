"""Start a run of a served deployment from a script, with some settings only.

The deployments enforce their parameter schema (Prefect's default): the form in the Prefect
UI lists every setting that cannot be empty as required and refuses an incomplete or
out-of-range submission before it is sent, and the server refuses it again. A script that
wants the defaults for most settings starts its run with that check off for this one run
(the REST field `enforce_parameter_schema: false` of `POST /deployments/{id}/create_flow_run`,
what the form's "Validate parameters" box does): the flow's settings model fills in the
defaults and checks every value; a wrong one fails the run once, with the message.

    from deployments.runs import run_deployment
    run = run_deployment("press-uncertainty/press-uncertainty", {"study": {"n_tests": 8}})
    run.state.type.value  # "COMPLETED"

Prefect's own `prefect.deployments.run_deployment` keeps the check on: partial settings get a
409 that names the first missing setting ("'n_tests' is a required property").
"""

from __future__ import annotations

import time
from typing import Any


def run_deployment(
    name: str,
    parameters: dict[str, Any],
    *,
    check_schema: bool = False,
    timeout: float = 600.0,
    poll: float = 2.0,
) -> Any:
    """Create a flow run of the deployment `name` ("flow/deployment") with `parameters`
    (e.g. `{"study": {"n_tests": 8}}`), the schema check off unless `check_schema`, and wait
    up to `timeout` seconds for it to end; returns the flow run (`state`, `name`, `id`) as
    it is then (still running after `timeout`: its current state)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentFlowRunCreate
    from prefect.client.schemas.objects import FlowRun
    from prefect.states import Scheduled, to_state_create

    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(name)
        request = DeploymentFlowRunCreate(
            parameters=parameters, state=to_state_create(Scheduled()),
            enforce_parameter_schema=check_schema,
        )  # fmt: skip
        response = client.request(
            "POST", "/deployments/{id}/create_flow_run", path_params={"id": deployment.id},
            json=request.model_dump(mode="json", exclude_unset=True),
        )  # fmt: skip
        run = FlowRun.model_validate(response.json())
        deadline = time.monotonic() + timeout
        while not (run.state and run.state.is_final()) and time.monotonic() < deadline:
            time.sleep(poll)
            run = client.read_flow_run(run.id)
    return run
