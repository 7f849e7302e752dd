"""Names a package keeps importable from another room, imported when first
used (PEP 562), so that loading the package imports nothing of that room."""

import importlib
import sys


def lazy_names(package, names):
    """`(__getattr__, __dir__)` for `package` (its `__name__`), whose
    `names` (`{name: module defining it}`) are looked up when first used."""

    def __getattr__(name):
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
