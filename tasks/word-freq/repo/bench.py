"""Benchmark: the 10 most frequent words of a generated text."""
import os

from wordfreq import top_words

# A fresh seed every round from the harness (the same for base, human and every sample),
# so a patch cannot print an answer it remembered instead of computing it.
SEED = int(os.environ.get("HARNESS_BENCH_SEED", "0"))

VOCAB = 300
LINES = 68

# Tokens come in several spellings ("Word7", "word7,", "(word7)", ...) that
# all normalize to the same word; word i appears in proportion to 1 + (i + SEED) % 5.
forms = ["%s", "%s,", "%s.", "(%s)", "%s;"]
tokens = []
for i in range(VOCAB):
    word = "word%d" % i
    if i % 3 == 0:
        word = word.capitalize()
    tokens.extend([forms[i % 5] % word] * (1 + (i + SEED) % 5))
line = " ".join(tokens[(j * 7) % len(tokens)] for j in range(len(tokens)))
text = "\n".join([line] * LINES)

print(" ".join("%s=%d" % pair for pair in top_words(text, 10)))
