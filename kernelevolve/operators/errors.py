"""The one error an operator raises when it cannot serve a run at all."""


class OperatorError(ValueError):
    """The chosen operator cannot be used (unknown provider, missing key, no reference kernel);
    str() is one line for the user."""
