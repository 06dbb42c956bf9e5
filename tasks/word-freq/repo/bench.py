"""Benchmark: the 10 most frequent words of a generated text."""
import os
import random

from wordfreq import top_words

# A fresh seed every round from the harness (the same for base, human and every sample).
# It deals the counts 1..5 out to the 300 words (about 10**200 ways), so the top words
# change with it: no patch can carry a table of answers to print instead of computing one.
SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))
rng = random.Random(SEED)

VOCAB = 300
LINES = 68

# Tokens come in several spellings ("Word7", "word7,", "(word7)", ...) that
# all normalize to the same word; each word appears 1 to 5 times per line, as dealt.
forms = ["%s", "%s,", "%s.", "(%s)", "%s;"]
counts = [1 + i % 5 for i in range(VOCAB)]
rng.shuffle(counts)
tokens = []
for i in range(VOCAB):
    word = "word%d" % i
    if i % 3 == 0:
        word = word.capitalize()
    tokens.extend([forms[i % 5] % word] * counts[i])
line = " ".join(tokens[(j * 7) % len(tokens)] for j in range(len(tokens)))
text = "\n".join([line] * LINES)

print(" ".join("%s=%d" % pair for pair in top_words(text, 10)))
