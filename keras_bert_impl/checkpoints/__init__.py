"""Checkpoint interoperability: original Google TF1 and Hugging Face."""

from keras_bert_impl.checkpoints.google_checkpoint import load_google_checkpoint
from keras_bert_impl.checkpoints.google_checkpoint import save_google_checkpoint
from keras_bert_impl.checkpoints.hf_checkpoint import load_hf_checkpoint
from keras_bert_impl.checkpoints.hf_checkpoint import save_hf_checkpoint
from keras_bert_impl.checkpoints.load_backbone import find_vocab_file
from keras_bert_impl.checkpoints.load_backbone import load_backbone
