"""Exceptions raised by streamembed.

Every input problem is a :class:`ValueError` subclass whose message names the
argument, the problem and the offending shape or index, so callers can catch
``ValueError`` generically and users can read what to fix.
"""

from __future__ import annotations


class InputError(ValueError):
    """An argument is malformed: wrong shape, non-finite, negative, asymmetric..."""


class NotFittedError(InputError, AttributeError):
    """The estimator is used before ``fit`` (scikit-learn's convention)."""


class ModelFileError(InputError):
    """A saved model file is unreadable, corrupted, or of an unsupported schema."""
