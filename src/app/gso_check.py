"""GSO's equivalence check of one result, run by the harness in base's container on
base's code: the test's own load_result and check_equivalence, base's stored result of the
same round as the reference (GSO's --reference), the variant's stored result as the current
one. GSO runs this inside the test's process, where base's reference is in the code's reach.

The variant's file is the variant's data, never its code: a stored result that unpickles
(pickle, dill, joblib, torch.load, np.load(allow_pickle), pd.read_pickle) could otherwise run
what the variant wrote into it here, and pass. While it loads, an audit hook lets the
unpickler resolve only names that loading base's result resolved (base's code made that file;
a builtin only if it is a data type), and refuses anything that makes, runs or imports code,
opens another file or starts a process: the load fails, and the pair is not equivalent."""
import builtins
import importlib.util
import os
import sys

CODE_EVENTS = {"exec", "compile", "import", "code.__new__", "function.__new__",
               "marshal.load", "marshal.loads", "os.system", "os.exec", "os.posix_spawn",
               "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen", "ctypes.dlopen",
               "ctypes.dlsym", "ctypes.cdata", "socket.connect", "socket.bind"}


class NotData(Exception):
    pass


resolved = set()
guard = {"file": None}
refused = []


def name_allowed(module, name):
    if (module, name) not in resolved:
        return False
    if module == "builtins":
        return isinstance(getattr(builtins, name, None), type) and name != "type"
    return True


def refusal(event, args):
    if event == "pickle.find_class":
        if not name_allowed(str(args[0]), str(args[1])):
            return ("the variant's stored result names %s.%s when it loads, which base's "
                    "result does not" % (args[0], args[1]))
    elif event in CODE_EVENTS:
        return "loading the variant's stored result raised the audit event %r" % event
    elif event == "open" and args and isinstance(args[0], (str, bytes)) \
            and os.fsdecode(args[0]) != guard["file"]:
        return "loading the variant's stored result opened %r" % (args[0],)
    return None


def audit(event, args):
    if guard["file"] is None:
        if event == "pickle.find_class":
            resolved.add((str(args[0]), str(args[1])))
        return
    why = refusal(event, args)
    if why:
        refused.append(why)
        raise NotData(why + ": a stored result is data, not code")


spec = importlib.util.spec_from_file_location("gso_test_checked", sys.argv[1])
test = importlib.util.module_from_spec(spec)
spec.loader.exec_module(test)
sys.addaudithook(audit)
reference = test.load_result(os.environ["HARNESS_REFERENCE_OUTPUT"])
guard["file"] = os.environ["HARNESS_OUTPUT"]
try:
    current = test.load_result(guard["file"])
finally:
    guard["file"] = None
    if refused:
        print(refused[0] + ": a stored result is data, not code", file=sys.stderr, flush=True)
        os._exit(1)
test.check_equivalence(reference, current)
print("equivalent to base's result")
