"""Word frequency counting."""


def normalize(token):
    """Lower-case `token` and drop every character that is not a letter or digit."""
    return "".join(ch for ch in token.lower() if ch.isalnum())


def top_words(text, k=10):
    """Return the `k` most frequent words of `text` as (word, count) pairs.

    Words are the whitespace-separated tokens of `text` passed through
    normalize(); tokens that normalize to "" are ignored.  The result is
    ordered by decreasing count, ties broken alphabetically.
    """
    words = []
    for token in text.split():
        word = normalize(token)
        if word:
            words.append(word)
    distinct = []
    for word in words:
        if word not in distinct:
            distinct.append(word)
    pairs = [(word, words.count(word)) for word in distinct]
    pairs.sort(key=lambda pair: (-pair[1], pair[0]))
    return pairs[:k]
