"""Correctness test for pairsum.count_pairs (exit 0 = correct)."""
import random

from pairsum import count_pairs


def reference(nums, target):
    """Brute force over i < j, independent of the module under test."""
    n = len(nums)
    return sum(1 for i in range(n) for j in range(i + 1, n) if nums[i] + nums[j] == target)


def check(nums, target, expected):
    original = list(nums)
    got = count_pairs(nums, target)
    assert got == expected, "count_pairs(%r, %r) = %r, expected %r" % (nums[:20], target, got, expected)
    assert nums == original, "count_pairs modified its input"


def main():
    check([], 0, 0)
    check([5], 10, 0)              # a single element never pairs with itself
    check([5, 5], 10, 1)
    check([1, 1, 1, 1], 2, 6)      # every pair of equal values counts
    check([1, 2, 3, 4, 5], 6, 2)   # (1, 5) and (2, 4); 3 + 3 needs two 3s
    check([3, 3, 3], 6, 3)
    check([1, 2, 3], 100, 0)
    check([-2, 7, 0, 2, -7, 9], 0, 2)
    check([0, 0, 0], 0, 3)
    check([4, -1, 6, 1, 6], 5, 3)
    # A reasonably sized input against the reference.
    rng = random.Random(7)
    nums = [rng.randrange(-50, 50) for _ in range(400)]
    for target in (0, 7, -33, 99, 500):
        check(nums, target, reference(nums, target))
    print("ok")


if __name__ == "__main__":
    main()
