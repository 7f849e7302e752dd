"""What `training.pretrain` is made of besides the families' recipes:
`config.py` (`PretrainConfig`, the flags' help, each family's defaults),
`checks.py` (flags, paths and records checked before anything is written),
`recipe.py` (the recipes' base and registry), `common.py` (what every
recipe shares), `command/` (the run above the recipes: the resumable fit
loop, the steps that call the recipes' hooks),
`continued.py` (`--init_checkpoint`), `evaluation.py` (the held-out
evaluation after training) and `default_corpus.py` (the corpus that needs no
download, which the ablations also pretrain on)."""
