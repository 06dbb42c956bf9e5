"""Benchmark: count the primes below n for 260 values of n, one drawn from each stretch of
20 numbers up to 5200."""
import os
import random

from primes import count_primes

# A fresh seed every round from the harness (the same for base, human and every sample).
# Each of the 260 values is drawn from it, so the answer is one of 20**260 possible sums:
# no patch can carry a table of answers to print instead of computing one.
SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))
rng = random.Random(SEED)

total = 0
for start in range(1, 5200, 20):
    total += count_primes(start + rng.randrange(20))
print("sum of prime counts: %d" % total)
