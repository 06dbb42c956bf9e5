"""Pair counting."""


def count_pairs(nums, target):
    """Return the number of index pairs (i, j) with i < j and nums[i] + nums[j] == target."""
    count = 0
    n = len(nums)
    for i in range(n):
        for j in range(n):
            if i != j and nums[i] + nums[j] == target:
                count += 1
    # Every unordered pair was seen twice, as (i, j) and as (j, i).
    return count // 2
