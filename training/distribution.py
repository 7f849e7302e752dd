"""`--strategy=auto|cpu|mirrored|multi_worker|tpu` -> a `tf.distribute.Strategy`."""

import json
import os

# TensorFlow is imported where a strategy is made: the flag checks read
# `STRATEGIES` before anything heavy, so a bad flag stops in a moment.
STRATEGIES = ("auto", "cpu", "mirrored", "multi_worker", "tpu")


def make_strategy(name="auto", tpu=""):
    """The strategy for `name`.

    auto: TPU when `tpu` is given, else mirrored over the GPUs when there are
    several, else the default (one device). mirrored: all GPUs, or all
    logical CPU devices on a host without GPUs. tpu: `TPUClusterResolver(tpu=...)`
    ("local" on Colab / Cloud TPU VMs). multi_worker: reads `TF_CONFIG`.
    """
    import tensorflow as tf

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
    import tensorflow as tf

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
