"""Correctness test for dedupe.dedupe / dedupe.count_duplicates (exit 0 = correct)."""
import random

from dedupe import count_duplicates, dedupe


def reference(items):
    """Straightforward set-based de-duplication, independent of the module under test."""
    seen = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def check(items, expected):
    original = list(items)
    got = dedupe(items)
    assert got == expected, "dedupe(%r) = %r, expected %r" % (items, got, expected)
    assert items == original, "dedupe modified its input"
    assert got is not items, "dedupe must return a new list"


def main():
    check([], [])
    check([7], [7])
    check([5, 5, 5, 5], [5])
    check([3, 1, 3, 2, 1], [3, 1, 2])
    check([9, 8, 7, 6], [9, 8, 7, 6])
    check([0, -1, 0, -1, 2], [0, -1, 2])
    check(["b", "a", "b", "c", "a"], ["b", "a", "c"])
    check([(1, 2), (2, 1), (1, 2)], [(1, 2), (2, 1)])
    assert count_duplicates([]) == 0
    assert count_duplicates([3, 1, 3, 2, 1]) == 2
    # A reasonably sized input against the reference.
    rng = random.Random(1234)
    big = [rng.randrange(500) for _ in range(20000)]
    check(big, reference(big))
    assert count_duplicates(big) == len(big) - len(set(big))
    words = ["w%d" % rng.randrange(300) for _ in range(5000)]
    check(words, reference(words))
    print("ok")


if __name__ == "__main__":
    main()
