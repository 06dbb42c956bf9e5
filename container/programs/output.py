"""What a bench printed, as the timer reports it: the tails of its output files, bounded so
the result line always reaches the host whole; the output metric it printed, counted; the
digest of its output (its figure masked, ignored lines left out) for the check against
base's; the output file it wrote, as the supervisor copied it out of the run's layer."""
import hashlib
import json
import math
import os

TAIL_BYTES = 64 * 1024
# The most a tail may take in the result line, escaped: the host keeps 256 KiB of it.
TAIL_JSON_BYTES = 32 * 1024


def tail(fd):
    """The last TAIL_BYTES of an output file, as text whose escaped form fits in
    TAIL_JSON_BYTES of the result line (control bytes and the like escape to six times
    their size: whatever the bench printed, the result line reaches the host whole)."""
    size = os.fstat(fd).st_size
    os.lseek(fd, max(0, size - TAIL_BYTES), os.SEEK_SET)
    data = b""
    while True:
        block = os.read(fd, TAIL_BYTES)
        if not block:
            break
        data += block
    text = data.decode("utf-8", "replace")
    while len(json.dumps(text)) > TAIL_JSON_BYTES:
        text = text[len(text) // 2:]
    return text, size


def read_all(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        block = os.read(fd, 1 << 20)
        if not block:
            break
        chunks.append(block)
    return b"".join(chunks).decode("utf-8", "surrogateescape")


MASK = "<metric>"


def find_metric(texts, pattern, json_key):
    """(value, times printed, the first text with each figure masked) of an output metric,
    over stdout and stderr together. A figure is the first group of every match of the
    pattern, or the key of every JSON-object line that has it."""
    values = []
    masked = []
    for text in texts:
        if pattern is not None:
            out, at = [], 0
            for m in pattern.finditer(text):
                if m.lastindex is None or m.start(1) < 0:
                    continue
                values.append(m.group(1))
                out.append(text[at:m.start(1)] + MASK)
                at = m.end(1)
            out.append(text[at:])
            masked.append("".join(out))
        elif json_key is not None:
            lines = []
            for line in text.split("\n"):
                if json_key in line:
                    try:
                        obj = json.loads(line)
                    except (ValueError, RecursionError, MemoryError):
                        obj = None
                    if isinstance(obj, dict) and json_key in obj:
                        values.append(obj[json_key])
                        obj[json_key] = MASK
                        line = json.dumps(obj, sort_keys=True)
                lines.append(line)
            masked.append("\n".join(lines))
        else:
            masked.append(text)
    value = None
    if len(values) == 1:
        try:
            value = float(str(values[0]).strip())
        except (ValueError, OverflowError):
            value = None
        # A figure that is no finite number (400 digits read as inf, nan) is no figure: the
        # bench's own failure, not a result the contract could carry.
        if value is not None and not math.isfinite(value):
            value = None
    return value, len(values), masked[0] if masked else ""


def digest_of_digests(digests):
    """One digest for a run's repetitions: equal only when every repetition's is, in order."""
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


def output_digest(text, ignore):
    """sha256 of the output's lines, those matching an ignore pattern left out."""
    h = hashlib.sha256()
    kept = 0
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        if any(p.search(line) for p in ignore):
            continue
        h.update(line.encode("utf-8", "surrogateescape") + b"\n")
        kept += 1
    return "sha256:" + h.hexdigest(), kept


def fresh_file(path):
    """A new, empty file: never the inode of an earlier run's output, which a process that
    outlived that run might still hold open."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)


def copied_digest(fd, copied, keep_dir=None):
    """sha256 of the output file the bench wrote in its sandbox, as the supervisor copied it
    out (or why there is none, as file_digest says it). With `keep_dir`, a whole copy is
    also kept there under its digest's hex, for the task's equivalence check (none when the
    warden's place is full: the check then says the file could not be kept)."""
    try:
        if "error" in copied or not copied:
            return "unreadable:%s" % copied.get("error", "not copied")
        os.lseek(fd, 0, os.SEEK_SET)
        h = hashlib.sha256()
        part = os.path.join(keep_dir, ".part") if keep_dir and not copied.get("truncated") else None
        part_fd = _open_part(part)
        while True:
            block = os.read(fd, 1 << 20)
            if not block:
                break
            h.update(block)
            if part_fd is not None and not _write_all(part_fd, block):
                os.close(part_fd)
                part_fd = None
                os.unlink(part)
        if part_fd is not None:
            os.close(part_fd)
            os.rename(part, os.path.join(keep_dir, h.hexdigest()))
        return "sha256:" + h.hexdigest() + (":truncated" if copied.get("truncated") else "")
    finally:
        os.close(fd)


def _open_part(path):
    if path is None:
        return None
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError:
        return None


def _write_all(fd, data):
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        return True
    except OSError:
        return False


def kept_dir(out_dir, bench):
    """Where an exec of `bench` keeps its repetitions' output files (the warden's alone)."""
    return os.path.join(out_dir, "kept", "bench-" + bench)


def reset_kept(path):
    """An empty folder for this exec's files: the last exec's of the bench are gone."""
    import shutil
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, mode=0o700)


def kept_file(out_dir, bench, digest):
    """The kept file of `digest` (`sha256:HEX`), or None."""
    hex_part = digest[len("sha256:"):] if digest.startswith("sha256:") else ""
    if len(hex_part) != 64 or any(c not in "0123456789abcdef" for c in hex_part):
        return None
    path = os.path.join(kept_dir(out_dir, bench), hex_part)
    return path if os.path.isfile(path) else None
