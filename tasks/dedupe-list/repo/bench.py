"""Benchmark: de-duplicate a long list of ids drawn from a small set of values."""
from dedupe import dedupe

DISTINCT = 512
ROUNDS = 380

# Every round lists the same DISTINCT ids, in a scrambled order.
ids = [1000 + (i * 37) % DISTINCT for i in range(DISTINCT)] * ROUNDS
result = dedupe(ids)
checksum = sum((i + 1) * v for i, v in enumerate(result))
print("distinct=%d checksum=%d" % (len(result), checksum))
