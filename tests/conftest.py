import gc
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Each pytest-xdist worker gets its share of the cores for TensorFlow's op
# threads (1 under `-n 2` on 2 cores), and so does every command it runs,
# which inherits the environment. Left alone, each worker sized its pool to
# all the cores, and four busy threads on two cores waited on each other.
# Measured: two concurrent main jobs (1,000 steps) took 172 s with one op
# thread each against 191 s with two, with equal losses to the last digit.
# The same for the pool that runs independent ops side by side (inter-op):
# two concurrent `tiny` train-step loops took 64.6 s and 58.0 s with one
# such thread each against 67.2 s and 61.7 s with two.
# Set in workers only: the controller's environment is every worker's start.
if "PYTEST_XDIST_WORKER" in os.environ:
    _CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    _SHARE = max(1, _CORES // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(_SHARE))
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", str(_SHARE))
    # And NumPy's, SciPy's and scikit-learn's pools (OpenBLAS, OpenMP), set
    # before NumPy is imported: the MiniLM test's bag-of-words baseline
    # (LogisticRegressionCV) took 2.1 s and 3.6 s of CPU with one BLAS thread
    # against 6.1 s and 12.9 s with two, whose threads spin between calls.
    for _pool in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(_pool, str(_SHARE))
import xla_cache  # noqa: E402  (pytest put this folder on sys.path)

# The run's XLA compilation cache (`tests/xla_cache.py`): the controller (or
# a run without workers) makes its pool, every process inherits the name.
_OWN_XLA_POOL = None
if "PYTEST_XDIST_WORKER" not in os.environ and xla_cache.POOL not in os.environ:
    _OWN_XLA_POOL = xla_cache.make_pool()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from keras_bert_impl import BertConfig  # noqa: E402

# This process's own folder of the cache, published to the pool between tests.
_XLA_FOLDER = xla_cache.private_folder()
if _XLA_FOLDER:
    xla_cache.use(_XLA_FOLDER)

# TensorFlow and Keras leave ~1M long-lived objects behind their imports;
# frozen, no garbage collection walks them again (each full collection
# cost ~1 s per test).
gc.freeze()


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Every test starts in float32 with a fresh graph and a fixed seed."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    if _XLA_FOLDER:  # nothing compiles between tests
        xla_cache.publish(_XLA_FOLDER)
        xla_cache.refresh(_XLA_FOLDER)
    keras.config.set_dtype_policy("float32")
    # Without the full garbage collection clear_session() runs by default:
    # Python's own collector still frees cycles as the suite goes.
    keras.backend.clear_session(free_memory=False)


@pytest.fixture
def odd_config():
    """Odd sizes so that swapped axes fail loudly."""
    return BertConfig(
        vocab_size=99,
        hidden_size=12,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=37,
        max_position_embeddings=16,
        type_vocab_size=2,
    )


def make_inputs(batch=3, seq=7, vocab=99, predictions=None, seed=0, pad_last=2):
    """Random BERT inputs; the last `pad_last` positions of row 0 are padding."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, (batch, seq)).astype("int32")
    mask = np.ones_like(ids)
    if pad_last:
        mask[0, -pad_last:] = 0
        ids[0, -pad_last:] = 0
    types = (np.arange(seq)[None] >= seq // 2).astype("int32").repeat(batch, 0) * mask
    x = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
    if predictions:
        x["masked_lm_positions"] = np.sort(
            rng.integers(1, seq - pad_last, (batch, predictions)), axis=1
        ).astype("int32")
    return x


def pytest_collection_modifyitems(config, items):
    """Longest first (stable otherwise): with `-n 2` the two workers start
    on the longest tests and the short ones fill in around them. A slow
    test may say how long it takes, `@pytest.mark.slow(seconds=300)`
    (measured on 2 cores); unmarked, a slow test counts 30 s, others 0."""
    def expected_seconds(item):
        marker = item.get_closest_marker("slow")
        return marker.kwargs.get("seconds", 30) if marker else 0

    items.sort(key=lambda item: -expected_seconds(item))


def pytest_unconfigure(config):
    """The run's XLA cache goes with the run that made it."""
    if _OWN_XLA_POOL:
        xla_cache.remove(_OWN_XLA_POOL)
