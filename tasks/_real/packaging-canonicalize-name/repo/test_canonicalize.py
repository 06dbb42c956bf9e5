"""Correctness test for packaging.utils.canonicalize_name (exit 0 = correct)."""
import re

from packaging.utils import InvalidName, canonicalize_name, is_normalized_name


def reference(name):
    # PEP 503.
    return re.sub(r"[-_.]+", "-", name).lower()


def main():
    cases = {
        "foo": "foo",
        "Foo": "foo",
        "FOO": "foo",
        "foo-bar": "foo-bar",
        "foo_bar": "foo-bar",
        "foo.bar": "foo-bar",
        "Foo.Bar_Baz-Qux": "foo-bar-baz-qux",
        "foo--bar": "foo-bar",
        "foo__bar": "foo-bar",
        "foo._-bar": "foo-bar",
        "foo-----bar": "foo-bar",
        "foo---_..--bar": "foo-bar",
        "-foo-": "-foo-",
        "_foo_": "-foo-",
        "...": "-",
        "": "",
        "a": "a",
        "1.0": "1-0",
        "zope.interface": "zope-interface",
        "Django_REST-framework": "django-rest-framework",
        "ÄÖÜ": "äöü",
    }
    for name, expected in cases.items():
        got = canonicalize_name(name)
        assert got == expected, (name, got, expected)
        assert got == reference(name), name
        assert type(got) is str
    # validate=True accepts valid names and rejects invalid ones.
    for good in ["foo", "Foo.Bar", "foo_bar-baz", "A", "a1", "1a"]:
        assert canonicalize_name(good, validate=True) == reference(good)
    for bad in ["", "-foo", "foo-", "_foo", "foo.", "foo bar", "foo!"]:
        try:
            canonicalize_name(bad, validate=True)
        except InvalidName:
            pass
        else:
            raise AssertionError("no InvalidName for %r" % bad)
    # is_normalized_name.
    for name in ["foo", "foo-bar", "foo1-2bar", "a"]:
        assert is_normalized_name(name), name
    for name in ["Foo", "foo_bar", "foo--bar", "-foo", "foo-", "foo.bar", ""]:
        assert not is_normalized_name(name), name
    # Exhaustive agreement with the PEP 503 regex on short strings.
    import itertools
    for n in range(1, 6):
        for t in itertools.product("aB-_.", repeat=n):
            s = "".join(t)
            assert canonicalize_name(s) == reference(s), s
    print("ok")


if __name__ == "__main__":
    main()
