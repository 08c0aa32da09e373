"""The import path of model versions registered before the study packages (issue 29).

Their "models from code" file says `from tasks.products import PressPyfunc` (or
`DrivePyfunc`); versions registered since name `products.pyfunc`. This module re-exports the
two wrappers so that `mlflow.pyfunc.load_model` still loads the older versions. Nothing else
belongs here.
"""

from products.pyfunc import DrivePyfunc, PressPyfunc

__all__ = ["DrivePyfunc", "PressPyfunc"]
