"""Benchmark: more_itertools.unique_everseen on token streams with many repeats.

Deduplicates streams of integers, words and tuples (no key), and a case-insensitive
stream (key=str.lower), as when collecting the distinct values of a log or a column.
The streams are built from HARNESS_BENCH_SEED (fresh every round, the same for every
variant of a round): the answer changes with the seed, the amount of work does not.
"""
import os
import random
import zlib

from more_itertools import unique_everseen

SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))
rng = random.Random(SEED)

N = 40000
REPS = 50
vocab = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randrange(2, 8))) for _ in range(600)]
raw = rng.randbytes(2 * N)
ints = [raw[i] * 6 + raw[i + 1] % 6 for i in range(0, 2 * N, 2)]
words = [vocab[(x * 7) % len(vocab)] for x in ints]
pairs = list(zip(ints[: N // 2], ints[N // 2:]))
pairs = [(a % 40, b % 40) for a, b in pairs]
mixed_case = [w.upper() if i % 3 == 0 else w for i, w in enumerate(words[: N // 4])]

crc = 0
total = 0
for rep in range(REPS):
    # Rotate the streams each round so that every pass sees a different order.
    k = rep * 997 % N
    for stream, key in (
        (ints[k:] + ints[:k], None),
        (words[k:] + words[:k], None),
        (pairs, None),
        (mixed_case, str.lower),
    ):
        out = list(unique_everseen(stream, key))
        total += len(out)
        crc = zlib.crc32(repr(out).encode(), crc)
print("distinct items: %d" % total)
print("crc: %08x" % crc)
