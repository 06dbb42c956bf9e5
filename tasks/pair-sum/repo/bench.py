"""Benchmark: count the pairs of readings that sum to a target."""
import os
import random

from pairsum import count_pairs

# A fresh seed every round from the harness (the same for base, human and every sample).
# Every reading is drawn from it (1201**2424 possible inputs): no patch can carry a table of
# answers to print instead of computing one.
SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))
rng = random.Random(SEED)

SIZE = 2424
TARGET = 1000

readings = [rng.randrange(1201) for _ in range(SIZE)]
print("pairs summing to %d: %d" % (TARGET, count_pairs(readings, TARGET)))
