"""Files every family writes and reads: JSON values and copies, each written
atomically (a temp file beside the target, then a rename)."""

import json
import os
import shutil
import tempfile

from keras_bert_impl.file_modes import as_if_created


def read_json_file(path):
    """A JSON file's value; `ValueError` naming the file if it does not parse."""
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from e


def write_atomic(path, write, suffix=""):
    """Writes `path` via a temp file beside it and a rename: `write(tmp)`
    writes the temp file (its path); on any failure it is removed."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=suffix)
    os.close(fd)
    try:
        write(tmp)
        as_if_created(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_text_atomic(path, text, suffix=""):
    """Writes the UTF-8 `text` to `path` via a temp file and a rename."""

    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    write_atomic(path, write, suffix)


def write_json_atomic(path, values):
    """Writes `values` as JSON to `path` via a temp file and a rename."""
    write_text_atomic(path, json.dumps(values, indent=2, sort_keys=True) + "\n", ".json")


def copy_atomic(src, dst):
    """Copies `src` to `dst` via a temp file and a rename (nothing when they are one file)."""
    if os.path.abspath(src) == os.path.abspath(dst):
        return
    write_atomic(dst, lambda tmp: shutil.copyfile(src, tmp))
