"""Correctness test for kernel.checksum (exit 0 = correct)."""
import random

from kernel import checksum

assert checksum([]) == 0
assert checksum([2, 3]) == 13
values = [random.Random(7).randrange(10**9) for _ in range(1000)]
assert checksum(values) == sum(v * v % 1000003 for v in values)
print("ok")
