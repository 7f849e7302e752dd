"""Functions handed to tf.data (`map`, `flat_map`, `filter`) traced as
written, not rewritten by AutoGraph.

tf.data passes every such function through AutoGraph, which parses its
source (and that of each function it calls) and rewrites Python control
flow into graph ops the first time a process builds the dataset: 0.22 s of
one core for a fine-tuning command's length grouping, 0.24 s for BERT's
pretraining reader and 0.37 s for XLNet's, measured, in every command. Ours
branch on Python values only (flags, dict keys, static shapes), which
tracing handles as written, so `plain` marks them not to be converted. A
Python `if`, `for` or `assert` on a tensor in one of them would then fail
when the dataset is built, not run differently. `tests/test_tf_records.py`
checks that building our datasets converts none of our functions.
"""

import tensorflow as tf


def plain(fn):
    """`fn` for `Dataset.map` and the like, called without AutoGraph."""
    return tf.autograph.experimental.do_not_convert(fn)
