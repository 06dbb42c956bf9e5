"""Benchmark: packaging.utils.canonicalize_name over a package index listing.

Normalizes (PEP 503) the project names of a simple-index page several times over, as
resolvers and index clients do for every name they compare. The names are generated
from HARNESS_BENCH_SEED (fresh every round, the same for every variant of a round), so
the answer changes with the seed while the amount of work stays about the same.
"""
import hashlib
import os
import random

from packaging.utils import canonicalize_name

SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))
rng = random.Random(SEED)

PARTS = ["django", "Flask", "py", "requests", "NumPy", "zope", "interface", "sphinx",
         "contrib", "jsonschema", "typing", "extensions", "azure", "mgmt", "google",
         "cloud", "storage", "pytest", "cov", "backports", "tzdata", "ruamel", "yaml",
         "oslo", "config", "plone", "app", "X", "lib", "2"]
SEPS = ["-", "_", ".", "", "-", "--", "_-", "."]

names = []
for _ in range(5000):
    k = rng.randrange(1, 5)
    name = rng.choice(PARTS)
    for _ in range(k):
        name += rng.choice(SEPS) + rng.choice(PARTS)
    if rng.random() < 0.3:
        name = name.upper() if rng.random() < 0.3 else name.title()
    names.append(name)

digest = hashlib.sha256()
distinct = set()
for rep in range(100):
    canon = list(map(canonicalize_name, names))
    if rep == 0:
        distinct.update(canon)
        digest.update("\n".join(canon).encode())
    else:
        digest.update(canon[rep].encode())
print("distinct normalized names: %d" % len(distinct))
print("sha256: %s" % digest.hexdigest())
