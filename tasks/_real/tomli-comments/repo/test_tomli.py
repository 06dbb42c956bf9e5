"""Correctness test for tomli.loads, with the focus on comments (exit 0 = correct)."""
from datetime import date, datetime, time, timezone

import tomli

DOC = '''\
# A leading comment
# another one, with "quotes" and 'apostrophes' and [brackets] = signs
title = "TOML # not a comment"   # trailing comment
literal = 'C:\\path # still not a comment'
n = 42#no space before the hash
neg = -17
f = 3.25
big = 1e3
yes = true
no = false
d = 1979-05-27
dt = 1979-05-27T07:32:00Z
t = 07:32:00
arr = [ # comment after bracket
  1, # one
  2, # two
  # a comment line inside an array
  3,
] # after the array
nested = [[1, 2], ["a", "b"]]
inline = { x = 1, y = "two" }
ml = """
first # not a comment
second"""
ml_lit = \'\'\'
raw \\n # kept\'\'\'
#comment directly after a value line

[table] # comment after a table header
key = "value"
	# indented comment with a tab
  # indented comment with spaces

[table.sub]
k = 1

[[items]] # comment after an array-of-tables header
name = "a"

[[items]]
name = "b"
# comment at the end of the document without a newline'''

EXPECTED = {
    "title": "TOML # not a comment",
    "literal": "C:\\path # still not a comment",
    "n": 42,
    "neg": -17,
    "f": 3.25,
    "big": 1000.0,
    "yes": True,
    "no": False,
    "d": date(1979, 5, 27),
    "dt": datetime(1979, 5, 27, 7, 32, 0, tzinfo=timezone.utc),
    "t": time(7, 32, 0),
    "arr": [1, 2, 3],
    "nested": [[1, 2], ["a", "b"]],
    "inline": {"x": 1, "y": "two"},
    "ml": "first # not a comment\nsecond",
    "ml_lit": "raw \\n # kept",
    "table": {"key": "value", "sub": {"k": 1}},
    "items": [{"name": "a"}, {"name": "b"}],
}


def expect_error(src):
    try:
        tomli.loads(src)
    except tomli.TOMLDecodeError:
        return
    raise AssertionError("no TOMLDecodeError for %r" % src)


def main():
    got = tomli.loads(DOC)
    assert got == EXPECTED, got
    # The same document with Windows newlines.
    assert tomli.loads(DOC.replace("\n", "\r\n")) == EXPECTED
    # Documents made only of comments and blank lines.
    assert tomli.loads("") == {}
    assert tomli.loads("#") == {}
    assert tomli.loads("# just a comment") == {}
    assert tomli.loads("# a\n\n   # b\n#c\n") == {}
    assert tomli.loads("a = 1 #") == {"a": 1}
    assert tomli.loads("a = 1 # \u00e9\u00e8 unicode \U0001F600 in a comment\n") == {"a": 1}
    # A tab is allowed in a comment, other control characters are not.
    assert tomli.loads("a = 1 # tab\there\n") == {"a": 1}
    for bad in ("# nul \x00 here\n", "a = 1 # bell \x07\n", "# del \x7f\n", "x = 2\n# \x1f\n"):
        expect_error(bad)
    # Not comments, and broken documents.
    expect_error("a = 1 b = 2")
    expect_error("a = # no value\n")
    expect_error("[table # unclosed header\n")
    expect_error("a = 1\na = 2\n")
    # Many comment lines in a row, long comments.
    src = "".join("# line %d %s\n" % (i, "x" * (i % 50)) for i in range(500)) + "k = 'v'\n"
    assert tomli.loads(src) == {"k": "v"}
    print("ok")


if __name__ == "__main__":
    main()
