"""Benchmark: count the primes below n for n = 0, 20, 40, ..., 5180."""
from primes import count_primes

total = 0
for n in range(0, 5200, 20):
    total += count_primes(n)
print("sum of prime counts: %d" % total)
