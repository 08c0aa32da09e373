"""What a validation records: one MLflow evaluation run per validation and the validation
tags of the model's registered versions (`products.validation.ValidationRecorder`, study
`validation`).

The recorder lives with the products because every evaluation run is recorded by it: the
`model-validation` flow and `greylab press|drive validate` (through `tasks.validation.tasks`)
and the drive flow's own validation (`validation_data`); `products` sits below `tasks`, so
this module names it for the study registry instead of defining a second one.
"""

from products.validation import ValidationRecorder

__all__ = ["ValidationRecorder"]
