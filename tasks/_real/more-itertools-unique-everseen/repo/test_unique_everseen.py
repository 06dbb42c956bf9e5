"""Correctness test for more_itertools.unique_everseen (exit 0 = correct)."""
import random

from more_itertools import unique_everseen


def reference(iterable, key=None):
    seen = []
    out = []
    for x in iterable:
        k = x if key is None else key(x)
        if k not in seen:
            seen.append(k)
            out.append(x)
    return out


def main():
    assert list(unique_everseen("AAAABBBCCDAABBB")) == ["A", "B", "C", "D"]
    assert list(unique_everseen("ABBCcAD", str.lower)) == ["A", "B", "C", "D"]
    assert list(unique_everseen("ABBCcAD", key=str.lower)) == ["A", "B", "C", "D"]
    assert list(unique_everseen([])) == []
    assert list(unique_everseen(iter([]), key=len)) == []
    # Unhashable items (lists), alone and mixed with hashable ones, with and without key.
    iterable = ([1, 2], [2, 3], [1, 2])
    assert list(unique_everseen(iterable)) == [[1, 2], [2, 3]]
    assert list(unique_everseen(iterable, key=tuple)) == [[1, 2], [2, 3]]
    mixed = [1, [1], 1, "a", [1], {"x": 1}, "a", {"x": 1}, (1,), [2]]
    assert list(unique_everseen(mixed)) == [1, [1], "a", {"x": 1}, (1,), [2]]
    assert list(unique_everseen([{1}, {1}, {2}], key=frozenset)) == [{1}, {2}]
    # Equal keys of different types: the first one seen is kept.
    assert list(unique_everseen([1, 1.0, True, 2, 2.0])) == [1, 2]
    assert [type(x) for x in unique_everseen([1.0, 1, True])] == [float]
    # A key that returns None for everything keeps only the first item.
    assert list(unique_everseen([3, 4, 5], key=lambda x: None)) == [3]
    # Lazy: works on an infinite iterator.
    from itertools import count, islice
    assert list(islice(unique_everseen(x // 2 for x in count()), 5)) == [0, 1, 2, 3, 4]
    # The key is called once per item.
    calls = []
    list(unique_everseen("abcab", key=lambda c: calls.append(c) or c))
    assert calls == list("abcab"), calls
    # Agreement with a plain reference on random inputs.
    rng = random.Random(99)
    for _ in range(300):
        s = [rng.randrange(10) for _ in range(rng.randrange(0, 30))]
        assert list(unique_everseen(s)) == reference(s), s
        assert list(unique_everseen(s, key=lambda x: x % 4)) == reference(s, lambda x: x % 4), s
        lists = [[x] for x in s]
        assert list(unique_everseen(lists)) == reference(lists), s
    print("ok")


if __name__ == "__main__":
    main()
