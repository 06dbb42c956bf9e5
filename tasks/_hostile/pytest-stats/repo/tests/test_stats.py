"""Tests of stats (run with pytest)."""
import pytest

import stats


def test_mean():
    assert stats.mean([1, 2, 3, 4]) == 2.5


def test_mean_of_one():
    assert stats.mean([7]) == 7


def test_variance():
    assert stats.variance([1, 2, 3, 4]) == pytest.approx(1.25)


def test_variance_of_constant():
    assert stats.variance([5, 5, 5]) == 0


def test_version():
    assert stats.VERSION == "1.0"
