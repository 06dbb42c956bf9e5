"""Correctness test for more_itertools.all_equal (exit 0 = correct)."""
from more_itertools import all_equal


def main():
    # Empty and one-element inputs are trivially uniform.
    for it in ([], (), "", iter([]), [None], "a", [[1, 2]], range(1)):
        assert all_equal(it) is True, it
    # Sequences, strings, iterators and generators.
    assert all_equal("aaaa") is True
    assert all_equal("aaab") is False
    assert all_equal("baaa") is False
    assert all_equal([1, 1, 1, 1.0, True]) is True
    assert all_equal([1, 1, 2, 1]) is False
    assert all_equal(iter([3] * 100)) is True
    assert all_equal(x for x in [3] * 99 + [4]) is False
    assert all_equal(range(2)) is False
    assert all_equal([(1, 2)] * 5) is True
    assert all_equal([[1], [1], [1]]) is True
    assert all_equal([[1], [1], [2]]) is False
    # key.
    assert all_equal("AaaA", key=str.casefold) is True
    assert all_equal("AaaB", key=str.casefold) is False
    assert all_equal([1, 2, 3], key=lambda x: x < 10) is True
    assert all_equal([1, 2, 30], key=lambda x: x < 10) is False
    assert all_equal([], key=len) is True
    # Must return a real bool, and stop early on an infinite iterator that differs.
    from itertools import count
    assert all_equal(count()) is False
    # The result agrees with a plain reference on many small inputs.
    import random
    rng = random.Random(1234)
    for _ in range(3000):
        n = rng.randrange(0, 8)
        s = [rng.randrange(2) for _ in range(n)]
        expected = len(set(s)) <= 1
        assert all_equal(s) is expected, s
        assert all_equal(iter(s)) is expected, s
        assert all_equal(s, key=lambda x: x % 1) is True, s
    print("ok")


if __name__ == "__main__":
    main()
