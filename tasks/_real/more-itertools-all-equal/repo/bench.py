"""Benchmark: more_itertools.all_equal on many short sequences (rows, words, tuples)
and a few long columns.

The inputs are built from HARNESS_BENCH_SEED (a fresh seed every round, the same for
base, human and every sample), so the answer changes with the seed while the amount of
work stays the same.
"""
import os
import random
import zlib

from more_itertools import all_equal

SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))
rng = random.Random(SEED)
REPS = 180

# 4000 short sequences of mixed kinds: about half are uniform, the rest differ somewhere.
seqs = []
for i in range(4000):
    n = rng.randrange(0, 9)
    kind = i % 3
    if kind == 0:
        v = rng.randrange(5)
        s = [v] * n
        if n and rng.random() < 0.5:
            s[rng.randrange(n)] = v + 1
    elif kind == 1:
        c = rng.choice("abcXYZ")
        s = c * n
        if n and rng.random() < 0.5:
            k = rng.randrange(n)
            s = s[:k] + c.swapcase() + s[k + 1:]
    else:
        v = (rng.randrange(3), rng.randrange(3))
        s = tuple([v] * n)
        if n and rng.random() < 0.5:
            s = s[:-1] + ((v[0] + 1, v[1]),)
    seqs.append(s)

words = ["".join(rng.choice("aA") for _ in range(rng.randrange(1, 7))) for _ in range(500)]
fold = [str.casefold] * len(words)

# A few long columns of a table: constant ones and ones that change near the end.
columns = []
for c in range(4):
    col = [rng.randrange(3)] * 20000
    if rng.random() < 0.5:
        col[-1 - rng.randrange(50)] += 1
    columns.append(col)

uniform = 0
crc = 0
for rep in range(REPS):
    flags = list(map(all_equal, seqs))
    flags += map(all_equal, words, fold)
    flags += map(all_equal, columns)
    uniform += sum(flags)
    crc = zlib.crc32(bytes(flags), crc)
print("uniform sequences: %d" % uniform)
print("crc: %08x" % crc)
