"""Commands import Keras without its scikit-learn and matplotlib extras
(tf_records/command_line/keras_extras.py), and everyone else still imports both."""

import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_EXTRAS = ("sklearn", "scipy.stats", "matplotlib", "matplotlib.pyplot")

# What `import keras` loaded, then our own imports of the extras, from a
# command (`console.run`, as every command starts) or from a plain script.
_SCRIPT = textwrap.dedent("""
    import json, sys
    from tf_records.command_line import console

    def main(argv):
        import keras
        import keras.src.wrappers.fixes as keras_sklearn
        import keras.src.visualization.plot_image_gallery as keras_gallery
        loaded = [name for name in EXTRAS if name in sys.modules]
        import matplotlib.pyplot, scipy.stats, sklearn.metrics
        print(json.dumps({
            "with_keras": loaded,
            "keras_sees": [keras_sklearn.sklearn is not None, keras_gallery.plt is not None],
            "ours": sklearn.metrics.f1_score([0, 1, 1], [0, 1, 0]),
            "pyplot": matplotlib.pyplot.__name__}))

    if sys.argv[1] == "command":
        console.run(main, "__main__", output_flag=None, argv=["command"])
    else:
        main([])
""").replace("EXTRAS", repr(_EXTRAS))


def _imports(how):
    result = subprocess.run([sys.executable, "-c", _SCRIPT, how], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_commands_import_keras_without_its_extras_and_we_still_import_them():
    command = _imports("command")
    assert command["with_keras"] == [], command
    assert command["keras_sees"] == [False, False]  # Keras' "not installed" path
    assert command["ours"] == 0.6666666666666666 and command["pyplot"] == "matplotlib.pyplot"
    # The reason the finder exists: left alone, Keras imports all four.
    plain = _imports("script")
    assert plain["with_keras"] == list(_EXTRAS) and plain["keras_sees"] == [True, True], plain
    assert plain["ours"] == command["ours"]


def test_the_finder_refuses_keras_modules_only(monkeypatch):
    from tf_records.command_line import keras_extras

    finder = keras_extras.KerasExtrasFinder()
    monkeypatch.setattr(keras_extras, "_importer", lambda: "keras.src.wrappers.fixes")
    for name in ("sklearn", "sklearn.base", "matplotlib", "matplotlib.pyplot"):
        try:
            finder.find_spec(name)
        except ModuleNotFoundError as error:
            assert error.name == name and "tf_records.command_line.keras_extras" in str(error)
        else:
            raise AssertionError(f"{name} was not refused to Keras")
    assert finder.find_spec("numpy") is None and finder.find_spec("sklearnx") is None
    for importer in ("training.tasks.glue_metrics", "keras_bert_impl.bert.bert_serving", "kerasx", "__main__"):
        monkeypatch.setattr(keras_extras, "_importer", lambda importer=importer: importer)
        assert finder.find_spec("sklearn") is None and finder.find_spec("matplotlib") is None
    monkeypatch.undo()
    before = list(sys.meta_path)
    try:
        keras_extras.leave_out_of_keras()
        keras_extras.leave_out_of_keras()
        added = [f for f in sys.meta_path if isinstance(f, keras_extras.KerasExtrasFinder)]
        assert len(added) == 1 and sys.meta_path[0] is added[0]
        # Imported from here (tests.*), the extras are not refused.
        import sklearn.metrics  # noqa: F401
    finally:
        sys.meta_path[:] = before
