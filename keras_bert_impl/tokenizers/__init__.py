"""Tokenization: BasicTokenizer + WordPiece, as the original BERT."""

from keras_bert_impl.tokenizers.basic_tokenizer import BasicTokenizer
from keras_bert_impl.tokenizers.bert_preprocessor import BertPreprocessor
from keras_bert_impl.tokenizers.bert_tokenizer import BertTokenizer
from keras_bert_impl.tokenizers.bert_tokenizer import padded_inputs
from keras_bert_impl.tokenizers.bert_tokenizer import truncate_seq_pair
from keras_bert_impl.tokenizers.graph_tokenizer import GraphBertTokenizer
from keras_bert_impl.tokenizers.wordpiece import WordpieceTokenizer
from keras_bert_impl.tokenizers.wordpiece import load_vocab
