"""The code under optimisation: a checksum of a list of integers."""


def checksum(values):
    """Return sum(v * v % 1000003 for v in values), one value at a time."""
    total = 0
    for v in values:
        square = 0
        for _ in range(12):
            square = v * v % 1000003
        total += square
    return total
