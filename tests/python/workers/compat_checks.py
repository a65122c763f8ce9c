"""The assertions of the Horovod-compatibility workers (horovod_compat_worker.py and
horovod_compat_ops.py): values bit for bit, and errors by type and words."""

import numpy as np


def close(actual, expected, what):
    actual = actual.detach().double().numpy()
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert np.array_equal(actual, expected), f"{what}: got\n{actual}\nexpected\n{expected}"


def equal(actual, expected, what):
    assert actual == expected, f"{what}: got {actual!r}, expected {expected!r}"


def raises(error_type, words, call, what):
    """Runs call(); it must raise error_type (or a subclass) with every one
    of `words` in its message. Returns the error."""
    try:
        call()
    except Exception as error:  # checked below
        assert isinstance(error, error_type), \
            f"{what}: raised {type(error).__name__}: {error}, expected {error_type.__name__}"
        for word in words:
            assert word in str(error), f"{what}: '{word}' not in {error!r}"
        return error
    raise AssertionError(f"{what}: no {error_type.__name__}")
