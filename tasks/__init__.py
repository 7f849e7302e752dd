"""Fine-tuning tasks: the paper's datasets in their usual files, and their metrics.

GLUE (`glue`), SQuAD v1.1/v2.0 (`squad`, `squad_metrics`), CoNLL-2003 NER
(`conll`), SWAG (`swag`); `windows` splits long inputs into overlapping
windows and picks each token's best window, as the original `run_squad.py`.
Uses the library (`keras_bert_impl`); the library never imports this.
"""
