"""What the families' tokenizers share: the original BasicTokenizer in Python
(`basic_tokenizer`) and in TensorFlow ops (`graph_basic_tokenizer`), and
pair truncation in Python (`pairs`) and in the graph (`graph_pairs`).
BERT's WordPiece tokenizers live in `keras_bert_impl.bert`. Their names
stay importable from here, the path the guides have always shown (`from
keras_bert_impl.tokenizers import BertTokenizer`), looked up when first
used: loading this room imports no family.
"""

from keras_bert_impl.base.lazy_names import lazy_names
from keras_bert_impl.tokenizers.basic_tokenizer import BasicTokenizer
from keras_bert_impl.tokenizers.pairs import truncate_seq_pair

# BERT's names, by the module that defines them.
_BERT = {
    "BertPreprocessor": "keras_bert_impl.bert.bert_preprocessor",
    "BertTokenizer": "keras_bert_impl.bert.bert_tokenizer",
    "padded_inputs": "keras_bert_impl.bert.bert_tokenizer",
    "GraphBertTokenizer": "keras_bert_impl.bert.graph_bert_tokenizer",
    "WordpieceTokenizer": "keras_bert_impl.bert.wordpiece",
    "load_vocab": "keras_bert_impl.bert.wordpiece",
}


__getattr__, __dir__ = lazy_names(__name__, _BERT)
