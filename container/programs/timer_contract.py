"""The timer's side of the contract of its result line (timer_result.schema.json, beside
this file; the harness reads the line against the same file: crates/sandbox/src/eval/contract.rs).

Every result timed_run.py prints in timed mode is checked here first: a field missing, one
the schema does not list, or one of another type is the harness's own failure, printed as a
harness error that names the field, never as a line the harness would read wrongly. The
line's prefix is the schema's. Importing this module does nothing: the schema is read on
first use.
"""
import json
import math
import os
import sys

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "timer_result.schema.json")
TYPES = ("integer", "number", "string", "boolean", "null", "array", "object")

_schema = None


def schema():
    """The schema, read once (it is one of the harness's own files, beside this one)."""
    global _schema
    if _schema is None:
        with open(SCHEMA_PATH) as f:
            _schema = json.load(f)
    return _schema


def prefix():
    return schema()["prefix"]


def types_of(spec):
    t = spec["type"]
    return [t] if isinstance(t, str) else list(t)


def type_name(value):
    """The JSON type of a Python value as json.dumps writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number" if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def fits(value, types):
    name = type_name(value)
    return name in types or (name == "integer" and "number" in types)


def check_value(value, spec, path, problems):
    """Appends to `problems` what is wrong with `value` at `path` against the field `spec`."""
    types = types_of(spec)
    if not fits(value, types):
        problems.append('field "%s": expected %s, got %s' % (path, " or ".join(types), type_name(value)))
        return
    if isinstance(value, (list, tuple)):
        length = spec.get("length")
        if length is not None and len(value) != length:
            problems.append('field "%s": expected %d elements, got %d' % (path, length, len(value)))
        if "items" in spec:
            for i, item in enumerate(value):
                check_value(item, spec["items"], "%s[%d]" % (path, i), problems)
    elif isinstance(value, dict):
        if "fields" in spec:
            check_record(value, spec["fields"], path + ".", problems)
        elif "values" in spec:
            for key, item in value.items():
                if not isinstance(key, str):
                    problems.append('field "%s": a key that is not a string: %r' % (path, key))
                check_value(item, spec["values"], "%s.%s" % (path, key), problems)


def check_record(record, fields, at, problems):
    for name in record:
        if name not in fields:
            problems.append('field "%s%s": not in the schema' % (at, name))
    for name, spec in fields.items():
        if name in record:
            check_value(record[name], spec, at + name, problems)
        elif spec["required"]:
            problems.append('field "%s%s": missing' % (at, name))


def problems(result):
    """What is wrong with a result against the schema: a list of sentences, each naming its
    field (empty: the result keeps the contract)."""
    found = []
    if not isinstance(result, dict):
        return ["the result is not an object but %s" % type_name(result)]
    check_record(result, schema()["fields"], "", found)
    return found


def blank():
    """A result with no value in any field: null where the type allows it, else zero,
    false, an empty string, list or object. The base of the shapes that make no
    measurement (the simulator's early stop, a harness error), each field said."""
    empty = {"integer": 0, "number": 0.0, "string": "", "boolean": False}
    out = {}
    for name, spec in schema()["fields"].items():
        types = types_of(spec)
        if "null" in types:
            out[name] = None
        elif types[0] in empty:
            out[name] = empty[types[0]]
        else:
            out[name] = [] if types[0] == "array" else {}
    return out


def error_result(message):
    """The result of the timer's own failure."""
    result = blank()
    result["harness_error"] = message
    return result


def checked(result):
    """The result, or, when it breaks the contract, a harness error that names the fields."""
    found = problems(result)
    if not found:
        return result
    shown = "; ".join(found[:5]) + ("; and %d more" % (len(found) - 5) if len(found) > 5 else "")
    return error_result("the timer's result breaks its contract (timer_result.schema.json): %s" % shown)


def undecodable(value):
    """The first string in `value` (keys included) that holds bytes that are not UTF-8 (read
    with surrogateescape: a file name the code made), or None."""
    if isinstance(value, str):
        return value if any("\udc80" <= c <= "\udcff" for c in value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            found = undecodable(k) or undecodable(v)
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for v in value:
            found = undecodable(v)
            if found is not None:
                return found
    return None


def escaped(text):
    """A string with its bytes that are not UTF-8 written as \\xNN (the one way every line
    of the harness's carries them; the host reads valid JSON)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def carried(value):
    """`value` with every string escaped (see escaped)."""
    if isinstance(value, str):
        return escaped(value) if undecodable(value) is not None else value
    if isinstance(value, dict):
        return {carried(k): carried(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [carried(v) for v in value]
    return value


def line(result):
    """The result line, `PREFIX:NONCE JSON`, the nonce from the environment (which the code
    under test cannot read): valid JSON whatever bytes the code put into names or output."""
    nonce = os.environ.get("HARNESS_NONCE", "")
    text = json.dumps(carried(result))
    return "\n%s%s %s\n" % (prefix(), ":" + nonce if nonce else "", text)


def emit(result, out=None):
    """Prints the result line (see line)."""
    out = out or sys.stdout
    out.write(line(result))
    out.flush()
