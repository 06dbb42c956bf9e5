"""Benchmark: tomli.loads on heavily commented configuration files.

Each document looks like a shipped default config: sections and options, each preceded
by lines of documentation comments, some with trailing comments. The documents are
generated from HARNESS_BENCH_SEED (fresh every round, the same for every variant of a
round): the answer changes with the seed, the amount of work stays about the same.
"""
import hashlib
import os
import random

import tomli

SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))
rng = random.Random(SEED)

WORDS = (
    "the value of this option controls how many workers are started when the "
    "service boots default is fine for most setups see documentation for details "
    "set to zero to disable path timeout seconds retries cache size limit"
).split()


def sentence(n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def make_doc(n_sections):
    out = ["# Example configuration file", "# " + sentence(12), ""]
    for t in range(n_sections):
        out.append("# " + "-" * 70)
        out.append("# Section %d: %s" % (t, sentence(6)))
        out.append("# " + "-" * 70)
        out.append("[section_%d]" % t)
        for k in range(5):
            for _ in range(2):
                out.append("# " + sentence(10))
            kind = rng.randrange(5)
            if kind == 0:
                v = str(rng.randrange(-10**6, 10**6))
            elif kind == 1:
                v = '"%s"' % sentence(3)
            elif kind == 2:
                v = "[%s]" % ", ".join(str(rng.randrange(100)) for _ in range(rng.randrange(1, 6)))
            elif kind == 3:
                v = "true" if rng.random() < 0.5 else "false"
            else:
                v = "%.3f" % rng.uniform(0, 100)
            line = "option_%d = %s" % (k, v)
            if rng.random() < 0.3:
                line += "  # " + sentence(4)
            out.append(line)
        out.append("")
    return "\n".join(out) + "\n"


docs = [make_doc(20) for _ in range(20)]

digest = hashlib.sha256()
n_values = 0
for rep in range(6):
    for doc in docs:
        parsed = tomli.loads(doc)
        n_values += sum(len(section) for section in parsed.values())
        digest.update(repr(parsed).encode())
print("values: %d" % n_values)
print("sha256: %s" % digest.hexdigest())
