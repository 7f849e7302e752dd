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


def write_json_atomic(path, values):
    """Writes `values` as JSON to `path` via a temp file and a rename."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(values, f, indent=2, sort_keys=True)
            f.write("\n")
        as_if_created(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def copy_atomic(src, dst):
    """Copies `src` to `dst` via a temp file and a rename (nothing when they are one file)."""
    if os.path.abspath(src) == os.path.abspath(dst):
        return
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(dst)), prefix=".tmp-")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        as_if_created(tmp)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
