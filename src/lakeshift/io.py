"""Reading and writing files with one-line errors: JSONL and JSON readers that name the file, line, byte
offset and field; writes that never leave half-finished files behind; checks that an output never replaces
an input or a file of another kind; and a lock so one output has one writer at a time.

Outputs and what counts as "a previous output of the same kind" (:func:`check_output`; a cheap check of
the first record or the file's magic bytes, never a full read):

- ``score --out``: a JSONL file whose first record has ``id`` and ``verdict`` (scored records);
- ``baseline --out``, ``predict --out``: a JSONL file whose first record has ``id`` and ``output``
  (predictions; ``predict`` also checks the settings of every row before it appends);
- ``export --out``: a parquet file (starts with ``PAR1``) or a ``save_to_disk`` folder (``state.json``);
- ``report --out``: a folder holding ``report.html``;
- an empty file or folder is always replaceable; anything else is refused (exit 2), as is an output that
  is the same file as one of the command's inputs (after resolving links).
"""

from __future__ import annotations

import errno
import functools
import gzip
import hashlib
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from lakeshift.errors import LakeshiftError

# errno values that mean "this path cannot be written (or read) here", with the words users see.
_OS_PROBLEMS = {
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large",
    errno.ENOTDIR: "a file is where a folder should be",
    errno.EISDIR: "is a folder, expected a file",
    errno.EEXIST: "already exists (a file is where a folder should be?)",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOENT: "no such file or folder",
    errno.ENAMETOOLONG: "file name too long",
    errno.ELOOP: "too many levels of symbolic links",
    errno.EIO: "input/output error",
}


#: The errno values the CLI reports as one line (anything else an OSError says keeps its traceback).
FILE_SYSTEM_ERRNOS = frozenset(_OS_PROBLEMS)


def _problem(err: OSError) -> str:
    return _OS_PROBLEMS.get(err.errno or 0) or err.strerror or str(err) or type(err).__name__


_WRAPPED = (
    (("No space left on device", "os error 28"), errno.ENOSPC),
    (("Read-only file system", "os error 30"), errno.EROFS),
    (("Disk quota exceeded", "os error 122"), errno.EDQUOT),
)


#: What torch's checkpoint writer says when a write fails, without saying why (``torch.save`` on a full disk:
#: ``[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534``).
_TORCH_WRITE_FAILED = ("inline_container.cc", "PytorchStreamWriter failed")
#: Free bytes below which a failed write is put down to a full disk.
_NEARLY_FULL = 64 * 2**20


def wrapped_os_problem(err: BaseException, path: str | Path | None = None) -> str | None:
    """The file-system problem behind a library's exception (safetensors' ``SafetensorError``, torch's
    ``RuntimeError``, pyarrow's errors wrap ENOSPC/EROFS in their own types and messages), or None.
    torch's writer names no cause: its failure is a full disk when ``path`` (what the command writes) has
    almost no space left, else a failed write."""
    seen: BaseException | None = err
    for _ in range(8):  # the exception chain: an OSError raised underneath
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno in FILE_SYSTEM_ERRNOS:
            return _problem(seen)
        seen = seen.__cause__ or seen.__context__
    text = str(err)
    for needles, code in _WRAPPED:
        if any(n in text for n in needles):
            return _OS_PROBLEMS[code]
    if any(n in text for n in _TORCH_WRITE_FAILED):
        full = path is not None and free_disk(Path(path)) < _NEARLY_FULL
        return _OS_PROBLEMS[errno.ENOSPC] if full else "writing a checkpoint failed (a full disk?)"
    return None


def free_disk(path: str | Path) -> float:
    """Free bytes on the file system that will hold ``path`` (its nearest existing parent); infinite when
    that cannot be told."""
    probe = Path(path).resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return float(shutil.disk_usage(probe).free)
    except OSError:
        return float("inf")


def os_error_message(err: OSError, path: str | Path | None = None) -> str:
    """One line for an ``OSError``: the path (``err.filename``, else ``path``) and what went wrong."""
    name = err.filename if err.filename is not None else path
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    what = _problem(err)
    if err.filename2 is not None and err.errno not in (errno.ENOSPC, errno.EROFS):
        return f"{name} -> {os.fsdecode(err.filename2)}: {what}"
    return f"{name}: {what}" if name is not None else what


@contextmanager
def writing(path: str | Path, temporary: str | Path | None = None) -> Iterator[None]:
    """Turns an ``OSError`` raised inside the block into a :class:`LakeshiftError` naming the path.

    Errors from ``write`` and ``flush`` (a full disk) carry no file name: they get ``path``; so do errors
    naming ``temporary`` (or a file inside it), the hidden name ``path`` is written under until complete."""
    try:
        yield
    except OSError as err:
        if isinstance(err, BrokenPipeError):
            raise
        name = os.fsdecode(err.filename) if err.filename is not None else None
        if name is None or (
            temporary is not None and os.path.abspath(name).startswith(os.path.abspath(temporary))
        ):
            raise LakeshiftError(f"{path}: {_problem(err)}") from None
        raise LakeshiftError(os_error_message(err, path)) from None


def _not_utf8(path: Path, lineno: int, offset: int, err: UnicodeDecodeError) -> LakeshiftError:
    return LakeshiftError(
        f"{path}, line {lineno} (byte offset {offset + err.start}): not UTF-8 text "
        f"(byte 0x{err.object[err.start]:02x}; a binary or wrongly encoded file?)"
    )


def read_text(path: str | Path) -> str:
    """The UTF-8 text of a file.

    Raises:
        LakeshiftError: missing or unreadable file, or bytes that are not UTF-8 (line and byte offset named).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise LakeshiftError(os_error_message(err, path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        lineno = data.count(b"\n", 0, err.start) + 1
        raise _not_utf8(path, lineno, 0, err) from None


def read_json(path: str | Path) -> Any:
    """The JSON value of a file (``split.json``, ``run.json``, a suite file).

    Raises:
        LakeshiftError: missing, unreadable or non-UTF-8 file, or malformed JSON (line named).
    """
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise LakeshiftError(f"{path}, line {err.lineno}: malformed JSON ({err.msg})") from None
    except RecursionError:
        raise LakeshiftError(f"{path}: JSON nested too deeply") from None


#: The suffix of a compressed file: read as the plain file it holds (committed results are stored so).
GZIP_SUFFIX = ".gz"
_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


def open_binary(path: str | Path) -> IO[bytes]:
    """``path`` opened for reading bytes; a ``.gz`` file yields the bytes it compresses.

    Raises:
        OSError: missing or unreadable file.
    """
    path = Path(path)
    if path.name.endswith(GZIP_SUFFIX):
        f = path.open("rb")  # opened here so that a missing file fails now, not at the first read
        return gzip.GzipFile(fileobj=f, mode="rb")  # type: ignore[return-value]
    return path.open("rb")


def _broken_gzip(path: str | Path, err: Exception) -> LakeshiftError:
    return LakeshiftError(f"{path}: not a complete gzip file ({err})")


def jsonl_stem(path: str | Path) -> str:
    """The name of a JSONL file without ``.jsonl`` or ``.jsonl.gz`` (``ood-dist.jsonl.gz``: ``ood-dist``)."""
    name = Path(path).name.removesuffix(GZIP_SUFFIX)
    return name.removesuffix(".jsonl") if name.endswith(".jsonl") else Path(name).stem


def jsonl_files(folder: Path, recursive: bool = False) -> list[Path]:
    """The ``*.jsonl`` and ``*.jsonl.gz`` files of ``folder`` (and its subfolders), sorted.

    Raises:
        LakeshiftError: a file present both plain and compressed (``a.jsonl`` beside ``a.jsonl.gz``):
            reading both would count its rows twice.
    """
    find = folder.rglob if recursive else folder.glob
    files = sorted({*find("*.jsonl"), *find("*.jsonl" + GZIP_SUFFIX)})
    for path in files:
        if path.name.endswith(GZIP_SUFFIX) and path.with_name(path.name.removesuffix(GZIP_SUFFIX)) in files:
            raise LakeshiftError(
                f"{path}: the same file is also there uncompressed ({path.name.removesuffix(GZIP_SUFFIX)}); "
                "keep one of them"
            )
    return files


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(line_number, text)`` of every line of a UTF-8 text file (or of the text a ``.gz`` file
    compresses), decoded one line at a time so that a bad byte is reported with its line and byte offset.

    Raises:
        LakeshiftError: missing or unreadable file, a ``.gz`` file that is not gzip or is cut short, or a
            line that is not UTF-8.
    """
    path = Path(path)
    try:
        f = open_binary(path)
    except OSError as err:
        raise LakeshiftError(os_error_message(err, path)) from None
    with f:
        offset = 0
        lines = enumerate(f, start=1)
        while True:
            try:
                lineno, raw = next(lines)
            except StopIteration:
                return
            except _GZIP_ERRORS as err:
                raise _broken_gzip(path, err) from None
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise _not_utf8(path, lineno, offset, err) from None
            offset += len(raw)
            yield lineno, line


def parse_json_line(line: str, where: str) -> Any:
    """One JSONL line's value.

    Raises:
        LakeshiftError: malformed JSON (``where`` names the file and line).
    """
    try:
        return json.loads(line)
    except json.JSONDecodeError as err:
        raise LakeshiftError(f"{where}: malformed JSON ({err.msg})") from None
    except RecursionError:
        raise LakeshiftError(f"{where}: JSON nested too deeply") from None


def read_jsonl(path: str | Path, required: Iterable[str] = ()) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields ``(line_number, object)`` for each non-blank line of a JSONL file.

    Raises:
        LakeshiftError: the file is missing, a line is not UTF-8 or not a JSON object, or lacks a
            ``required`` field; the message names the file, the line (and byte offset) and the field.
    """
    path = Path(path)
    if not path.is_file():
        raise LakeshiftError(f"{path}: no such file")
    required = tuple(required)
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        obj = parse_json_line(line, f"{path}, line {lineno}")
        if not isinstance(obj, dict):
            raise LakeshiftError(f"{path}, line {lineno}: expected a JSON object, got {type(obj).__name__}")
        for key in required:
            if key not in obj:
                raise LakeshiftError(f"{path}, line {lineno}: missing field {key!r}")
        yield lineno, obj


def first_record(path: str | Path) -> dict[str, Any] | None:
    """The first non-blank line of a JSONL file (or a ``.jsonl.gz``) as an object, or None (unreadable,
    not JSON, empty).

    Raises:
        LakeshiftError: a ``.gz`` file that is not gzip or is cut short: a damaged file, not one to pass
            over as something other than JSONL.
    """
    try:
        with open_binary(path) as f:
            for raw in f:
                if raw.strip():
                    obj = json.loads(raw.decode("utf-8"))
                    return obj if isinstance(obj, dict) else None
    except _GZIP_ERRORS as err:  # before OSError, which BadGzipFile is
        raise _broken_gzip(path, err) from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return None


def dumps(obj: Any) -> str:
    """One canonical JSON line (stable key order as given, no NaN, UTF-8 kept)."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


@functools.lru_cache(maxsize=1)
def _umask() -> int:
    """The process's umask (read once: setting it to read it is not thread-safe)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Writes to a temporary file next to ``path`` and renames it into place only on success.

    Raises:
        LakeshiftError: the file cannot be written (read-only file system, full disk, a file where a
            folder goes, ...): one line naming ``path``; the temporary file is removed.
    """
    path = Path(path)
    with writing(path, temporary=path.parent / f".{path.name}."):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); the result gets the mode of any other new file.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        if err.filename in (None, tmp) and not isinstance(err, BrokenPipeError):
            # A full disk during write/flush/close (no file name), or the rename: name the target.
            raise LakeshiftError(f"{path}: {_problem(err)}") from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes (what predictions and run folders record of the data they read)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Atomically writes rows as JSONL; returns the number written."""
    n = 0
    with atomic_write(path) as f:
        for row in rows:
            f.write(dumps(row) + "\n")
            n += 1
    return n


# ----- outputs never replace inputs -------------------------------------------------------------------------
def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same file or folder (links resolved; False when either is missing)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def jsonl_has_fields(*fields: str) -> Callable[[Path], bool]:
    """A :func:`check_output` test: the file's first record has every one of ``fields``."""

    def test(path: Path) -> bool:
        rec = first_record(path)
        return rec is not None and all(f in rec for f in fields)

    return test


def check_output(
    out: str | Path,
    *,
    inputs: Sequence[str | Path | None] = (),
    kind: str = "file",
    previous: Callable[[Path], bool] | None = None,
    what: str = "output",
    option: str = "--out",
) -> None:
    """Refuses an output that would destroy something: one of the command's ``inputs`` (same file after
    resolving links, or a folder holding one for folder outputs), a file where a folder goes or the reverse,
    or an existing non-empty file (folder) that ``previous`` does not recognise as an earlier output of
    the same command (see the module docstring).

    Raises:
        LakeshiftError: one line naming ``out`` and what it would have destroyed.
    """
    out = Path(out)
    for inp in inputs:
        if inp is None:
            continue
        if same_file(out, inp):
            raise LakeshiftError(
                f"{option} {out} is the input {inp}: it would be overwritten; choose another"
            )
        if kind == "dir" and out.resolve() in Path(inp).resolve().parents:
            raise LakeshiftError(
                f"{option} {out} is a folder holding the input {inp}: writing there could destroy it; "
                "choose another folder"
            )
    if not out.exists() and not out.is_symlink():
        _check_parents(out, option)
        return
    if kind == "file":
        if out.is_dir():
            raise LakeshiftError(f"{option} {out} is a folder; expected a file name")
        try:
            empty = out.stat().st_size == 0
        except OSError as err:
            raise LakeshiftError(os_error_message(err, out)) from None
        if not empty and (previous is None or not previous(out)):
            raise LakeshiftError(
                f"{option} {out} exists and is not a previous {what}; refusing to replace it "
                "(delete it or choose another name)"
            )
    else:
        if not out.is_dir():
            raise LakeshiftError(f"{option} {out} is a file; expected a folder")
        if any(out.iterdir()) and (previous is None or not previous(out)):
            raise LakeshiftError(
                f"{option} {out} is a folder that is not empty and not a previous {what}; refusing to "
                "write into it (choose another folder)"
            )


def _check_parents(out: Path, option: str = "--out") -> None:
    """Refuses a path below a file (``notes.txt/out.jsonl``) before anything tries to create it."""
    parent = next((p for p in out.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise LakeshiftError(f"{option} {out}: {parent} is a file, not a folder")


def png_problem(path: Path) -> str | None:
    """Why ``path`` is not a complete PNG (missing, not a PNG, truncated before its ``IEND`` chunk), or
    None. A cheap check of the first and last bytes, for readers that pass images on undecoded."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 12))
            tail = f.read()
    except FileNotFoundError:
        return "not found"
    except OSError as err:
        return _problem(err)
    if head != b"\x89PNG\r\n\x1a\n":
        return "not a PNG file"
    if b"IEND" not in tail:
        return "truncated PNG (no IEND chunk at the end)"
    return None


def is_parquet(path: Path) -> bool:
    """A parquet file (``PAR1`` magic bytes at the start)."""
    try:
        with path.open("rb") as f:
            return f.read(4) == b"PAR1"
    except OSError:
        return False


# ----- one writer per output --------------------------------------------------------------------------------
def lock_path(out: str | Path) -> Path:
    """The lock file of an output: ``.<name>.lock`` next to it (outside output folders, so it never shows
    up among their files). Links are followed first: an output and a link to it are one file, one lock."""
    out = Path(os.path.realpath(out))
    return out.parent / f".{out.name or 'out'}.lock"


@contextmanager
def output_lock(out: str | Path, command: str = "lakeshift") -> Iterator[Path]:
    """Holds an exclusive ``fcntl.flock`` on :func:`lock_path` of ``out`` while the block runs.

    The kernel releases the lock when the process ends however it ends (a crash or SIGKILL included), so
    a dead run never leaves it stuck; the file itself stays (empty of meaning, it only records the last
    holder's pid). Locks are advisory and local: every lakeshift writer takes one; NFS may not honour them.

    Raises:
        LakeshiftError: another process holds the lock (its pid named), or the lock cannot be created.
    """
    # Imported here: fcntl is POSIX only, and `import lakeshift` must work on every platform.
    import fcntl

    lock = lock_path(out)
    _check_parents(Path(out))
    refuse_inside_locked(out, command)
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        where = out if err.filename is None or os.fsdecode(err.filename) == str(lock) else err.filename
        raise LakeshiftError(f"{where}: {_problem(err)} (cannot create its lock file {lock})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            who = f" (pid {holder})" if holder is not None else ""
            raise LakeshiftError(
                f"{out} is being written by another {command} run{who}; wait for it to finish or choose "
                f"another output (lock {lock})"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid is a courtesy; the flock is the lock
        yield lock
    finally:
        os.close(fd)  # releases the flock


def _holder(fd: int) -> int | None:
    """The pid a lock file records (its last holder), or ``None``."""
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def locked_parent(out: str | Path) -> tuple[Path, int | None] | None:
    """The folder above ``out`` that another process holds locked with :func:`output_lock` (a study's
    workdir while ``lakeshift run`` writes it), and the holder's pid; ``None`` when there is none.

    The process holding the lock and its children (a study's stages, run in process or as its own
    subprocesses) are not "another process": they write there for it.
    """
    import fcntl

    path = Path(os.path.realpath(out))
    for parent in path.parents:
        if not parent.name:
            break
        lock = parent.parent / f".{parent.name}.lock"
        try:
            fd = os.open(lock, os.O_RDONLY)
        except OSError:  # no lock file: nobody ever locked this folder
            continue
        try:
            # A shared lock conflicts with the holder's exclusive one (even within one process: flock locks
            # belong to open file descriptions); it is given back at once.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            holder = _holder(fd)
            if holder not in (os.getpid(), os.getppid()):
                return parent, holder
        except OSError:
            continue
        finally:
            os.close(fd)
    return None


def refuse_inside_locked(out: str | Path, command: str = "lakeshift") -> None:
    """Refuses an output inside a folder that another process is writing (:func:`locked_parent`).

    Raises:
        LakeshiftError: naming the output, the locked folder and its holder's pid.
    """
    found = locked_parent(out)
    if found is not None:
        folder, holder = found
        who = f" (pid {holder})" if holder is not None else ""
        raise LakeshiftError(
            f"{out} lies inside {folder}, which another lakeshift run{who} is writing (a study's workdir); "
            f"{command} would change it under that run: wait for it to finish or choose an output outside it"
        )


#: Characters a terminal or a text viewer acts on instead of showing: C0 and C1 controls (escape sequences
#: set the window title or clear the screen), DEL, and the bidirectional overrides that reorder a line.
_CONTROL_CHARS = frozenset(
    [
        *map(chr, range(0x20)),
        *map(chr, range(0x7F, 0xA0)),
        "\u2028",
        "\u2029",
        *map(chr, range(0x202A, 0x202F)),
        *map(chr, range(0x2066, 0x206A)),
    ]
)


def printable(text: object) -> str:
    """``text`` safe to print or write as one line of text: each control character taken from a file (an
    escape sequence in a model name, a newline in a label) is shown as its escape (``\\x1b``, ``\\n``)."""
    s = str(text)
    if not any(ch in _CONTROL_CHARS for ch in s):
        return s
    return "".join(ch.encode("unicode_escape").decode("ascii") if ch in _CONTROL_CHARS else ch for ch in s)
