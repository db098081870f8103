"""Pydantic models whose construction raises the SDK's typed errors, not pydantic's ``ValidationError``
(which is not part of the error tree): the result types callers may build themselves and the framework
adapters (``vllm_tasks.integrations``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import InvalidInputError


class CheckedModel(BaseModel):
    """A model whose construction refuses bad values with :class:`~vllm_tasks.InvalidInputError` naming
    the field (see :func:`input_error`).

    Raises:
        InvalidInputError: a field's value is refused.

    Examples:
        >>> class Options(CheckedModel):
        ...     size: int = 1
        >>> try:
        ...     Options(size="big")
        ... except InvalidInputError as error:
        ...     print(error.field, type(error.__cause__))
        size <class 'NoneType'>
    """

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as invalid:
            raise input_error(type(self).__name__, invalid) from None


def input_error(model: str, invalid: ValidationError) -> InvalidInputError:
    """The first error of ``invalid``: the validator's own :class:`InvalidInputError`, or one naming the
    field pydantic refused (``vectors``, ``billed_units.input_tokens``, ``texts[2]``).

    Examples:
        >>> from pydantic import TypeAdapter
        >>> try:
        ...     TypeAdapter(int).validate_python("many")
        ... except ValidationError as invalid:
        ...     print(input_error("count", invalid).field)
        count
    """
    first = invalid.errors()[0]
    cause = first.get("ctx", {}).get("error")
    if isinstance(cause, InvalidInputError):
        return cause
    field = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]).lstrip(".")
    if first["type"] == "extra_forbidden":
        return InvalidInputError(
            field, first.get("input"), f"is not an argument of {model}", "Check the spelling."
        )
    return InvalidInputError(field or model, first.get("input"), first["msg"], f"See {model}'s attributes.")
