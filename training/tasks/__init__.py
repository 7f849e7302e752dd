"""Fine-tuning tasks: the paper's datasets in their usual files, and their metrics.

GLUE (`glue`), SQuAD v1.1/v2.0 (`squad`, `squad_metrics`), CoNLL-2003 NER
(`conll`), SWAG (`swag`); `windows` splits long inputs into overlapping
windows and picks each token's best window, as the original `run_squad.py`.
Only fine-tuning (`training.finetuning` and the families' fine-tuning
recipes) reads them. Uses the library (`keras_bert_impl`) and nothing else
of ours; the library never imports this.
"""
