"""Writing a records folder as one transaction: `records_transaction`.

Every local writer (`bert/writer.py`, `gpt/writer.py`, `xlnet/writer.py`,
`elmo/writer.py`) writes its shards and manifest into a temporary folder
beside the target and swaps it in whole when complete, so a kill at any
moment leaves the old dataset or the new one, never neither and never a
mix. Before anything is written it takes the target's lock (a second writer
on the same folder is refused, naming the first one's process) and reads
what the target holds:

- nothing, an empty folder, or this kind of records written with the same
  settings (the same command again): replaced;
- records of another kind (e.g. GPT's LM records under a BERT writer), or
  of this kind with other settings (checked on the new manifest before the
  swap): refused, naming what the folder holds, unless `overwrite`;
- files no writer of ours wrote: refused, even with `overwrite` (a writer
  never destroys data it did not write).

The command's console log (`logs/console.log`, see `tf_records/command_line/console.py`)
is the writer's own: a `logs/` folder holding only console logs is carried
into the new folder before the swap, and the command appends its own run's
log there after it. The new folder keeps the target's permissions (an
existing folder made by `mktemp -d` stays 0700).

The lock is a file beside the target (`.<name>.lock`, `fcntl.flock`), not
inside it: the folder itself is swapped. A kill between the swap's two
renames leaves the old folder at `.<name>.old-<pid>`; the next writer puts
it back before anything else.
"""

import contextlib
import fcntl
import functools
import inspect
import json
import os
import shutil
import stat

from tf_records.command_line.console import LOG_FILE
from tf_records.manifest import MANIFEST_FILE
from tf_records.manifest import file_sha256
from tf_records.tfrecord_file import write_tfrecord_file

SHARD_PREFIX, SHARD_SUFFIX = "shard-", ".tfrecord"

# The manifest's schema kind -> what wrote it (for messages).
WRITERS = {"bert": "BERT's pretraining records (create_pretraining_data)",
           "lm": "GPT's LM records (create_lm_data)",
           "elmo": "ELMo's records (create_elmo_data)",
           "xlnet": "XLNet's records (create_xlnet_data)"}


class RefusedFolder(ValueError):
    """The target holds data this writer must not replace."""


def write_shard(output_dir, index, records):
    """Writes `records` (serialized examples, any iterable) as shard `index`
    of `output_dir` under a temporary name, renamed when complete; no
    temporary shard is left behind, whatever stops the write. Returns the
    manifest's entry: `{"file", "records", "sha256"}`."""
    name = f"{SHARD_PREFIX}{index:05d}{SHARD_SUFFIX}"
    tmp, path = os.path.join(output_dir, f".tmp-{name}"), os.path.join(output_dir, name)
    try:
        count = write_tfrecord_file(tmp, records)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return {"file": name, "records": count, "sha256": file_sha256(path)}


LOG_FOLDER, LOG_NAME = os.path.split(LOG_FILE)


def _ours(target, name):
    if name == LOG_FOLDER:  # the command's console logs, and nothing else
        path = os.path.join(target, name)
        return os.path.isdir(path) and not os.path.islink(path) and all(
            entry == LOG_NAME for entry in os.listdir(path))
    return name == MANIFEST_FILE or name.startswith(".tmp-") or (
        name.startswith(SHARD_PREFIX) and name.endswith(SHARD_SUFFIX))


def _hidden(target, tag):
    parent, name = os.path.split(os.path.abspath(target))
    return os.path.join(parent, f".{name}.{tag}")


def output_lock(target):
    """The writer's lock of `target` (a folder or a file), held until the
    returned descriptor is closed; `RefusedFolder` naming the holder when
    another writer has it. The vocabulary learners take it too."""
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    return _lock(target)


def _lock(target):
    path = _hidden(target, "lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise RefusedFolder(f"{target} is being written by {holder} (lock {path}); wait for it "
                            "to finish, or write elsewhere.") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"process {os.getpid()}".encode())
    return fd


def _recover(target):
    """Puts back an old folder a killed swap left aside; removes stale temps
    (the caller holds the lock: no writer is using them)."""
    parent, name = os.path.split(os.path.abspath(target))
    for entry in sorted(os.listdir(parent)):
        path = os.path.join(parent, entry)
        if entry.startswith(f".{name}.old-") and not os.path.exists(target):
            os.rename(path, target)
            print(f"Put back {target} from {path}, where an interrupted write had left it.",
                  flush=True)
        elif entry.startswith((f".{name}.tmp-", f".{name}.old-")) and os.path.isdir(path):
            shutil.rmtree(path)


def _held_kind(target, keep=()):
    """`(kind or None, manifest or None)` of the target; refuses foreign files
    (those named in `keep` are the writer's companions, not foreign)."""
    if not os.path.exists(target):
        return None, None
    if not os.path.isdir(target):
        raise RefusedFolder(f"Output folder {target} is a file.")
    names = sorted(os.listdir(target))
    foreign = [n for n in names if not _ours(target, n) and n not in keep]
    if foreign:
        raise RefusedFolder(
            f"{target} holds files no records writer wrote ({', '.join(foreign[:5])}"
            f"{f' and {len(foreign) - 5} more' if len(foreign) > 5 else ''}); they would be "
            "lost. Write into an empty or new folder.")
    if MANIFEST_FILE not in names:
        shards = [n for n in names if n.startswith(SHARD_PREFIX)]
        return ("shards without a manifest (an interrupted write of an earlier version?)"
                if shards else None), None
    with open(os.path.join(target, MANIFEST_FILE), encoding="utf-8") as f:
        manifest = json.load(f)
    return manifest.get("schema", {}).get("kind", "bert"), manifest


def _settings(manifest):
    return {k: v for k, v in manifest.items() if k not in ("shards", "folder")}


@contextlib.contextmanager
def records_transaction(target, kind, overwrite=False, keep=()):
    """Yields a temporary folder to write `kind` records into; on success
    swaps it in at `target` whole. See the module docstring.

    Args:
        target: str. The records folder.
        kind: str. The manifest's schema kind this writer writes.
        overwrite: bool. Replace records of another kind or settings.
        keep: file names the target may hold beside the records, carried
            into the new folder (ELMo's learned vocab.txt, written there
            before its records).

    Raises:
        RefusedFolder: before anything is written (lock held, another kind
            of records, foreign files) or, for other settings, after the
            new records are written and before the swap (the old ones stay).
    """
    target = _checked_target(target)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd = _lock(target)
    work = _hidden(target, f"tmp-{os.getpid()}")
    try:
        _recover(target)
        held, old = _held_kind(target, keep)
        if held and held != kind and not overwrite:
            raise RefusedFolder(
                f"{target} holds {WRITERS.get(held, held)}; this writer writes "
                f"{WRITERS.get(kind, kind)}. Give --overwrite to replace them, or write "
                "elsewhere.")
        os.makedirs(work)  # the umask's mode, as a new target would get
        if os.path.isdir(target):  # an existing folder keeps its own
            os.chmod(work, stat.S_IMODE(os.stat(target).st_mode))
        yield work
        with open(os.path.join(work, MANIFEST_FILE), encoding="utf-8") as f:
            new = json.load(f)
        if old is not None and held == kind and not overwrite:
            _refuse_other_settings(target, kind, old, new)
        _swap_in(work, target, keep)
    finally:
        if os.path.isdir(work):
            shutil.rmtree(work)
        os.close(fd)  # releases the lock


def _checked_target(target):
    """The target's absolute path; `RefusedFolder` for a link or a folder
    holding the current directory (the swap would replace either)."""
    if os.path.islink(os.path.abspath(target)):  # the swap would replace the link, not its folder
        raise RefusedFolder(f"Output folder {target} is a link (to {os.path.realpath(target)}); "
                            "give the folder it points to.")
    target = os.path.abspath(target)
    here = os.path.abspath(os.getcwd())
    if here == target or here.startswith(target + os.sep):
        raise RefusedFolder(f"Output folder {target} holds the current directory; the writer "
                            "swaps its folder in whole: write into a subfolder.")
    return target


def _refuse_other_settings(target, kind, old, new):
    """`RefusedFolder` naming the first setting the `new` manifest changes
    from the target's `old` one."""
    if _settings(old) != _settings(new):
        key = next(k for k in sorted(set(_settings(old)) | set(_settings(new)))
                   if old.get(k) != new.get(k))
        raise RefusedFolder(
            f"{target} holds {WRITERS.get(kind, kind)} written with other settings "
            f"({key}: {json.dumps(old.get(key))} there, {json.dumps(new.get(key))} now). "
            "Give --overwrite to replace them, or write elsewhere; they are unchanged.")


def _swap_in(work, target, keep):
    """The `keep` files and the earlier runs' logs carried into `work`, then
    `work` renamed to `target` (the old folder set aside and deleted)."""
    for name in keep:
        if os.path.isfile(os.path.join(target, name)) and not os.path.exists(
                os.path.join(work, name)):
            shutil.copy2(os.path.join(target, name), os.path.join(work, name))
    if os.path.isdir(os.path.join(target, LOG_FOLDER)):  # the earlier runs' logs
        shutil.copytree(os.path.join(target, LOG_FOLDER), os.path.join(work, LOG_FOLDER),
                        dirs_exist_ok=True)
    if os.path.exists(target):
        aside = _hidden(target, f"old-{os.getpid()}")
        os.rename(target, aside)
        os.rename(work, target)
        shutil.rmtree(aside)
    else:
        os.rename(work, target)


def transactional(kind, keep=()):
    """Decorator of a writer `fn(..., output_dir, ...)`: it writes into
    `records_transaction`'s temporary folder, swapped in at `output_dir` when
    it returns; the writer gains `overwrite=False`."""
    def wrap(fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def writer(*args, overwrite=False, **kwargs):
            bound = signature.bind(*args, **kwargs)
            with records_transaction(bound.arguments["output_dir"], kind, overwrite,
                                     keep) as work:
                bound.arguments["output_dir"] = work
                return fn(*bound.args, **bound.kwargs)

        return writer

    return wrap
