"""Benchmark: count the pairs of readings that sum to a target."""
import os

from pairsum import count_pairs

# A fresh seed every round from the harness (the same for base, human and every sample),
# so a patch cannot print an answer it remembered instead of computing it.
SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))

SIZE = 2400
TARGET = 1000

readings = [(i * 7919) % 1201 for i in range(SIZE + SEED % 50)]
print("pairs summing to %d: %d" % (TARGET, count_pairs(readings, TARGET)))
