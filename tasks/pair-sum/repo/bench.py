"""Benchmark: count the pairs of readings that sum to a target."""
from pairsum import count_pairs

SIZE = 2400
TARGET = 1000

readings = [(i * 7919) % 1201 for i in range(SIZE)]
print("pairs summing to %d: %d" % (TARGET, count_pairs(readings, TARGET)))
