"""The tests' Python commands, forked from an interpreter that has
TensorFlow, Keras and our packages imported already.

Every command a test ran (`python -m training.pretrain ...`) started a fresh
interpreter and imported TensorFlow and Keras again: 2.5-2.9 s of one core,
measured, before the command did anything, and the suite runs dozens.
`run_python` (and `start_python`, which does not wait) hands the command to a
server (one per pytest worker and environment) that imported them once and
forks a process per command from it: a real process, with its own pid, exit
status, working folder, environment, descriptors and process group, running
the module, script or `-c` code as `python` would (`__main__`, `sys.argv`,
`sys.path[0]`). TensorFlow has no threads and no runtime yet when the server
forks: its eager context, thread pools and devices start in the command's
process. A 6-step XLNet pretraining command took 17.0-18.9 s of CPU this way
against 19.8-25.0 s started fresh (one core, six runs each).

What differs from a fresh interpreter: TensorFlow, Keras, tensorflow-text,
matplotlib and our packages are imported before the command starts (so
TensorFlow's import-time C++ lines are not in its stderr), with Keras'
scikit-learn and matplotlib extras left out, as every one of our commands
leaves them out (`tf_records.command_line.keras_extras`). Tests of exactly those (the
console at start-up, what a command imports, a fresh process serving a
SavedModel) and the README's main job run `subprocess.run` instead.

Each command compiles XLA kernels into a folder of its own that starts with
the run's compiled entries and gives its new ones back when it exits with
status 0 (`xla_cache`).

The server is started with the command's environment, less the variables
in `PER_COMMAND` (read when used, not at import), so the values TensorFlow
and Python read at start-up are the command's own; another environment
gets another server. `KBI_TESTS_FORK=0` runs every command as a plain
subprocess.
"""

import contextlib
import gc
import importlib
import json
import os
import pkgutil
import runpy
import secrets
import signal
import socket
import subprocess
import sys
import tempfile

import xla_cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Read when a command uses them, not when TensorFlow or Python start: they may
# differ between commands served by one server.
PER_COMMAND = ("PYTEST_CURRENT_TEST", "TF_CONFIG", "TMPDIR", "KBI_NOTEBOOK_SMOKE")
# Imported by the server before it forks: what our commands import (1.0 s
# for our own modules, none of which defines a flag or starts a thread on
# import), and TensorBoard's summary ops, which `tf.summary.scalar` imports
# at a command's first logged value (0.6 s of one core, measured, in every
# training command). Apache Beam's runner is left to the one command that
# uses it.
PRELOAD = ("tensorflow", "keras", "tensorflow_text", "matplotlib.pyplot",
           "tensorboard.summary.v2")
OUR_PACKAGES = ("keras_bert_impl", "tf_records", "training")
NOT_PRELOADED = ("tf_records.beam_pretraining_data",)
MAX_SERVERS = 3  # per pytest worker; further environments run plain subprocesses
_servers = {}


def run_python(args, cwd, env, timeout=None):
    """`subprocess.run([sys.executable, *args], cwd=cwd, env=env,
    capture_output=True, text=True, timeout=timeout)`, forked from a server
    with TensorFlow imported (see the module docstring).

    Args:
        args: `["-m", module, ...]`, `["-c", code, ...]` or
            `[script, ...]`.
        cwd, env, timeout: as `subprocess.run`'s. On a timeout the
            command's process group is killed and `subprocess.TimeoutExpired`
            raised.

    Returns:
        A `subprocess.CompletedProcess`: `returncode` (negative: killed by
        that signal), `stdout` and `stderr` as text.
    """
    command = start_python(args, cwd, env)
    try:
        command.wait(timeout)
    except subprocess.TimeoutExpired:
        command.kill_group()
        raise subprocess.TimeoutExpired(command.args, timeout, *command.outputs()) from None
    return subprocess.CompletedProcess(command.args, command.returncode, *command.outputs())


def start_python(args, cwd, env):
    """`run_python`'s command started, not waited for: a `Command`."""
    return Command([str(a) for a in args], os.path.abspath(cwd), dict(env))


class Command:
    """A running `python *args`, forked by a server or (without one) a
    `subprocess.Popen`, in a process group of its own, its output going to
    temporary files; what tests use of `subprocess.Popen`: `args`, `pid`,
    `returncode`, `poll`, `wait`, `send_signal`; `kill_group()` ends it and
    whatever it started, `outputs()` gives `(stdout, stderr)`."""

    def __init__(self, args, cwd, env):
        self.args = [sys.executable, *args]
        self.returncode = None
        self._files = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self._received = b""
        self._popen = self._conn = None
        server = _server_for(env)
        if server is None:
            self._popen = subprocess.Popen(self.args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                           stdout=self._files[0], stderr=self._files[1],
                                           start_new_session=True)
            self.pid = self._popen.pid
            return
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._conn.connect(server.path)
        except ConnectionRefusedError:  # the server died (killed for memory?): a new one
            _servers.pop(server.key).close()
            self._conn.connect(_server_for(env).path)
        request = json.dumps({"args": args, "cwd": cwd, "env": env}).encode() + b"\n"
        socket.send_fds(self._conn, [request], [f.fileno() for f in self._files])
        self.pid = int(self._line(None))

    def poll(self):
        """The exit status if the command has ended, else None."""
        if self.returncode is None:
            if self._popen is not None:
                self.returncode = self._popen.poll()
            else:
                try:
                    self._ended(self._line(0))
                except TimeoutError:
                    pass
        return self.returncode

    def wait(self, timeout=None):
        """The exit status, once the command ends; `subprocess.TimeoutExpired`
        after `timeout` seconds (the command goes on)."""
        if self.returncode is None:
            try:
                if self._popen is not None:
                    self.returncode = self._popen.wait(timeout)
                else:
                    self._ended(self._line(timeout))
            except (TimeoutError, subprocess.TimeoutExpired):
                raise subprocess.TimeoutExpired(self.args, timeout) from None
        return self.returncode

    def send_signal(self, sig):
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(self.pid, sig)

    def kill_group(self):
        """SIGKILL to the command's process group, then waits for it."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(self.pid, signal.SIGKILL)
            self.wait()

    def outputs(self):
        """`(stdout, stderr)` so far, as `subprocess.run(text=True)` gives them."""
        texts = []
        for file in self._files:
            file.seek(0)
            texts.append(file.read().decode().replace("\r\n", "\n").replace("\r", "\n"))
        return tuple(texts)

    def _ended(self, status):
        self.returncode = int(status)
        self._conn.close()

    def _line(self, timeout):
        """The server's next line; `TimeoutError` if none came in `timeout`
        seconds (0: none waiting; None: no limit)."""
        self._conn.settimeout(timeout)
        while b"\n" not in self._received:
            try:
                chunk = self._conn.recv(64)
            except BlockingIOError:
                raise TimeoutError from None
            if not chunk:
                raise ConnectionError(f"the command server hung up after {self._received!r}")
            self._received += chunk
        line, self._received = self._received.split(b"\n", 1)
        return line.decode()

    def __del__(self):
        for file in self._files:
            file.close()
        if self._conn is not None:
            self._conn.close()


class _Server:
    """A server process (this file run as a script) listening on a Unix
    socket in the abstract namespace (no file to clean up, no path length
    limit); its start-up errors in a temporary file."""

    def __init__(self, key, env):
        self.key = key
        name = f"kbi-fork-{os.getpid()}-{secrets.token_hex(8)}"
        self.path = "\0" + name
        self._errors = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), name], cwd=ROOT, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._errors)
        ready = self.process.stdout.readline()
        if ready != b"ready\n":
            self.process.kill()
            self.process.wait()
            self._errors.seek(0)
            errors = self._errors.read().decode()[-3000:]
            self.close()
            raise RuntimeError("the test command server did not start (KBI_TESTS_FORK=0 runs "
                               "commands without it):\n" + errors)

    def close(self):
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()
        self._errors.close()


def _server_for(env):
    """The server for `env` (started on first use), or None: forking off,
    or too many environments already."""
    if os.environ.get("KBI_TESTS_FORK", "1") == "0":
        return None
    # The server imports `training` from the checkout: only for commands
    # that would too.
    if ROOT not in env.get("PYTHONPATH", "").split(os.pathsep):
        return None
    key = tuple(sorted((k, v) for k, v in env.items() if k not in PER_COMMAND))
    if key not in _servers:
        if len(_servers) >= MAX_SERVERS:
            return None
        if not _servers:
            import atexit

            atexit.register(_close_all)
        _servers[key] = _Server(key, {k: v for k, v in env.items() if k not in PER_COMMAND})
    return _servers[key]


def _close_all():
    for server in _servers.values():
        server.close()
    _servers.clear()


# The server side: this file run as a script.

def _serve(address):
    """Imports TensorFlow and Keras, then forks a waiter per request, which
    forks the command's process and reports its pid and exit status. Returns
    only in a command's process: its request and descriptors."""
    from tf_records.command_line import keras_extras  # on PYTHONPATH (`_server_for`)

    keras_extras.leave_out_of_keras()
    import matplotlib

    matplotlib.use("Agg")  # as our charts do
    for name in PRELOAD:
        importlib.import_module(name)
    for package in OUR_PACKAGES:
        for module in pkgutil.walk_packages(importlib.import_module(package).__path__,
                                            package + "."):
            if module.name not in NOT_PRELOADED:
                importlib.import_module(module.name)
    # What the imports made stays out of the garbage collector's walks: the
    # commands' collections neither walk nor copy those pages.
    gc.freeze()

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + address)  # the abstract namespace
    listener.listen(16)
    listener.settimeout(2.0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the waiters
    parent = os.getppid()
    print("ready", flush=True)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the pytest worker is gone
                os._exit(0)
            continue
        conn.settimeout(None)
        data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 2)
        while not data.endswith(b"\n"):
            data += conn.recv(1 << 16)
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            request = json.loads(data)
            xla_folder = xla_cache.private_folder() if xla_cache.POOL in request["env"] else None
            pid = os.fork()
            if pid == 0:
                conn.close()
                return request, fds, xla_folder
            for fd in fds:
                os.close(fd)
            conn.sendall(f"{pid}\n".encode())
            _, status = os.waitpid(pid, 0)
            if xla_folder:
                if status == 0:  # a killed command may have been writing an entry
                    xla_cache.publish(xla_folder)
                xla_cache.remove(xla_folder)
            conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            os._exit(0)
        conn.close()
        for fd in fds:
            os.close(fd)


def _become(request, fds, xla_folder):
    """Turns this forked process into `python *args` as `subprocess.run`
    would start it; returns the code to run as `__main__`."""
    os.setsid()  # its own process group: a timeout kills it and what it started
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if xla_folder:
        xla_cache.use(xla_folder)
    tempfile.tempdir = None  # TMPDIR is the command's
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (fds[0], 1), (fds[1], 2)):
        os.dup2(fd, target)
        os.close(fd)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()  # a fresh interpreter's seeds it from the OS
    args = request["args"]
    if args[0] == "-m":
        sys.argv = [args[1], *args[2:]]
        sys.path[0] = os.getcwd()
        return lambda: runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    if args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        sys.path[0] = ""
        return lambda: _run_code(compile(args[1], "<string>", "exec"))
    sys.argv = list(args)
    sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
    return lambda: runpy.run_path(args[0], run_name="__main__")


def _run_code(code):
    import types

    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


if __name__ == "__main__":
    _become(*_serve(sys.argv[1]))()
