"""Small statistics over lists of numbers."""
from stats._version import VERSION  # noqa: F401  (written by build.py at install)


def mean(xs):
    """The arithmetic mean of a non-empty list."""
    total = 0.0
    for x in xs:
        total += x
    return total / len(xs)


def variance(xs):
    """The population variance of a non-empty list, one deviation at a time."""
    deviations = []
    for x in xs:
        deviations.append((x - mean(xs)) ** 2)
    return sum(deviations) / len(xs)
