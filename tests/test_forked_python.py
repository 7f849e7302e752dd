"""`forked_python.run_python` against `subprocess.run` on the same commands."""

import os
import signal
import subprocess
import sys
import time

import forked_python
import pytest
from forked_python import run_python
from forked_python import start_python

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
PROBE = """\
import os, sys, tempfile
print(__name__, sys.argv, sys.path[0], os.getcwd(), tempfile.gettempdir(), os.getpid())
sys.stdout.write("progress 1\\rprogress 2\\r\\n")
sys.stderr.write("to stderr\\n")
sys.exit(int(sys.argv[-1]))
"""


def _plain(args, cwd, env, timeout=None):
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _without_pid(result):
    lines = result.stdout.splitlines()
    return result.returncode, [lines[0].rsplit(" ", 1)[0], *lines[1:]], result.stderr


def test_module_script_and_code_run_as_a_fresh_interpreter_runs_them(tmp_path):
    """`-m`, a script and `-c`: the same `__name__`, `sys.argv`,
    `sys.path[0]`, working folder, TMPDIR, output (carriage returns as
    `text=True` turns them) and exit status; a process of its own."""
    (tmp_path / "probe_module.py").write_text(PROBE)
    (tmp_path / "temp").mkdir()
    env = dict(ENV, TMPDIR=str(tmp_path / "temp"))
    for args in (["-m", "probe_module", "a b", "3"], [str(tmp_path / "probe_module.py"), "0"],
                 ["-c", PROBE, "x", "7"]):
        forked = run_python(args, tmp_path, env)
        assert _without_pid(forked) == _without_pid(_plain(args, tmp_path, env)), args
        assert int(forked.stdout.split()[-3]) != os.getpid()  # the pid printed


def test_errors_signals_and_timeouts_end_as_in_a_fresh_interpreter(tmp_path):
    """An uncaught exception: status 1 and its traceback; a `SystemExit`
    message: status 1 and the message; death by a signal: minus its number;
    a timeout: `subprocess.TimeoutExpired`, and the command's process group
    killed (its child too)."""
    raised = run_python(["-c", "raise ValueError('bad value 3')"], tmp_path, ENV)
    assert raised.returncode == 1 and raised.stderr.endswith("ValueError: bad value 3\n")
    message = run_python(["-c", "raise SystemExit('no such file: x')"], tmp_path, ENV)
    assert (message.returncode, message.stderr) == (1, "no such file: x\n")
    killed = run_python(["-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
                        tmp_path, ENV)
    assert killed.returncode == -signal.SIGKILL
    child = tmp_path / "child.pid"
    sleeper = ("import subprocess, sys, time\n"
               "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
               f"open({str(child)!r}, 'w').write(str(p.pid))\n"
               "time.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_python(["-c", sleeper], tmp_path, ENV, timeout=3)
    pid = int(child.read_text())
    deadline = time.time() + 10
    while _running(pid) and time.time() < deadline:
        time.sleep(0.05)
    assert not _running(pid)


def _running(pid):
    """Whether process `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

def test_tensorflow_starts_in_the_command_not_in_the_server(tmp_path):
    """The server imported TensorFlow and Keras but never ran an op: each
    command's eager context, threads and settings are its own (here two
    logical CPUs, which must be set before TensorFlow's runtime starts)."""
    code = ("import tensorflow as tf\n"
            "cpu = tf.config.list_physical_devices('CPU')[0]\n"
            "tf.config.set_logical_device_configuration(\n"
            "    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)\n"
            "print(len(tf.config.list_logical_devices('CPU')), float(tf.reduce_sum(tf.ones(3))))\n")
    for _ in range(2):
        result = run_python(["-c", code], tmp_path, ENV)
        assert (result.returncode, result.stdout) == (0, "2 3.0\n"), result.stderr[-2000:]


def test_a_started_command_is_polled_signalled_and_waited_for(tmp_path):
    """`start_python`: running until signalled (`poll` None, `wait` with a
    timeout raises), then ended by the signal, its output kept."""
    command = start_python(["-c", "import time; print('up', flush=True); time.sleep(60)"],
                           tmp_path, ENV)
    with pytest.raises(subprocess.TimeoutExpired):
        command.wait(1)
    assert command.poll() is None and command.outputs() == ("up\n", "")
    command.send_signal(signal.SIGTERM)
    assert command.wait(30) == -signal.SIGTERM == command.poll()


@pytest.mark.skipif(os.environ.get("KBI_TESTS_FORK") == "0", reason="no server without forking")
def test_a_dead_server_is_replaced(tmp_path):
    """A server killed under the tests (say, for memory) gives way to a new one."""
    server = forked_python._server_for(ENV)
    server.process.kill()
    server.process.wait()
    result = run_python(["-c", "print('after')"], tmp_path, ENV)
    assert (result.returncode, result.stdout) == (0, "after\n")
    assert forked_python._server_for(ENV) is not server


_COMPILE = """\
import os, subprocess, sys, time
import numpy as np
import tensorflow as tf
print("TF_XLA_FLAGS" in os.environ,
      subprocess.run([sys.executable, "-c", "import os; print('TF_XLA_FLAGS' in os.environ)"],
                     capture_output=True, text=True).stdout.strip(), flush=True)
def xla_cache_probe(x):  # its name is in its cache entry; no other test compiles it
    return tf.nn.relu(x) * float(sys.argv[1])
tf.function(xla_cache_probe, jit_compile=True)(tf.ones([8])).numpy()
print("compiled", flush=True)
if sys.argv[2] == "wait":
    time.sleep(60)
"""


@pytest.mark.skipif(os.environ.get("KBI_TESTS_FORK") == "0", reason="no server without forking")
def test_commands_share_xla_entries_only_whole_and_only_their_own(tmp_path):
    """`tests/xla_cache.py`: a command compiles into a folder of its own (its
    environment and its children's do not name it) and its entries reach
    the run's pool when it exits with status 0; a killed command's do not
    (it may have been cut off mid-write). This worker's own folder is used
    without `TF_XLA_FLAGS` in its environment."""
    import xla_cache

    def probes(folder):  # entries of `xla_cache_probe`, whatever else the run adds meanwhile
        found = []
        for name in sorted(os.listdir(folder)):
            if name.endswith(".pb"):
                with open(os.path.join(folder, name), "rb") as f:
                    if b"xla_cache_probe" in f.read():
                        found.append(name)
        return found

    pool = os.environ[xla_cache.POOL]
    assert probes(pool) == []
    result = run_python(["-c", _COMPILE, "3", "exit"], tmp_path, ENV, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["False False", "compiled"]
    assert len(probes(pool)) == 1  # a whole entry: TensorFlow wrote and closed it

    killed = start_python(["-c", _COMPILE, "5", "wait"], tmp_path, ENV)  # another constant
    deadline = time.time() + 120
    while "compiled" not in killed.outputs()[0] and time.time() < deadline:
        time.sleep(0.1)
    killed.kill_group()
    assert killed.wait(30) == -signal.SIGKILL
    assert len(probes(pool)) == 1

    import conftest
    import tensorflow as tf

    assert "tf_xla_persistent_cache_directory" not in os.environ.get("TF_XLA_FLAGS", "")
    before = len(probes(conftest._XLA_FOLDER))

    def xla_cache_probe(x):
        return x * 7.0

    tf.function(xla_cache_probe, jit_compile=True)(tf.ones([8])).numpy()
    assert len(probes(conftest._XLA_FOLDER)) == before + 1
