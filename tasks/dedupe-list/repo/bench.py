"""Benchmark: de-duplicate a long list of ids drawn from a small set of values."""
import os
import random

from dedupe import dedupe

# A fresh seed every round from the harness (the same for base, human and every sample).
# It picks the order of the ids, one of 512! orders, and the checksum depends on it: no
# patch can carry a table of answers to print instead of computing one.
SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))
rng = random.Random(SEED)

DISTINCT = 512
ROUNDS = 380

# Every round lists the same DISTINCT ids, in the seed's order.
values = list(range(1000, 1000 + DISTINCT))
rng.shuffle(values)
ids = values * ROUNDS
result = dedupe(ids)
checksum = sum((i + 1) * v for i, v in enumerate(result))
print("distinct=%d checksum=%d" % (len(result), checksum))
