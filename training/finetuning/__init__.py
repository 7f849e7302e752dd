"""What `training.finetune` is made of besides the families' own tasks:
`runner.py` (the run's steps), `resolve.py` (the one pass from flags to
the final config), `config.py` (`FinetuneConfig`, the flags' help),
`checks.py` (flags, paths and every data split checked before anything is
written), `recipe.py` (`FinetuneRecipe`, the registry picking a family's
by `--model`, and what the families' recipes share), `tasks.py` (BERT's
GLUE, SQuAD, CoNLL NER and SWAG tasks, which every family's tasks build
on), `text_classification.py` (your own CSV / TSV / JSON Lines), `loop.py`
(the resumable fit loop and dev scoring) and `vocab_checks.py` (a
vocabulary must be its checkpoint's)."""
