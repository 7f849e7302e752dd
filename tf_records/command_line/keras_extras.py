"""Commands start Keras without its optional scikit-learn and matplotlib
extras.

`import keras` imports scikit-learn (and through it SciPy's statistics) for
its `keras.wrappers.SKLearn*` estimators, and `matplotlib.pyplot` for
`keras.visualization`, whenever they are installed: about 1.0 s of a 3.3 s
Keras import on 2 cores (measured with TensorFlow 2.21 and Keras 3.15, three
runs each: 3.44, 3.31, 3.18 s against 2.28, 2.30, 2.41 s). Every command pays
it in every process it starts, and none uses either extra: our task metrics
and charts import scikit-learn and matplotlib from our own modules, when
they need them.

`leave_out_of_keras()` puts a finder in front of Python's import system that
refuses those two packages to imports made by Keras' own modules (`keras.*`)
and to no one else, so Keras takes its "not installed" path for them (its
scikit-learn wrappers and image gallery then raise if called) while our
imports of them, and anyone else's, work as usual, before or after Keras.
`tf_records.command_line.console.run` installs it for every command, and
`training.ablations` in its worker processes; the library never does, since
its users may want Keras' wrappers.

`freeze_imports()`, called by the training commands once TensorFlow and
Keras are imported, takes the objects those imports made (about a million)
out of Python's full garbage collections, which otherwise walk them all
again every time: 16 full collections took 2.0 s of a 600-step main job.
"""

import gc
import sys

LEFT_OUT = ("sklearn", "matplotlib")


class KerasExtrasFinder:
    """A `sys.meta_path` finder: `ModuleNotFoundError` for `LEFT_OUT`
    packages imported by a `keras.*` module; otherwise no opinion."""

    def find_spec(self, name, path=None, target=None):
        del path, target
        if name.partition(".")[0] in LEFT_OUT and _importer().startswith("keras."):
            raise ModuleNotFoundError(
                f"No module named {name!r} (left out of Keras by tf_records.command_line.keras_extras)",
                name=name)
        return None


def _importer():
    """`__name__` of the module whose code runs the import being resolved:
    the first frame above this finder outside the import machinery."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(("_frozen_importlib", "importlib")):
            return module
        frame = frame.f_back
    return ""


def leave_out_of_keras():
    """Installs `KerasExtrasFinder` first in `sys.meta_path` (once). Keras
    imported before this keeps its extras."""
    if not any(isinstance(finder, KerasExtrasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, KerasExtrasFinder())


def freeze_imports():
    """Moves every object alive now (call it after the heavy imports) out of
    reach of Python's cycle collector (`gc.freeze`): they are still freed
    when their references go, but later full collections walk only what was
    made since. The training commands call it once TensorFlow and Keras are
    imported; the library never does (it does not own the process)."""
    gc.freeze()
