"""Benchmark: de-duplicate a long list of ids drawn from a small set of values."""
import os

from dedupe import dedupe

# A fresh seed every round from the harness (the same for base, human and every sample),
# so a patch cannot print an answer it remembered instead of computing it.
SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))

DISTINCT = 512
ROUNDS = 380

# Every round lists the same DISTINCT ids, in a scrambled order.
ids = [1000 + (i * 37 + SEED) % DISTINCT for i in range(DISTINCT)] * ROUNDS
result = dedupe(ids)
checksum = sum((i + 1) * v for i, v in enumerate(result))
print("distinct=%d checksum=%d" % (len(result), checksum))
