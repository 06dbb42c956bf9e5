"""Correctness test for wordfreq.top_words / wordfreq.normalize (exit 0 = correct)."""
import random

from wordfreq import normalize, top_words


def reference(text, k):
    """Independent implementation: count normalized words, sort, cut."""
    counts = {}
    for token in text.split():
        word = "".join(ch for ch in token.lower() if ch.isalnum())
        if word:
            counts[word] = counts.get(word, 0) + 1
    return sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))[:k]


def check(text, k, expected):
    got = top_words(text, k)
    assert got == expected, "top_words(%r, %r) = %r, expected %r" % (text[:60], k, got, expected)


def main():
    assert normalize("Hello,") == "hello"
    assert normalize("(x-ray)") == "xray"
    assert normalize("...") == ""
    check("", 5, [])
    check("   \n\t ", 5, [])
    check("... !!! --", 3, [])
    check("a", 0, [])
    check("b a b", 10, [("b", 2), ("a", 1)])
    # Ties are broken alphabetically; case and punctuation are ignored.
    check("The cat. the Dog, THE cat? dog! eel", 3, [("the", 3), ("cat", 2), ("dog", 2)])
    check("zeta alpha mu", 2, [("alpha", 1), ("mu", 1)])
    check("x\ny\tx  y\r\nx", 5, [("x", 3), ("y", 2)])
    # A reasonably sized input against the reference.
    rng = random.Random(99)
    vocab = ["w%d" % i for i in range(150)] + ["W%d," % i for i in range(50)] + ["(w%d)" % i for i in range(50)] + ["--", "?!"]
    text = " ".join(rng.choice(vocab) + rng.choice(["", "", ".", ";"]) for _ in range(8000))
    for k in (1, 10, 500):
        check(text, k, reference(text, k))
    print("ok")


if __name__ == "__main__":
    main()
