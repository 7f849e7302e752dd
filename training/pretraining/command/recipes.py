"""The run's steps that call a family's recipe hooks: `make_recipe` builds
the recipe of `--model` (found through `training.pretraining.recipe`'s
registry), `prepare_data` writes or finds its data. Both import no
TensorFlow (the command imports this module before its console starts)."""

import os

from tf_records.manifest import MANIFEST_FILE
from training.pretraining.common import records_input
from training.pretraining.common import text_sources
from training.pretraining.recipe import pretrain_recipe


def make_recipe(cfg, init=None, manifests=None, **own):
    """The recipe of `cfg.model` for this run (`init`: the `InitCheckpoint`
    continued from; `manifests`: the records' manifests the run has read;
    `own`: the family's own keywords, e.g. BERT's `records_prefix`), its
    flags checked before anything is written. The recipe gets the values of
    the flags its class names (`flags`), never `cfg` itself."""
    family = pretrain_recipe(cfg.model)
    if not family.takes_input_format and cfg.input_format != "segment_pair":
        raise SystemExit(f"--input_format={cfg.input_format!r} is an option of BERT's records "
                         f"(--model=bert); --model={cfg.model} writes its own.")
    return family(init, manifests, **own, **{name: getattr(cfg, name) for name in family.flags})


def prepare_data(recipe, cfg):
    """-> (train records, held-out records or None, vocabulary file or None).

    `--input`'s TFRecords as they are (`recipe.given_records`); text (the
    default corpus without `--input`) is written once into the run's data
    folder, with the vocabulary learned from it unless `--vocab_file`
    names one (`recipe.learned_vocab`): each side by the family's
    `side_writer`, unless an earlier start of this run wrote it.
    """
    given = records_input(cfg)
    if given:
        return recipe.given_records(given)
    data_dir, train_files, heldout_files = text_sources(cfg)
    vocab_file = cfg.vocab_file or recipe.learned_vocab(data_dir, train_files)
    sides = {"train": train_files, "heldout": heldout_files}
    write = recipe.side_writer(data_dir, vocab_file, sides)
    sources = {}
    for side, files in sides.items():
        if not files:
            continue
        folder = recipe.records_folder(data_dir, side)
        if os.path.exists(os.path.join(folder, MANIFEST_FILE)) or write(side, files, folder):
            sources[side] = folder
    return sources["train"], sources.get("heldout"), vocab_file
