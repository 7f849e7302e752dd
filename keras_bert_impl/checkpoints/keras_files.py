"""`.keras` files, as every family reads them: `check_keras_file` says what is
wrong with one before Keras does (Keras calls a corrupt file "not found")."""

import os
import zipfile


def check_keras_file(path):
    """Raises `ValueError` naming `path` unless it is a readable `.keras` file.

    Keras reports a corrupt or truncated file as "File not found"; this
    says what is wrong instead: missing, not a zip archive, a damaged
    member, or a zip without the model's `config.json`.
    """
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such .keras file.")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a valid .keras file: not a zip archive (corrupt, "
                         "truncated, or another format).")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            damaged = archive.testzip()  # the first member whose CRC fails, or None
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError(f"{path} is not a valid .keras file: {e}.") from None
    if damaged:
        raise ValueError(f"{path} is not a valid .keras file: its member {damaged} is damaged.")
    if "config.json" not in names:
        raise ValueError(f"{path} is not a valid .keras file: a zip archive without the "
                         f"model's config.json (it holds {', '.join(names[:5]) or 'nothing'}).")
