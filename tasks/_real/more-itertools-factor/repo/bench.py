"""Benchmark: more_itertools.factor (and totient, which is built on it).

Factors a block of consecutive integers around a million and computes Euler's totient
of a block around ten thousand; both blocks start at an offset taken from
HARNESS_BENCH_SEED (fresh every round, the same for every variant of a round), so the
answer changes with the seed while the amount of work stays about the same.
"""
import os

from more_itertools import factor, totient

SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))
start = 1_000_000 + (SEED % 100_000) * 7
small = 10_000 + (SEED % 997) * 13

checksum = 0
n_factors = 0
for n in range(start, start + 8000):
    fs = list(factor(n))
    n_factors += len(fs)
    checksum = (checksum * 1_000_003 + fs[-1] * len(fs)) % (1 << 61)
phi_sum = 0
for n in range(small, small + 8000):
    phi_sum += totient(n)
print("prime factors: %d" % n_factors)
print("checksum: %d" % checksum)
print("sum of totients: %d" % phi_sum)
