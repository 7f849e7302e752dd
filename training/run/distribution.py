"""`--strategy=auto|cpu|mirrored|multi_worker|tpu` -> a `tf.distribute.Strategy`."""

import json
import os

# TensorFlow is imported where a strategy is made (each `lazy:` below): the
# flag checks read `STRATEGIES` before anything heavy, so a bad flag stops
# in a moment.
STRATEGIES = ("auto", "cpu", "mirrored", "multi_worker", "tpu")


def make_strategy(name="auto", tpu=""):
    """The strategy for `name`.

    auto: TPU when `tpu` is given, else mirrored over the GPUs when there are
    several, else the default (one device). mirrored: all GPUs, or all
    logical CPU devices on a host without GPUs. tpu: `TPUClusterResolver(tpu=...)`
    ("local" on Colab / Cloud TPU VMs). multi_worker: reads `TF_CONFIG`.
    """
    import tensorflow as tf  # lazy: see STRATEGIES

    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy {name!r}. Use one of {', '.join(STRATEGIES)}.")
    if name == "auto":
        if tpu:
            name = "tpu"
        elif len(tf.config.list_logical_devices("GPU")) > 1:
            name = "mirrored"
        else:
            name = "cpu"
    if name == "cpu":
        return tf.distribute.get_strategy()  # the default strategy: one device
    if name == "mirrored":
        if not tf.config.list_logical_devices("GPU"):
            # Mirrored over logical CPU devices (as tests configure them);
            # MirroredStrategy() alone would take only the first CPU.
            cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
            return tf.distribute.MirroredStrategy(cpus)
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError(
                "--strategy=multi_worker needs the TF_CONFIG environment variable "
                '(e.g. {"cluster": {"worker": ["host1:port", "host2:port"]}, '
                '"task": {"type": "worker", "index": 0}}).')
        try:
            json.loads(os.environ["TF_CONFIG"])
        except json.JSONDecodeError as e:
            raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from None
        return tf.distribute.MultiWorkerMirroredStrategy()
    return _tpu_strategy(tpu or "local")


def _tpu_strategy(tpu):
    import tensorflow as tf  # lazy: see STRATEGIES

    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise RuntimeError(
            f"No TPU reachable with --tpu={tpu!r}: {reason}. On a Colab or Cloud TPU VM use "
            "--tpu=local with the TPU runtime selected (and TensorFlow built for TPU, the "
            "`tensorflow-tpu` package); on a TPU node give its name or grpc:// address.") from None
    return tf.distribute.TPUStrategy(resolver)


def replicas_batch(strategy, global_batch_size):
    """Per-replica batch; `ValueError` unless the global batch divides evenly."""
    replicas = strategy.num_replicas_in_sync
    if global_batch_size % replicas:
        raise ValueError(
            f"The global batch {global_batch_size} does not divide by the {replicas} replicas.")
    return global_batch_size // replicas


def cpu_only(name, tpu=""):
    """Whether `make_strategy(name, tpu)` is the default strategy on a host
    without GPUs: one CPU device. Starts no TensorFlow runtime."""
    import tensorflow as tf  # lazy: see STRATEGIES

    return name in ("auto", "cpu") and not tpu and not tf.config.list_physical_devices("GPU")


def cpu_bfloat16(cpuinfo="/proc/cpuinfo"):
    """Whether this CPU has bfloat16 matmul instructions (x86 `avx512_bf16`
    or `amx_bf16`, from Linux's `cpuinfo`; False where that is not
    readable). Without them TensorFlow's bfloat16 matmuls are emulated and
    no faster than float32."""
    try:
        with open(cpuinfo, encoding="utf-8") as f:
            words = set(f.read().split())
    except OSError:
        return False
    return bool(words & {"avx512_bf16", "amx_bf16"})


def auto_mixed_precision(bfloat16_pays, strategy, tpu=""):
    """`--mixed_precision` not given: on for a family whose recipe says
    `bfloat16_pays` (BERT and XLNet) on a CPU with
    bfloat16 instructions and the default strategy (`cpu_only`). There
    BERT's main job measured 1.23x the real tokens/s of float32 (2 cores,
    both sliced) and 1.29x on one core, at the same held-out masked-LM
    accuracy (0.1676 against float32's 0.1663); XLNet's main job 1.38x the
    sequences/s on one core and 1.11x the wall time on 2 (84 s against 94
    s), held-out permutation-LM accuracy 0.266-0.268 against 0.257 and
    perplexity 81.9-82.0 against 84.7. Float32 elsewhere: GPT, ELMo
    and the other strategies keep the precision they were checked in."""
    return bool(bfloat16_pays) and cpu_only(strategy, tpu) and cpu_bfloat16()


def cpu_batch_slices(requested):
    """`--batch_slices` on a CPU: `requested`, or for 0 (auto) 2 where this
    process may run two ops at once on two cores (`BatchSlices`: measured
    on 2 cores), else 1: on one core, or with `TF_NUM_INTEROP_THREADS=1`,
    the slices would run one after the other (5-7% slower than whole
    batches, measured)."""
    if requested:
        return requested
    cores = len(os.sched_getaffinity(0))
    side_by_side = min(cores, int(os.environ.get("TF_NUM_INTEROP_THREADS") or 0) or cores)
    return 2 if side_by_side >= 2 else 1


def cpu_op_threads(slices):
    """Gives each of `slices` side-by-side branches of a step its share of
    this process's cores: TensorFlow's op threads set to cores // slices
    (at least 1). Speed only; values do not depend on it.

    Returns the op threads: those set, those `TF_NUM_INTRAOP_THREADS` sets
    (left as they are), or None where TensorFlow is already running in
    this process with other op threads (its thread pools are then fixed).
    """
    import tensorflow as tf  # lazy: see STRATEGIES

    if os.environ.get("TF_NUM_INTRAOP_THREADS"):
        return int(os.environ["TF_NUM_INTRAOP_THREADS"])
    threads = max(1, len(os.sched_getaffinity(0)) // slices)
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    except RuntimeError:  # "cannot be modified after initialization"
        return None
    return threads
