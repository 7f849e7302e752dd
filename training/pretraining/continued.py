"""Continued pretraining: `training.pretrain --init_checkpoint=...` (BERT,
GPT, XLNet).

How SciBERT, BioBERT and Chinese-BERT-wwm were made, and the original
repository's advice for a domain corpus: start from released weights and
pretrain further on your own text. The checkpoint decides what a fresh run
would choose:

- the model's size (its config; `--preset`, `--config_file` or
  `--vocab_size` typed with other values are refused, naming the field);
- the vocabulary and casing (its `vocab.txt` and, where the checkpoint says,
  its casing; a typed `--vocab_file` or `--do_lower_case` that differs, or
  records written with another vocabulary or casing, are refused naming
  both);
- the pretraining heads: loaded when the checkpoint has them (Hugging Face
  `BertForPreTraining` / `BertForMaskedLM`, Google `cls/predictions/*` and
  `cls/seq_relationship/*`, a `.keras` pretrainer), else fresh, said in a line;
- the learning rate when none is typed: `CONTINUED_LEARNING_RATE`, the
  original's 2e-5 for pretraining from a checkpoint, not the from-scratch 2e-3.

A BERT checkpoint is a Hugging Face folder, a Google folder or prefix, a
`.keras` file, a keras-hub preset folder, or a Hub repository id
(`keras_bert_impl.checkpoints.hub_names`). GPT's and XLNet's are Hugging
Face folders (`openai-gpt`, `xlnet-base-cased` layouts) or Hub ids, with
their vocabularies beside them (vocab.json + merges.txt; spiece.model); GPT's
LM head is its token table and XLNet's its table plus `lm_loss.bias`
(loaded when the folder has it). Their size comes from the folder: a typed
`--preset` or `--config_file` is refused.
"""

import dataclasses
import json
import os
import re

import keras

from keras_bert_impl import preset
from keras_bert_impl.base.sequence_checks import check_fits_positions
from keras_bert_impl.bert.bert_config import BertConfig
from keras_bert_impl.bert.bert_pretrainer import BertCausalLMPretrainer
from keras_bert_impl.bert.google_checkpoint import load_google_checkpoint
from keras_bert_impl.bert.google_checkpoint import save_google_checkpoint
from keras_bert_impl.bert.hf_checkpoint import load_hf_checkpoint
from keras_bert_impl.bert.hf_checkpoint import read_hf_config
from keras_bert_impl.bert.hf_checkpoint import save_hf_checkpoint
from keras_bert_impl.bert.keras_hub_preset import keras_hub_preset_vocab
from keras_bert_impl.bert.keras_hub_preset import load_keras_hub_preset
from keras_bert_impl.bert.keras_hub_preset import save_keras_hub_preset
from keras_bert_impl.bert.load_backbone import checkpoint_format
from keras_bert_impl.bert.load_backbone import find_vocab_file
from keras_bert_impl.checkpoints.hub_names import resolve_checkpoint
from keras_bert_impl.checkpoints.keras_files import check_keras_file
from tf_records.manifest import file_sha256
from training.pretraining.checks import records_manifest
from training.pretraining.common import say
from training.pretraining.common import write_json
from training.pretraining.recipe import FAMILIES
from training.pretraining.recipe import has_manifest
from training.pretraining.recipe import pretrain_recipe

# The original README's learning rate for pretraining from a BERT checkpoint
# (its run_pretraining example); 2e-5 to 5e-5 is the usual range.
CONTINUED_LEARNING_RATE = 2e-5

START_EVALUATION = "start_evaluation.json"  # held-out scores of the checkpoint, before step 1


@dataclasses.dataclass(frozen=True)
class InitCheckpoint:
    """What `--init_checkpoint` holds. `path`: the local file or folder (a
    Hub name resolved); `kind`: hf, google or keras; `do_lower_case`: None
    where the checkpoint does not say."""

    typed: str
    path: str
    kind: str
    config: object  # BertConfig, GptConfig or XLNetConfig
    vocab_file: str | None
    do_lower_case: bool | None


def read_init_checkpoint(typed, model="bert"):
    """The `InitCheckpoint` of a path or Hub name; `SystemExit` naming it if unreadable."""
    family = pretrain_recipe(model)
    if family.checkpoint_formats == ("hf",):
        return _read_hf_family(typed, model, family)
    try:
        path = resolve_checkpoint(typed)
        kind = checkpoint_format(path)
        if kind == "hf":
            config = read_hf_config(path)
        elif kind == "google":
            folder = path if os.path.isdir(path) else os.path.dirname(path)
            config = BertConfig.from_json_file(os.path.join(folder, "bert_config.json"))
        elif kind == "keras_hub":
            model = load_keras_hub_preset(path)
            config = getattr(model, "backbone", model).bert_config
        else:
            config = _keras_model(path).backbone.bert_config
    except (ValueError, OSError) as e:
        raise SystemExit(f"--init_checkpoint={typed}: {e}") from None
    if path != typed:
        say(f"--init_checkpoint={typed}: the Hub's files in {path}")
    return InitCheckpoint(typed, path, kind, config, find_vocab_file(path) if kind != "keras"
                          else None, _casing(path, kind))


def _keras_hub_casing(path):
    return keras_hub_preset_vocab(path).lowercase


def _read_hf_family(typed, model, family):
    """The `InitCheckpoint` of a family that continues from Hugging Face
    folders only (GPT, XLNet): a folder or a Hub name."""
    try:
        path = resolve_checkpoint(typed)
        if not os.path.isdir(path):
            raise ValueError(f"{path}: no such folder (--model={model} continues from a Hugging "
                             "Face folder or a Hub name).")
        config = family.read_hf_config(path)
    except (ValueError, OSError) as e:
        raise SystemExit(f"--init_checkpoint={typed}: {e}") from None
    if path != typed:
        say(f"--init_checkpoint={typed}: the Hub's files in {path}")
    vocab = os.path.join(path, family.vocab_name)
    casing = None
    if family.cased_releases:  # cased, as fine-tuning assumes, unless the folder says
        casing = _casing(path, "hf")
        casing = False if casing is None else casing
    return InitCheckpoint(typed, path, "hf", config, vocab if os.path.exists(vocab) else None,
                          casing)


def _keras_model(path):
    check_keras_file(path)
    model = keras.saving.load_model(path, compile=False)
    if not hasattr(model, "backbone") or not hasattr(model.backbone, "bert_config"):
        raise ValueError(f"{path} holds a {type(model).__name__}, not a BERT pretrainer.")
    return model


def _casing(path, kind):
    """do_lower_case as the checkpoint says: Hugging Face's
    `tokenizer_config.json`; for Google's, the release's name, as the
    original's `validate_case_matches_checkpoint` reads it; else None."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    if kind == "keras_hub":  # its tokenizer's lowercase
        return _keras_hub_casing(path)
    if kind == "hf":
        settings = os.path.join(folder, "tokenizer_config.json")
        if os.path.exists(settings):
            with open(settings, encoding="utf-8") as f:
                value = json.load(f).get("do_lower_case")
            return value if isinstance(value, bool) else None
        return None
    if kind == "google":
        name = os.path.basename(os.path.normpath(folder)).lower()
        if re.search(r"(^|[^a-z])uncased", name):
            return True
        if re.search(r"(^|[^a-z])cased", name):
            return False
    return None


def with_init_checkpoint(cfg, explicit, manifests=None):
    """`(cfg, InitCheckpoint)`: `cfg` with the checkpoint's vocabulary,
    casing and (unless typed) learning rate, each change said in a line;
    typed flags the checkpoint contradicts are refused, naming both.
    `manifests`: the records' manifests
    (`training.pretraining.checks.read_records_manifests`); None: read here."""
    family = pretrain_recipe(cfg.model)
    if not family.checkpoint_formats:
        continued = [pretrain_recipe(name).name for name in FAMILIES
                     if pretrain_recipe(name).checkpoint_formats]
        continued = ", ".join(continued[:-1]) + " or " + continued[-1]
        raise SystemExit(f"--init_checkpoint continues {continued}; --model={cfg.model} "
                         "pretrains from random weights.")
    init = read_init_checkpoint(cfg.init_checkpoint, cfg.model)
    config = init.config
    where = f"--init_checkpoint={cfg.init_checkpoint}"
    if family.typed_size_with_checkpoint:
        _check_size(cfg, explicit, config, where)
    else:
        for flag in ("preset", "config_file", "vocab_size"):
            if flag in explicit:
                raise SystemExit(f"--{flag}: the size of --model={cfg.model} comes from {where}; "
                                 f"leave --{flag} out.")
    try:
        check_fits_positions(cfg.max_seq_length, config, "--max_seq_length", owner=where)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    changes = {}
    vocab = init.vocab_file
    if family.merges_beside_vocab and cfg.vocab_file and vocab:
        _check_merges(cfg.vocab_file, vocab, where)
    if cfg.vocab_file and vocab and file_sha256(cfg.vocab_file) != file_sha256(vocab):
        raise SystemExit(
            f"--vocab_file={cfg.vocab_file} (sha256 {file_sha256(cfg.vocab_file)[:12]}) is not "
            f"{where}'s vocabulary {vocab} (sha256 {file_sha256(vocab)[:12]}): its embeddings "
            "belong to that one. Leave --vocab_file out.")
    if not vocab and not cfg.vocab_file:
        raise SystemExit(f"{where} has no {family.vocab_name} beside it: pass --vocab_file (the "
                         "vocabulary it was trained with).")
    if vocab and not cfg.vocab_file:
        changes["vocab_file"] = vocab
        say(f"--vocab_file: {vocab}, {where}'s vocabulary.")
    if init.do_lower_case is not None and init.do_lower_case != cfg.do_lower_case:
        if "do_lower_case" in explicit:
            raise SystemExit(
                f"--do_lower_case={cfg.do_lower_case}, but {where} is "
                f"{'uncased' if init.do_lower_case else 'cased'} (do_lower_case="
                f"{init.do_lower_case}). Leave --do_lower_case out.")
        changes["do_lower_case"] = init.do_lower_case
        say(f"--do_lower_case: {init.do_lower_case}, as {where} was trained.")
    if "learning_rate" not in explicit:
        changes["learning_rate"] = CONTINUED_LEARNING_RATE
        say(f"--learning_rate: {CONTINUED_LEARNING_RATE:g} for continued pretraining (the "
            f"from-scratch default is {cfg.learning_rate:g}).")
    cfg = dataclasses.replace(cfg, **changes)
    if family.records_hold_casing:
        _check_records(cfg, where, manifests)  # other families': agree_with_records, by sha256
    return cfg, init


def _check_merges(typed_vocab, vocab, where):
    """GPT: the merges.txt beside a typed vocab.json must be the checkpoint's."""
    mine = os.path.join(os.path.dirname(typed_vocab), "merges.txt")
    theirs = os.path.join(os.path.dirname(vocab), "merges.txt")
    if os.path.exists(mine) and os.path.exists(theirs) and (
            file_sha256(mine) != file_sha256(theirs)):
        raise SystemExit(f"{mine} (sha256 {file_sha256(mine)[:12]}) is not {where}'s merges "
                         f"{theirs} (sha256 {file_sha256(theirs)[:12]}): every word would split "
                         "into other pieces. Leave --vocab_file out.")


def _check_size(cfg, explicit, config, where):
    """A typed size that differs from the checkpoint's is refused."""
    if "config_file" in explicit and cfg.config_file:
        typed = BertConfig.from_json_file(cfg.config_file)
        source = f"--config_file={cfg.config_file}"
    elif "preset" in explicit:
        try:
            typed = preset(cfg.preset)
        except ValueError as e:
            raise SystemExit(str(e)) from None
        source = f"--preset={cfg.preset}"
    else:
        typed = None
    if typed is not None:
        for field in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                      "intermediate_size", "max_position_embeddings"):
            if getattr(typed, field) != getattr(config, field):
                raise SystemExit(f"{source} has {field}={getattr(typed, field)}; {where} has "
                                 f"{getattr(config, field)}. The size comes from the checkpoint: "
                                 f"leave {source.split('=')[0]} out.")
    if "vocab_size" in explicit and cfg.vocab_size != config.vocab_size:
        raise SystemExit(f"--vocab_size={cfg.vocab_size}, but {where} has a "
                         f"{config.vocab_size}-token vocabulary. Leave --vocab_size out.")


def _check_records(cfg, where, manifests):
    """Records given as `--input` must be written with the checkpoint's
    vocabulary and casing; records whose manifest cannot be read are
    refused as `check_flags` refuses them."""
    if not cfg.input or not has_manifest(cfg.input):
        return
    manifest = records_manifest(cfg.input, "input", manifests)
    theirs = manifest.get("vocab_sha256")
    mine = file_sha256(cfg.vocab_file)
    if theirs and theirs != mine:
        raise SystemExit(
            f"--input={cfg.input} was written with another vocabulary (sha256 {theirs[:12]}) "
            f"than {where}'s {cfg.vocab_file} (sha256 {mine[:12]}). Write the records with the "
            f"checkpoint's vocabulary (--vocab_file={cfg.vocab_file}).")
    if "do_lower_case" in manifest and manifest["do_lower_case"] != cfg.do_lower_case:
        raise SystemExit(
            f"--input={cfg.input} was written with do_lower_case={manifest['do_lower_case']}; "
            f"{where} is {'uncased' if cfg.do_lower_case else 'cased'}.")


def load_init_weights(init, target):
    """Copies the checkpoint's weights into `target` (a pretrainer built
    from `init.config`): the encoder always, each head the checkpoint has
    (a line says which heads start fresh). Loads outside `target`'s dtype:
    the checkpoint is read in float32 and assigned."""
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32")
    try:
        if init.kind == "hf":
            source = load_hf_checkpoint(init.path)
        elif init.kind == "google":
            source = load_google_checkpoint(init.path)
        elif init.kind == "keras_hub":
            source = load_keras_hub_preset(init.path)
        else:
            source = _keras_model(init.path)
    finally:
        keras.config.set_dtype_policy(policy)
    backbone = getattr(source, "backbone", source)
    target.backbone.set_weights(backbone.get_weights())
    loaded, fresh = ["encoder"], []
    for head in ("masked_lm_head", "next_sentence_head"):
        if not hasattr(target, head):
            continue
        if hasattr(source, head):
            getattr(target, head).set_weights(getattr(source, head).get_weights())
            loaded.append(head)
        else:
            fresh.append(head)
    head_act = getattr(source, "masked_lm_hidden_act", None)
    if "masked_lm_head" in loaded and head_act is not None:  # keras-hub's BertMaskedLM
        say(f"{init.typed}'s masked-LM head computed {head_act} with epsilon "
            f"{source.masked_lm_layer_norm_eps}; it continues with BERT's "
            f"({backbone.bert_config.hidden_act}, {backbone.bert_config.layer_norm_eps}).")
    del source
    say(f"From {init.typed}: {', '.join(loaded)} loaded"
        + (f"; {', '.join(fresh)} start fresh (the checkpoint has none)" if fresh else ""))
    return loaded, fresh


def save_like_init(init, model, vocab_file, export_dir):
    """The continued model in the checkpoint's own layout beside the Keras
    file: `export/hf/` (a Hugging Face folder), `export/google/` or
    `export/keras_hub/` (a preset of the backbone); "" for
    a `.keras` start or a model those layouts do not hold (LTR's)."""
    if init.kind == "keras" or isinstance(model, BertCausalLMPretrainer):
        return ""
    if init.kind == "keras_hub":  # keras-hub's presets hold the backbone (and tokenizer)
        folder = os.path.join(export_dir, "keras_hub")
        save_keras_hub_preset(model.backbone, folder, vocab_file, init.do_lower_case is not False)
        return f"keras-hub preset (backbone) -> {folder}; "
    if init.kind == "hf":
        folder = os.path.join(export_dir, "hf")
        save_hf_checkpoint(model, folder, vocab_file)
        return f"Hugging Face folder -> {folder}; "
    folder = os.path.join(export_dir, "google")
    save_google_checkpoint(model, folder, vocab_file)
    return f"Google checkpoint -> {folder}; "


def start_evaluation(model, heldout, output_dir):
    """The checkpoint's held-out scores before any step, written once to
    `START_EVALUATION` (a resume reads them back)."""
    path = os.path.join(output_dir, START_EVALUATION)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    scores = model.evaluate(heldout, verbose=0, return_dict=True)
    scores = {k: float(v) for k, v in scores.items()}
    write_json(path, scores)
    say("Held-out at step 0 (the checkpoint): "
        + ", ".join(f"{k} {v:.4f}" for k, v in sorted(scores.items())))
    return scores
