"""The run machinery every command shares: `optimization.py` (AdamW and LAMB
as the original, ELMo's Adagrad), `checkpointing.py` (step checkpoints, the
output folder's lock, the NaN guard), `distribution.py` (`--strategy` and the
CPU's slices and threads), `train_log.py` (progress lines and TensorBoard
scalars during `fit`), `curves.py` (`training_curves.png`) and
`config_flags.py` (absl flags made from a dataclass's fields). It imports
nothing of `training.pretraining` or `training.finetuning`."""
