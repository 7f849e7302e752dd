"""A console people can read: every command's `absl.app.run`, with
TensorFlow's start-up noise sent to a log file instead of the terminal.

TensorFlow's C++ side writes straight to file descriptor 2 from the moment
it is imported: "All log messages before absl::InitializeLog() ...", the
oneDNN and CPU-feature notices, the failed `cuInit` probe of a machine
without a GPU, XLA's INFO lines. Python logging does not exist yet and some
of these lines ignore TF_CPP_MIN_LOG_LEVEL; worker processes (the TFRecord
writer's spawned pool) import TensorFlow again and print them again. So by
default (`--verbosity=0`) `run` points descriptor 2 at a log file for the
whole command, for this process and the processes it starts, and points
Python's `sys.stderr` at a copy of the terminal: tracebacks, `SystemExit`
messages, flag errors and our own lines still reach the console. Python
warnings (Keras' `UserWarning`s) and Python logging below ERROR (the
`tensorflow` logger's included) go to the log file too.

The log is appended to `<output folder>/logs/console.log`, in a folder the
run wrote and never in someone else's. A rerun in a run folder (pretrain,
finetune, ablations, convert_checkpoint), where an earlier run's log lies,
logs there from the start (a resume); a run into a new or empty folder
moves its log there at the end, successful or not, once the command has
written something (a command checks its flags before any folder appears).
A records folder, which its writer swaps in whole
(`tf_records/records_folder.py`), gets the log at the end of a successful
run, after the swap, beside the earlier runs' logs the writer carried over;
a records writer that fails or is refused leaves the folder untouched. A
run that ends without a folder for its log deletes the log: its errors are
on the console already. A process that dies before it can clean up
(SIGKILL, a C++ abort) leaves the log where it was: in the run folder, or
in the temporary folder (`kbi-<command>-*.log`); on an abort `faulthandler`
prints the Python stack on the console and the C++ message is in that log.

`--verbosity` is absl's own flag (every absl command has it), read before
TensorFlow is imported: 1 leaves the console alone (TensorFlow's notices and
warnings, Python warnings), 2 also shows TensorFlow's INFO logs (C++ and
Python).
"""

import contextlib
import faulthandler
import logging
import os
import shutil
import sys
import tempfile
import time
import warnings

from absl import app
from absl import flags
from absl import logging as absl_logging

from tf_records.command_line import keras_extras

LOG_FILE = os.path.join("logs", "console.log")
VERBOSITY_HELP = (
    "0 (default): TensorFlow's start-up notices, C++ logs and Python warnings go to "
    f"<output folder>/{LOG_FILE}, not the console; 1: they show on the console; "
    "2: TensorFlow's INFO logs too.")
# Our packages: their flags are the command's, listed by --help.
_PACKAGES = ("training", "tf_records", "keras_bert_impl")


def verbosity_from_argv(argv):
    """The `--verbosity` / `-v` value in `argv`, read before absl parses it
    (the console must be set up before TensorFlow is imported). 0 when it
    is absent or not an integer (absl then reports the bad value)."""
    value = "0"
    args = iter(argv[1:])
    for arg in args:
        if arg == "--":
            break
        name, equals, given = arg.partition("=")
        if name.lstrip("-") in ("verbosity", "v") and name.startswith("-"):
            value = given if equals else next(args, value)
    try:
        return int(value)
    except ValueError:
        return 0


def run(main, module_name, output_flag="output_dir", flags_parser=None, argv=None,
        swapped=False):
    """`absl.app.run(main)` with the console described in the module
    docstring, and Keras imported without its scikit-learn and matplotlib
    extras (`tf_records.command_line.keras_extras`).

    Args:
        main: the command's `main(argv)`.
        module_name: `__name__` of the command's module; its docstring and
            flags make `--help` (also when run as a console script).
        output_flag: the flag naming the command's output folder, where the
            log goes (`<folder>/logs/console.log`) once the folder exists;
            None: the command makes no run folder.
        flags_parser: passed on to `app.run`.
        argv: the command line (default `sys.argv`).
        swapped: the output folder is swapped in whole at the end (a records
            writer's): the log goes there only after `main` succeeded.
    """
    keras_extras.leave_out_of_keras()  # 1 s off every command's start (see there)
    argv = list(sys.argv if argv is None else argv)
    level = verbosity_from_argv(argv)
    _describe_flags(module_name)
    run_kwargs = {"argv": argv}
    if flags_parser is not None:
        run_kwargs["flags_parser"] = flags_parser
    if level >= 1:
        if level >= 2:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"  # C++ INFO lines back, whatever the shell set

        def loud_main(args):
            _set_python_logging(level)
            return main(args)

        app.run(loud_main, **run_kwargs)
        return
    command = os.path.basename(argv[0]).removesuffix(".py").removeprefix("kbi-")
    quiet = QuietConsole(command, argv)
    try:
        app.run(_quiet_main(main, level, quiet, output_flag, swapped), **run_kwargs)
    finally:
        quiet.close()


def _quiet_main(main, level, quiet, output_flag, swapped):
    """`main` on the `quiet` console, its log joining the output folder as
    the module docstring says."""
    def quiet_main(args):
        _set_python_logging(level)
        folder = flags.FLAGS[output_flag].value if output_flag else None
        fresh = folder and not (os.path.isdir(folder) and os.listdir(folder))
        if folder and not swapped and os.path.isfile(os.path.join(folder, LOG_FILE)):
            quiet.folder = folder  # a rerun (a resume) logs there from the start
            quiet.move_into_folder()
        succeeded = False
        try:
            status = main(args)
            succeeded = not status
            return status
        finally:
            # A run's log joins a folder it wrote: after success (a records
            # writer's swapped-in folder), or one that was new or empty; a
            # refused run leaves someone else's folder, or an empty one, as it was.
            if folder and (succeeded or (fresh and not swapped and os.path.isdir(folder)
                                         and os.listdir(folder))):
                quiet.folder = folder

    return quiet_main


class QuietConsole:
    """Descriptor 2 on a log file, `sys.stderr` on a copy of the console,
    Python warnings to the log, `faulthandler` on the console; `close`
    undoes it all.

    The log starts as a temporary file (the output folder is not known
    before the flags are parsed, and must not be made before the command
    has checked them) and moves to `<folder>/logs/console.log` once the
    command's `folder` exists.
    """

    def __init__(self, command, argv):
        self.argv = argv
        self.started = time.strftime("%Y-%m-%d %H:%M:%S")
        self.folder = None
        fd, self.log_path = tempfile.mkstemp(prefix=f"kbi-{command}-", suffix=".log")
        self.in_folder = False
        sys.stdout.flush()
        sys.stderr.flush()
        self._console_fd = os.dup(2)
        os.dup2(fd, 2)
        os.close(fd)
        self._stderr = sys.stderr
        self.console = os.fdopen(self._console_fd, "w", buffering=1,
                                 encoding=self._stderr.encoding, errors="backslashreplace")
        sys.stderr = self.console
        self._showwarning = warnings.showwarning
        warnings.showwarning = _warning_to_log
        # Left alone if someone (PYTHONFAULTHANDLER, pytest) enabled it.
        self._own_faulthandler = not faulthandler.is_enabled()
        if self._own_faulthandler:
            faulthandler.enable(file=self.console, all_threads=True)

    def move_into_folder(self):
        """Appends the log so far to `<folder>/logs/console.log` and points
        descriptor 2 there, if the folder exists; otherwise does nothing."""
        if self.in_folder or not (self.folder and os.path.isdir(self.folder)):
            return
        target = os.path.join(self.folder, LOG_FILE)
        sys.__stderr__.flush()
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "ab") as out, open(self.log_path, "rb") as log:
                out.write(f"=== {self.started} pid {os.getpid()}: {' '.join(self.argv)}\n"
                          .encode())
                shutil.copyfileobj(log, out)
            fd = os.open(target, os.O_WRONLY | os.O_APPEND)
        except OSError:
            return  # a folder we may not write to: the log stays where it is, the run goes on
        os.dup2(fd, 2)
        os.close(fd)
        os.remove(self.log_path)
        self.log_path, self.in_folder = target, True

    def close(self):
        """Gives the console back; the log moves into the output folder if
        there is one now, else it is deleted."""
        for stream in (sys.stdout, self.console, sys.__stderr__):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        self.move_into_folder()
        if self._own_faulthandler:
            faulthandler.disable()
        os.dup2(self._console_fd, 2)
        sys.stderr = self._stderr
        self.console.close()
        warnings.showwarning = self._showwarning
        if not self.in_folder:
            os.remove(self.log_path)


def _warning_to_log(message, category, filename, lineno, file=None, line=None):
    """`warnings.showwarning` of the quiet console: to descriptor 2, the log."""
    del file  # always the log: the console is for our own lines
    sys.__stderr__.write(warnings.formatwarning(message, category, filename, lineno, line))
    sys.__stderr__.flush()


def _set_python_logging(level):
    """After flag parsing: absl took --verbosity as its own level (1 =
    DEBUG); this sets ours."""
    if level <= 0:
        if not flags.FLAGS["stderrthreshold"].present:
            # absl writes records to descriptor 2 (the log) and copies
            # those at this level or above to sys.stderr (the console).
            flags.FLAGS.stderrthreshold = "error"
        return
    absl_logging.set_verbosity(absl_logging.INFO if level >= 2 else absl_logging.WARNING)
    if level >= 2:
        # pretrain and finetune lower absl's level to WARNING; TensorFlow's
        # logger keeps INFO, and its records still reach absl's handler.
        logging.getLogger("tensorflow").setLevel(logging.INFO)


def _describe_flags(module_name):
    """`--help` lists the command's flags and `--verbosity`.

    absl's `--help` shows the docstring of `__main__` and the flags of the
    module named by `sys.argv[0]`; a console script's `__main__` is pip's
    stub, and flags made by `config_flags.define_flags` belong to that
    module. So every flag one of our modules defined, and `--verbosity`,
    becomes a key flag of `sys.argv[0]`, and the stub gets the command's
    docstring.
    """
    main_module = sys.modules["__main__"]
    if not main_module.__doc__:
        main_module.__doc__ = sys.modules[module_name].__doc__
    values = flags.FLAGS
    values["verbosity"].help = VERBOSITY_HELP
    for owner, owned in values.flags_by_module_dict().items():
        if owner == sys.argv[0] or owner.split(".")[0] not in _PACKAGES:
            continue
        for flag in owned:
            values.register_key_flag_for_module(sys.argv[0], flag)
    values.register_key_flag_for_module(sys.argv[0], values["verbosity"])
