"""The error tree carries each error's HTTP status and exit code; the drawn tree names every class."""

from __future__ import annotations

import inspect

import pytest

from splitaudit.indexer import errors
from splitaudit.indexer.gate.client import error_for_answer

ERROR_CLASSES = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, errors.SplitauditError)
]


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_is_drawn_in_the_tree_with_a_status_and_exit_code(
    cls: type[errors.SplitauditError],
) -> None:
    assert f" {cls.__name__} " in (errors.__doc__ or "")
    assert cls.exit_code in (errors.EXIT_USAGE, errors.EXIT_INTERNAL)
    # Whatever the client cannot fix (5xx) exits 3, except unloadable weights, a usage problem.
    if cls.http_status < 500 or cls is errors.ModelUnavailableError:
        assert cls.exit_code == errors.EXIT_USAGE
    else:
        assert cls.exit_code == errors.EXIT_INTERNAL


@pytest.mark.parametrize(
    "cls",
    [
        errors.AuthError,
        errors.NotFoundError,
        errors.UploadTooLargeError,
        errors.ConflictError,
        errors.UsageError,
        errors.InputError,
    ],
)
def test_a_4xx_answer_becomes_the_error_raised_with_that_status(
    cls: type[errors.SplitauditError],
) -> None:
    back = error_for_answer(cls.http_status, "no")
    assert type(back) is cls
    assert back.exit_code == cls.exit_code


def test_a_5xx_answer_is_a_server_error_exiting_3() -> None:
    back = error_for_answer(502, "bad gateway")
    assert isinstance(back, errors.ServerError) and back.exit_code == errors.EXIT_INTERNAL
