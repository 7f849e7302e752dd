"""The commands and their recipes.

At the top, the entry points whose module paths users type:
`pretrain`, `finetune`, `ablations`, `learn_vocab` and
`convert_checkpoint` (`python -m training.pretrain`, or `kbi-pretrain`).
One package per model family holds what is its own: `bert/`, `gpt/`,
`elmo/`, `xlnet/` (pretraining recipes and, but for BERT, fine-tuning
tasks), and `ablation/` the Table 5 comparison; no family imports another.
What the commands share is grouped by concern: `run/` (optimizer,
checkpoints, strategies, progress and TensorBoard logs, curves, flags from
dataclasses), `pretraining/` (`PretrainConfig`, checks, the fit loop,
continued pretraining, held-out evaluation, the default corpus) and
`finetuning/` (`FinetuneConfig`, checks, BERT's tasks, the fit loop).
`tasks/` holds the fine-tuning datasets' readers and official metrics
(GLUE, SQuAD, CoNLL-2003, SWAG, CSV/TSV classification), which import only
the library.
"""
