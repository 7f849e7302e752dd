"""What `training.finetune` is made of besides the families' own tasks:
`config.py` (`FinetuneConfig`, the flags' help, `resolve`), `checks.py`
(flags, paths and every data split checked before anything is written),
`tasks.py` (BERT's GLUE, SQuAD, CoNLL NER and SWAG tasks, which every
family's tasks build on), `text_classification.py` (your own CSV / TSV /
JSON Lines), `loop.py` (the resumable fit loop and dev scoring) and
`vocab_checks.py` (a vocabulary must be its checkpoint's)."""
