"""`training.run.distribution`: the CPU's batch slices and op threads, its
bfloat16 instructions read from the CPU's flags, and the strategies'
refusals."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)


def test_batch_slices_and_op_threads_follow_the_cores():
    """`cpu_batch_slices(0)` is 2 where two ops can run at once on two
    cores, else 1 (one core, or one inter-op thread); `cpu_op_threads` sets
    TensorFlow's op threads to cores // slices before TensorFlow starts,
    leaves `TF_NUM_INTRAOP_THREADS` alone, and says None where TensorFlow
    already runs with other threads."""
    script = (
        "import os, sys\n"
        "from training.run.distribution import cpu_batch_slices, cpu_op_threads\n"
        "auto = cpu_batch_slices(0)\n"
        "os.environ['TF_NUM_INTEROP_THREADS'] = '1'\n"
        "one_inter = cpu_batch_slices(0)\n"
        "del os.environ['TF_NUM_INTEROP_THREADS']\n"
        "cores = os.sched_getaffinity(0)\n"
        "os.sched_setaffinity(0, [min(cores)])\n"
        "one_core = cpu_batch_slices(0)\n"
        "os.sched_setaffinity(0, cores)\n"
        "print(auto, one_inter, one_core, cpu_batch_slices(3))\n"
        "print(cpu_op_threads(2))\n"
        "import tensorflow as tf\n"
        "tf.constant(1) + 1\n"
        "print(tf.config.threading.get_intra_op_parallelism_threads(), cpu_op_threads(1))\n"
        "os.environ['TF_NUM_INTRAOP_THREADS'] = '3'\n"
        "print(cpu_op_threads(2))\n")
    env = {k: v for k, v in ENV.items() if k not in ("TF_NUM_INTRAOP_THREADS",
                                                      "TF_NUM_INTEROP_THREADS")}
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    cores = len(os.sched_getaffinity(0))
    share = max(1, cores // 2)
    # One slice wants every core: no longer possible once TensorFlow runs.
    later = "None" if cores != share else str(cores)
    assert result.stdout.split() == [
        "2" if cores >= 2 else "1", "1", "1", "3",
        str(share), str(share), later, "3"], result.stdout


def test_cpu_bfloat16_reads_the_cpu_flags(tmp_path):
    """bfloat16 instructions are read from the CPU's flags: AVX-512 BF16 or
    AMX-BF16; a CPU without them, or no cpuinfo, says no."""
    from training.run.distribution import cpu_bfloat16

    cpuinfo = tmp_path / "cpuinfo"
    for flags_line, expected in (("fpu avx2 avx512f avx512_bf16 avx512_vnni", True),
                                 ("fpu avx2 amx_bf16 amx_tile", True),
                                 ("fpu avx2 avx512f avx512_vnni avx512_fp16", False)):
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags_line}\n\n"
                           f"processor\t: 1\nflags\t\t: {flags_line}\n")
        assert cpu_bfloat16(str(cpuinfo)) is expected, flags_line
    assert cpu_bfloat16(str(tmp_path / "missing")) is False


def test_strategy_errors_say_what_is_missing(monkeypatch):
    from training.run.distribution import make_strategy
    from training.run.distribution import replicas_batch

    with pytest.raises(RuntimeError, match="No TPU reachable with --tpu='local'.*TPU runtime"):
        make_strategy("tpu", "local")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="needs the TF_CONFIG environment variable"):
        make_strategy("multi_worker")
    with pytest.raises(ValueError, match="Unknown strategy 'gpu'"):
        make_strategy("gpu")
    strategy = make_strategy("cpu")
    assert replicas_batch(strategy, 32) == 32

    class TwoReplicas:
        num_replicas_in_sync = 2

    with pytest.raises(ValueError, match="global batch 33 does not divide by the 2 replicas"):
        replicas_batch(TwoReplicas(), 33)
