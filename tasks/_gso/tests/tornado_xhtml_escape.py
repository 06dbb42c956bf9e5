import argparse
import json
import random
import timeit

import tornado.escape


def setup():
    """Text as templates escape it: strings full of the characters XHTML escapes (no
    single quote: 6.4 writes it &#x27;, 6.3 &#39;, and GSO's tests pass on both)."""
    rng = random.Random(7)
    alphabet = "abcdefgh <>&\" xyz0123"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(20, 400))) for _ in range(60000)]


def experiment(texts):
    return [tornado.escape.xhtml_escape(t) for t in texts]


def store_result(result, filename):
    with open(filename, "w") as f:
        json.dump(result, f)


def load_result(filename):
    with open(filename) as f:
        return json.load(f)


def check_equivalence(reference, current):
    assert len(reference) == len(current), "number of headers differs"
    for ref, cur in zip(reference, current):
        assert ref == cur, "a parsed cookie differs from the reference"


def run_test(eqcheck: bool = False, reference: bool = False, prefix: str = "") -> float:
    headers = setup()
    execution_time, result = timeit.timeit(lambda: experiment(headers), number=1)
    filename = f"{prefix}_result.json" if prefix else "reference_result.json"
    if reference:
        store_result(result, filename)
    if eqcheck:
        check_equivalence(load_result(filename), result)
    return execution_time


timeit.template = """
def inner(_it, _timer{init}):
    {setup}
    _t0 = _timer()
    for _i in _it:
        retval = {stmt}
    _t1 = _timer()
    return _t1 - _t0, retval
"""


def main():
    parser = argparse.ArgumentParser(description="Measure performance of API.")
    parser.add_argument("output_file", type=str, help="File to append timing results to.")
    parser.add_argument("--eqcheck", action="store_true", help="Enable equivalence checking")
    parser.add_argument("--reference", action="store_true", help="Store result as reference instead of comparing")
    parser.add_argument("--file_prefix", type=str, help="Prefix for any file where reference results are stored")
    args = parser.parse_args()
    execution_time = run_test(args.eqcheck, args.reference, args.file_prefix)
    with open(args.output_file, "a") as f:
        f.write(f"Execution time: {execution_time:.6f}s\n")


if __name__ == "__main__":
    main()
