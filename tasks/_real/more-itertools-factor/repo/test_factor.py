"""Correctness test for more_itertools.factor and totient (exit 0 = correct)."""
from math import prod

from more_itertools import factor, totient


def is_prime_ref(n):
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True


def main():
    assert list(factor(0)) == []
    assert list(factor(1)) == []
    assert list(factor(2)) == [2]
    assert list(factor(360)) == [2, 2, 2, 3, 3, 5]
    assert list(factor(97)) == [97]
    assert list(factor(2 ** 20)) == [2] * 20
    assert list(factor(211)) == [211]          # the first prime past small trial division
    assert list(factor(211 * 211)) == [211, 211]
    assert list(factor(209 * 211)) == [11, 19, 211]
    assert list(factor(223 * 227)) == [223, 227]
    assert list(factor(223 * 227 * 229)) == [223, 227, 229]
    assert list(factor(999983)) == [999983]     # largest prime below 10**6
    assert list(factor(999983 * 999979)) == [999979, 999983]
    assert list(factor(2 * 3 * 5 * 7 * 11 * 13 * 17 * 19 * 23)) == [2, 3, 5, 7, 11, 13, 17, 19, 23]
    assert list(factor(1000003 ** 2)) == [1000003, 1000003]
    # Every n up to 3000: ascending primes whose product is n.
    for n in range(2, 3000):
        fs = list(factor(n))
        assert prod(fs) == n, (n, fs)
        assert fs == sorted(fs), (n, fs)
        assert all(is_prime_ref(p) for p in fs), (n, fs)
    # A block of larger numbers.
    for n in range(10 ** 6, 10 ** 6 + 300):
        fs = list(factor(n))
        assert prod(fs) == n and fs == sorted(fs), (n, fs)
        assert all(is_prime_ref(p) for p in fs), (n, fs)
    # totient.
    assert totient(1) == 1
    assert totient(9) == 6
    assert totient(12) == 4
    assert totient(97) == 96
    assert totient(2 ** 10) == 512
    assert totient(999983 * 999979) == 999982 * 999978
    from math import gcd
    for n in range(1, 300):
        assert totient(n) == sum(1 for k in range(1, n + 1) if gcd(k, n) == 1), n
    print("ok")


if __name__ == "__main__":
    main()
