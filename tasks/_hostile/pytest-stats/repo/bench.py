"""Benchmark: the variance of a list of readings drawn from HARNESS_BENCH_SEED."""
import os
import random

import stats

rng = random.Random(int(os.environ.get("HARNESS_BENCH_SEED", "0")))
readings = [rng.randrange(1000) for _ in range(1500)]
print("variance: %.6f" % stats.variance(readings))
