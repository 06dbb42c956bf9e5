"""Correctness test for primes.count_primes / primes.is_prime (exit 0 = correct)."""
from primes import count_primes, is_prime


def reference_count(n):
    """Plain sieve of Eratosthenes, kept independent of the module under test."""
    if n < 3:
        return 0
    flags = [True] * n
    flags[0] = flags[1] = False
    for i in range(2, n):
        if i * i >= n:
            break
        if flags[i]:
            for j in range(i * i, n, i):
                flags[j] = False
    return sum(flags)


def main():
    # Edge cases: nothing below 0, 1 or 2; 2 is the first prime.
    for n, expected in [(-5, 0), (0, 0), (1, 0), (2, 0), (3, 1), (4, 2), (5, 2),
                        (6, 3), (10, 4), (11, 4), (12, 5), (100, 25), (1000, 168)]:
        got = count_primes(n)
        assert got == expected, "count_primes(%d) = %r, expected %d" % (n, got, expected)
    # Squares of primes and their neighbours are classic off-by-one traps.
    for n in [8, 9, 10, 24, 25, 26, 48, 49, 50, 120, 121, 122, 168, 169, 170, 289, 290]:
        got = count_primes(n)
        assert got == reference_count(n), "count_primes(%d) = %r, expected %d" % (n, got, reference_count(n))
    # A reasonably sized input against the reference.
    n = 20000
    got = count_primes(n)
    assert got == reference_count(n) == 2262, "count_primes(%d) = %r" % (n, got)
    # is_prime on small values.
    small = [k for k in range(-3, 60) if is_prime(k)]
    assert small == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59], small
    print("ok")


if __name__ == "__main__":
    main()
