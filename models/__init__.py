"""Physical models: the press surrogate, the drive-train construction kit and underactuated
systems. Pure: never imports prefect or mlflow (a test enforces it)."""
