"""What the families' checkpoint converters share: Hub names
(`hub_names`), Hugging Face folders' files (`hf_files`) and
`config.json` (`hf_config`), keras-hub presets
(`keras_hub_common`) and `.keras` files (`keras_files`). BERT's converters
live in `keras_bert_impl.bert`. Their names stay importable from here, the
path the guides show (`from keras_bert_impl.checkpoints import
load_backbone`), looked up when first used: loading this room imports no
family.
"""

from keras_bert_impl.base.lazy_names import lazy_names
from keras_bert_impl.checkpoints.keras_files import check_keras_file

# BERT's names, by the module that defines them.
_BERT = {
    "load_google_checkpoint": "keras_bert_impl.bert.google_checkpoint",
    "save_google_checkpoint": "keras_bert_impl.bert.google_checkpoint",
    "load_hf_checkpoint": "keras_bert_impl.bert.hf_checkpoint",
    "save_hf_checkpoint": "keras_bert_impl.bert.hf_checkpoint",
    "keras_hub_preset_vocab": "keras_bert_impl.bert.keras_hub_preset",
    "load_keras_hub_preset": "keras_bert_impl.bert.keras_hub_preset",
    "save_keras_hub_preset": "keras_bert_impl.bert.keras_hub_preset",
    "find_vocab_file": "keras_bert_impl.bert.load_backbone",
    "load_backbone": "keras_bert_impl.bert.load_backbone",
}


__getattr__, __dir__ = lazy_names(__name__, _BERT)
