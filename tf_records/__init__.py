"""Pretraining data: text -> NSP pairs + MLM masking -> sharded TFRecords -> tf.data."""
