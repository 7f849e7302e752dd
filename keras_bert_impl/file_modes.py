"""File modes for what is written through `tempfile` and renamed into place.

`tempfile.mkstemp` and `mkdtemp` make owner-only files (0600) and folders
(0700), whatever the umask. Renamed into place, they would leave an export
that a serving process running as another user cannot read. `as_if_created`
gives them what `open` and `os.makedirs` would have: 0666 and 0777 less the
process's umask (0644 and 0755 under the usual 022).
"""

import os


def _umask():
    mask = os.umask(0)  # the only way to read it: set, then put back
    os.umask(mask)
    return mask


def as_if_created(path):
    """Sets `path` (a file or folder made by `tempfile`) to the mode a plain
    `open` or `os.makedirs` would have given it."""
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~_umask())
