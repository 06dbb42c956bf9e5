"""Benchmark: count the primes below n for n = S, S + 20, ..., S + 5180 (S from the seed)."""
import os

from primes import count_primes

# A fresh seed every round from the harness (the same for base, human and every sample),
# so a patch cannot print an answer it remembered instead of computing it.
SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))
START = 1 + 2 * (SEED % 9)

total = 0
for n in range(START, 5200 + START, 20):
    total += count_primes(n)
print("sum of prime counts: %d" % total)
