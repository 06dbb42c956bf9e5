"""GSO's equivalence check of one result, run by the harness in base's container on base's
code: the test's own load_result and check_equivalence, base's stored result of the same
round as the reference (GSO's --reference), the variant's stored result as the current one.
GSO runs this inside the test's process, where base's reference is in the code's reach.

The variant's file is the variant's data, never its code, whatever the test's load_result
does with it (a pickle names any callable, a dill pickle reaches this program's globals, a
lazy npz unpickles later): it is loaded by a child process, where whatever it runs runs
apart from this one (which is not dumpable: no ptrace, no /proc/PID/mem), and hands back
plain data only (numbers, strings, containers, numpy arrays of plain dtypes,
pandas frames, series and indexes), as JSON. This process rebuilds that data, and base's
own result carried the same way, and compares the two with the test's check_equivalence;
from the child's start it imports and opens nothing (it ran the check once before, base's
result against itself, so what the check needs is loaded). A result that is not plain data
is not equivalent, said as such.

    exec python gso_check.py TEST.py   (HARNESS_REFERENCE_OUTPUT, HARNESS_OUTPUT; exec'd, so
                                        that no shell of the user above it holds the files)
    python gso_check.py --load TEST.py REF_FD FD  (the child: the file on FD, as JSON)
"""
import base64
import collections
import ctypes
import datetime
import decimal
import fractions
import importlib.util
import json
import math
import os
import resource
import subprocess
import sys

MAX_CARRIED = 256 << 20
PR_SET_DUMPABLE = 4


class NotPlain(Exception):
    pass


class CarriedNpz(dict):
    """An npz file's arrays, read whole: indexed by name, with `files` as numpy's has."""

    @property
    def files(self):
        return list(self)


def optional(name):
    return sys.modules.get(name)


def to_plain(v, depth=0):
    """`v` as JSON-able data, every value tagged with what it was."""
    if depth > 200:
        raise NotPlain("the result nests deeper than 200 levels")
    d = depth + 1
    if v is None or isinstance(v, (bool, str)):
        return v
    t = type(v)
    if t is int:
        return {"int": str(v)}
    if t is float:
        return {"float": repr(v)}
    if t is complex:
        return {"complex": [repr(v.real), repr(v.imag)]}
    if t is bytes:
        return {"bytes": base64.b64encode(v).decode()}
    if t is list:
        return {"list": [to_plain(x, d) for x in v]}
    if t is tuple:
        return {"tuple": [to_plain(x, d) for x in v]}
    if t is dict:
        return {"dict": [[to_plain(k, d), to_plain(x, d)] for k, x in v.items()]}
    if t in (set, frozenset):
        return {t.__name__: [to_plain(x, d) for x in v]}
    if t is CarriedNpz:
        return {"npz": [[k, to_plain(x, d)] for k, x in v.items()]}
    if t in (collections.Counter, collections.OrderedDict):
        return {t.__name__: [[to_plain(k, d), to_plain(x, d)] for k, x in v.items()]}
    if t in (datetime.datetime, datetime.date, datetime.time):
        return {t.__name__: v.isoformat()}
    if t is datetime.timedelta:
        return {"timedelta": [v.days, v.seconds, v.microseconds]}
    if t is decimal.Decimal:
        return {"decimal": str(v)}
    if t is fractions.Fraction:
        return {"fraction": [str(v.numerator), str(v.denominator)]}
    np, pd = optional("numpy"), optional("pandas")
    if np is not None and t is np.ndarray:
        return {"ndarray": array_plain(np, v, d)}
    if np is not None and t.__name__ == "NpzFile" and t.__module__.startswith("numpy"):
        # Read whole, here (its members load lazily): a dict of its arrays.
        return {"npz": [[k, to_plain(v[k], d)] for k in v.files]}
    if np is not None and isinstance(v, np.generic) and t.__module__ == "numpy":
        return {"npscalar": array_plain(np, np.asarray(v), d)}
    if pd is not None:
        if t is pd.DataFrame:
            return {"dataframe": {"columns": to_plain(v.columns, d), "index": to_plain(v.index, d),
                                  "data": [to_plain(v.iloc[:, i], d) for i in range(v.shape[1])]}}
        if t is pd.Series:
            return {"series": {"values": array_plain(np, v.to_numpy(dtype=object), d),
                               "dtype": str(v.dtype), "index": to_plain(v.index, d),
                               "name": to_plain(v.name, d)}}
        if t is pd.RangeIndex:
            return {"rangeindex": [v.start, v.stop, v.step, to_plain(v.name, d)]}
        if t is pd.MultiIndex:
            return {"multiindex": {"tuples": to_plain(list(v), d), "names": to_plain(list(v.names), d)}}
        if t is pd.Index:
            return {"index": {"values": array_plain(np, v.to_numpy(dtype=object), d),
                              "dtype": str(v.dtype), "name": to_plain(v.name, d)}}
    raise NotPlain("a value of type %s.%s is not plain data" % (t.__module__, t.__qualname__))


def materialized(v):
    """`v`, with an npz file's members read now (numpy loads them lazily, on access)."""
    t = type(v)
    if t.__name__ == "NpzFile" and t.__module__.startswith("numpy"):
        return CarriedNpz((k, v[k]) for k in v.files)
    return v


def carried(v):
    """`v` as plain data, checked to rebuild into what it was (a carrier that lost a
    categorical's categories, an index level's dtype or a frame's attrs would make
    different results equal): NotPlain where it does not."""
    plain = to_plain(v)
    same(v, from_plain(plain), "the result")
    return plain


def same(a, b, where):
    """Raises NotPlain unless `b` is `a` rebuilt exactly (types, dtypes, values, order)."""
    if type(a) is not type(b):
        raise NotPlain("%s: a %s rebuilds as a %s" % (where, type(a).__name__, type(b).__name__))
    np, pd = optional("numpy"), optional("pandas")
    if pd is not None and isinstance(a, (pd.DataFrame, pd.Series, pd.Index)):
        try:
            if isinstance(a, pd.DataFrame):
                pd.testing.assert_frame_equal(a, b, check_exact=True, check_column_type=True,
                                              check_index_type=True, check_flags=True)
            elif isinstance(a, pd.Series):
                pd.testing.assert_series_equal(a, b, check_exact=True, check_index_type=True,
                                               check_flags=True)
            else:
                pd.testing.assert_index_equal(a, b, exact=True, check_exact=True, check_categorical=True)
        except AssertionError as e:
            raise NotPlain("%s: a pandas %s is not carried whole (%s)" % (where, type(a).__name__,
                                                                         str(e).splitlines()[0]))
        if getattr(a, "attrs", {}) != getattr(b, "attrs", {}):
            raise NotPlain("%s: a pandas %s's attrs are not carried" % (where, type(a).__name__))
        return
    if np is not None and isinstance(a, (np.ndarray, np.generic)):
        if a.dtype != b.dtype or np.shape(a) != np.shape(b) or \
                (a.dtype.kind != "O" and np.asarray(a).tobytes() != np.asarray(b).tobytes()):
            raise NotPlain("%s: an array of dtype %s is not carried whole" % (where, a.dtype))
        if a.dtype.kind == "O":
            for x, y in zip(np.asarray(a).reshape(-1).tolist(), np.asarray(b).reshape(-1).tolist()):
                same(x, y, where)
        return
    if isinstance(a, dict):
        if list(a) != list(b):
            raise NotPlain("%s: a dict's keys are not carried whole" % where)
        for k in a:
            same(k, next(x for x in b if x == k), where)
            same(a[k], b[k], where)
        return
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            raise NotPlain("%s: a %s's length is not carried" % (where, type(a).__name__))
        for x, y in zip(a, b):
            same(x, y, where)
        return
    if isinstance(a, float):
        if repr(a) != repr(b):
            raise NotPlain("%s: a float is not carried whole" % where)
        return
    if isinstance(a, (datetime.datetime, datetime.time)) and (a.tzinfo, getattr(a, "fold", 0)) != \
            (b.tzinfo, getattr(b, "fold", 0)):
        raise NotPlain("%s: a time's zone is not carried whole" % where)
    if not (a == b) and not (a != a and b != b):
        raise NotPlain("%s: a %s is not carried whole" % (where, type(a).__name__))


def array_plain(np, a, d):
    kind = a.dtype.kind
    if kind == "O":
        return {"shape": list(a.shape), "items": [to_plain(x, d) for x in a.reshape(-1).tolist()]}
    if kind not in "biufcUSMm" or a.dtype.fields is not None or a.dtype.subdtype is not None:
        raise NotPlain("an array of dtype %s is not plain data" % a.dtype)
    raw = np.ascontiguousarray(a).tobytes()
    return {"dtype": a.dtype.str, "shape": list(a.shape), "data": base64.b64encode(raw).decode(),
            "fortran": bool(a.flags.f_contiguous and not a.flags.c_contiguous)}


def from_plain(p):
    if p is None or isinstance(p, (bool, str)):
        return p
    if not isinstance(p, dict) or len(p) != 1:
        raise NotPlain("not carried data")
    (tag, v), = p.items()
    simple = {
        "int": lambda: int(v),
        "float": lambda: float(v),
        "complex": lambda: complex(float(v[0]), float(v[1])),
        "bytes": lambda: base64.b64decode(v),
        "list": lambda: [from_plain(x) for x in v],
        "tuple": lambda: tuple(from_plain(x) for x in v),
        "dict": lambda: {from_plain(k): from_plain(x) for k, x in v},
        "set": lambda: {from_plain(x) for x in v},
        "frozenset": lambda: frozenset(from_plain(x) for x in v),
        "Counter": lambda: collections.Counter({from_plain(k): from_plain(x) for k, x in v}),
        "npz": lambda: CarriedNpz((k, from_plain(x)) for k, x in v),
        "OrderedDict": lambda: collections.OrderedDict((from_plain(k), from_plain(x)) for k, x in v),
        "datetime": lambda: datetime.datetime.fromisoformat(v),
        "date": lambda: datetime.date.fromisoformat(v),
        "time": lambda: datetime.time.fromisoformat(v),
        "timedelta": lambda: datetime.timedelta(v[0], v[1], v[2]),
        "decimal": lambda: decimal.Decimal(v),
        "fraction": lambda: fractions.Fraction(int(v[0]), int(v[1])),
    }
    if tag in simple:
        return simple[tag]()
    np, pd = optional("numpy"), optional("pandas")
    if tag == "ndarray" and np is not None:
        return array_from(np, v)
    if tag == "npscalar" and np is not None:
        return array_from(np, v)[()]
    if pd is not None:
        if tag == "dataframe":
            columns = [from_plain(c) for c in v["data"]]
            frame = pd.concat(columns, axis=1) if columns else pd.DataFrame(index=from_plain(v["index"]))
            frame.columns = from_plain(v["columns"])
            frame.index = from_plain(v["index"])
            return frame
        if tag == "series":
            s = pd.Series(array_from(np, v["values"]), index=from_plain(v["index"]),
                          name=from_plain(v["name"]), dtype=object)
            return s.astype(v["dtype"]) if v["dtype"] != "object" else s
        if tag == "rangeindex":
            return pd.RangeIndex(int(v[0]), int(v[1]), int(v[2]), name=from_plain(v[3]))
        if tag == "multiindex":
            return pd.MultiIndex.from_tuples(from_plain(v["tuples"]), names=from_plain(v["names"]))
        if tag == "index":
            i = pd.Index(array_from(np, v["values"]), name=from_plain(v["name"]), dtype=object)
            return i.astype(v["dtype"]) if v["dtype"] != "object" else i
    raise NotPlain("carried data of kind %r cannot be rebuilt here" % tag)


def array_from(np, v):
    shape = tuple(int(n) for n in v["shape"])
    if "items" in v:
        a = np.empty(shape, dtype=object)
        flat = [from_plain(x) for x in v["items"]]
        if len(flat) != a.size:
            raise NotPlain("an object array's items do not fill its shape")
        for i, x in enumerate(flat):
            a.flat[i] = x
        return a
    dtype = np.dtype(v["dtype"])
    if dtype.kind not in "biufcUSMm" or dtype.fields is not None or dtype.subdtype is not None:
        raise NotPlain("an array of dtype %s is not plain data" % dtype)
    raw = base64.b64decode(v["data"])
    if len(raw) != dtype.itemsize * math.prod(shape):
        raise NotPlain("an array's bytes do not fill its shape")
    a = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    return np.asfortranarray(a) if v.get("fortran") else a


def load_test(path):
    spec = importlib.util.spec_from_file_location("gso_test_checked", path)
    test = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(test)
    return test


CALLS = {"exec", "import", "code.__new__", "function.__new__", "marshal.load", "marshal.loads",
         "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
         "subprocess.Popen", "ctypes.dlopen", "ctypes.dlsym", "socket.connect", "socket.bind"}


def real_name(module, name):
    """A pickle's (module, name) as Python 3 resolves it (protocol 2 names __builtin__)."""
    import _compat_pickle
    module, name = str(module), str(name)
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def child_main(test_path, ref_fd, fd):
    """The variant's file, loaded by the test's load_result, as carried data on stdout.
    Whatever a load runs runs here, apart from the judge; and so that the variant's file
    cannot have this process compute base's answer (untimed) with base's code, its load may
    resolve only the names loading base's own result resolved (a builtin only if it is a
    data type) and may run, import or start nothing."""
    import builtins
    test = load_test(test_path)
    resolved, armed, refused = set(), [False], []

    def audit(event, args):
        if not armed[0]:
            if event == "pickle.find_class":
                resolved.add(real_name(args[0], args[1]))
            return
        why = None
        if event == "pickle.find_class":
            module, name = real_name(args[0], args[1])
            data_builtin = module != "builtins" or (
                isinstance(getattr(builtins, name, None), type) and name != "type")
            if (module, name) not in resolved or not data_builtin:
                why = "its stored result names %s.%s, which base's does not" % (module, name)
        elif event in CALLS:
            why = "loading its stored result raised the audit event %r" % event
        if why:
            refused.append(why)
            raise PermissionError(why)
    sys.addaudithook(audit)
    test.load_result("/dev/fd/%d" % ref_fd)
    armed[0] = True
    try:
        value = materialized(test.load_result("/dev/fd/%d" % fd))
        armed[0] = False
        answer = {"value": carried(value)}
    except NotPlain as e:
        answer = {"not_plain": str(e)}
    except Exception as e:
        answer = {"failed": "%s: %s" % (type(e).__name__, e)}
    if refused:
        answer = {"failed": refused[0] + ": a stored result is data, not code"}
    sys.stdout.write(json.dumps(answer))
    return 0


def no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def load_variant(test_path):
    """The child's answer: ("value", plain) or ("not_plain", why) or ("failed", why)."""
    ref_fd = os.open(os.environ["HARNESS_REFERENCE_OUTPUT"], os.O_RDONLY)
    fd = os.open(os.environ["HARNESS_OUTPUT"], os.O_RDONLY)
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--load", test_path,
                              str(ref_fd), str(fd)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(ref_fd, fd),
                             preexec_fn=no_core)
    os.close(fd)
    os.close(ref_fd)
    lock_down()
    out, err = child.communicate()
    if child.returncode != 0 or len(out) > MAX_CARRIED:
        tail = err.decode("utf-8", "replace")[-2000:]
        return "failed", "loading the variant's stored result failed (exit %s): %s" % (child.returncode, tail)
    try:
        answer = json.loads(out)
    except ValueError:
        return "failed", "the variant's stored result was not carried back as data"
    if not isinstance(answer, dict):
        return "failed", "the variant's stored result was not carried back as data"
    if "not_plain" in answer:
        return "not_plain", str(answer["not_plain"])
    if "failed" in answer:
        return "failed", "loading the variant's stored result failed: %s" % answer["failed"]
    return "value", answer.get("value")


def lock_down():
    """From here on this process imports and opens nothing."""
    def refuse(event, args):
        if event in ("import", "open", "exec", "compile"):
            raise PermissionError("the check may not %s anything once the variant's file is loaded (%r)"
                               % (event, args[:1]))
    sys.addaudithook(refuse)


def parent_holds_the_reference():
    """Whether this process's parent, readable by this user, holds base's result open (a
    shell of the sandbox user that did not exec the check): the child could read it there."""
    ref = os.stat(os.environ["HARNESS_REFERENCE_OUTPUT"])
    fds = "/proc/%d/fd" % os.getppid()
    try:
        names = os.listdir(fds)
    except OSError:
        return False
    for n in names:
        try:
            st = os.stat(os.path.join(fds, n))
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (ref.st_dev, ref.st_ino):
            return True
    return False


def main(test_path):
    if sys.flags.optimize:
        print("the check does not run with assertions off (PYTHONOPTIMIZE)", file=sys.stderr)
        return 1
    if parent_holds_the_reference():
        print("the check's parent process holds base's result open, readable by its user "
              "(run the check with exec)", file=sys.stderr)
        return 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        print("cannot make the check undumpable", file=sys.stderr)
        return 1
    test = load_test(test_path)
    try:
        reference = from_plain(carried(materialized(
            test.load_result(os.environ["HARNESS_REFERENCE_OUTPUT"]))))
    except NotPlain as e:
        print("base's own stored result cannot be carried as data (%s): the variant's cannot be "
              "checked apart from the code that loads it" % e, file=sys.stderr)
        return 1
    # Whatever the check loads lazily, it loads now, on base's result against itself.
    if not checked(test, reference, lambda: from_plain(to_plain(reference)),
                   "the test's check refuses base's own result carried as data: "):
        return 1
    kind, value = load_variant(test_path)
    if kind != "value":
        print(value if kind == "failed" else "the variant's stored result is not plain data: %s" % value,
              file=sys.stderr)
        return 1
    if not checked(test, reference, lambda: from_plain(value), ""):
        return 1
    print("equivalent to base's result")
    return 0


def checked(test, reference, current, prefix):
    """The test's check_equivalence, its failure said in one line (no traceback: this
    process opens no source file once locked down)."""
    try:
        test.check_equivalence(reference, current())
        return True
    except Exception as e:
        print("%s%s: %s" % (prefix, type(e).__name__, e), file=sys.stderr)
        return False


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--load":
        sys.exit(child_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    sys.exit(main(sys.argv[1]))
