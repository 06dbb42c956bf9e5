"""Order-preserving de-duplication of lists."""


def dedupe(items):
    """Return the distinct values of `items` in order of first occurrence.

    The input list is not modified; a new list is returned.
    """
    # Keep the first occurrence of every value.
    result = []
    for item in items:
        if item not in result:
            result.append(item)
    return result


def count_duplicates(items):
    """Return how many elements of `items` repeat an earlier value."""
    return len(items) - len(dedupe(items))
