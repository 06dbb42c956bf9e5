"""Prime counting."""


def is_prime(k):
    """Return True if the integer k is prime (trial division)."""
    if k < 2:
        return False
    d = 2
    while d * d <= k:
        if k % d == 0:
            return False
        d += 1
    return True


def count_primes(n):
    """Return the number of primes p with p < n."""
    count = 0
    for k in range(n):
        if is_prime(k):
            count += 1
    return count
