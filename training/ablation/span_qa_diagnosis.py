"""Why fine-tuned bidirectional encoders fail the miniature's span QA: four
fine-tuning variants on one run's pretrained checkpoints.

In every pretraining run of Table 5 in miniature, BERT and No NSP
fine-tuned with the paper's linear span head score near No pretraining on
span QA (18-24 F1), while LTR reaches 40-54 and LTR + BiLSTM 70-80, and
BERT's frozen features under a BiLSTM (Table 1's feature-based row) about 77.
This command separates the three things those rows change at once: the
encoder's pretraining, whether it is fine-tuned or frozen, and the head.

Design, fixed before any variant ran (this docstring was committed first):

- One finished run's folder (`--run`, the `--seed=7` run), its checkpoints
  and its span-QA task; the "select" split (trained on the training rows,
  scored on the validation rows), fine-tuning seed 0, each variant at every
  rate of the run's grid, the same epochs, batch size and warmup as the
  table's cells. Reported per variant: the validation F1 at each rate and
  the best, beside the table's own rows read from the run's `select`
  cells. One seed and validation rows only: these are diagnostics, not
  verdicts, and the pre-registered tables are not changed by them.
- Variants:
  - `bert_bilstm`: BERT's checkpoint, bidirectional, fine-tuned, with the
    + BiLSTM row's randomly initialized BiLSTM between it and the linear
    span head (`BertBiLstmBackbone`), all trained;
  - `no_nsp_bilstm`: the same on No NSP's checkpoint;
  - `random_bilstm`: the same on randomly initialized weights (No
    pretraining's `tiny` shape);
  - `bert_frozen_linear`: BERT's checkpoint frozen, without dropout, its
    last layer into the linear span head (only the head trains).
- What each reading would mean, decided beforehand:
  - `random_bilstm` within 5 points of LTR + BiLSTM's row: the BiLSTM head
    alone solves the task, and the + BiLSTM row measures the head, not LTR's
    pretraining.
  - `bert_bilstm` and `no_nsp_bilstm` at or above LTR + BiLSTM: with a head
    that reads order, bidirectional pretraining is not worse here; the
    failure is the linear head on a fine-tuned bidirectional encoder.
  - `bert_frozen_linear` above the table's fine-tuned BERT row: fine-tuning
    loses what the frozen features hold; below: the linear head cannot read
    the answer from the last layer, frozen or not.

    python -m training.ablation.span_qa_diagnosis --run=/work/runs/t5seed7 \\
        --output_dir=docs/results/first_grid/span_qa_diagnosis/seed7

Writes `diagnosis.json` (every score, the settings, the code's commit) and
`diagnosis.md` (the table) into `--output_dir`, swapped in whole; the
fine-tuning runs go under `<run>/diagnosis/` and are not rerun when done.
"""

import dataclasses
import json
import os
import tempfile
import time

from absl import app
from absl import flags

import training.finetune as finetune
from keras_bert_impl import BertBackbone
from keras_bert_impl.bert.bert_bilstm_backbone import BertBiLstmBackbone
from training.ablation.across_runs import swap_in
from training.ablation.cells import _finetune_config
from training.ablation.comparison import commit
from training.ablation.settings import AblationsConfig
from training.ablation.settings import learning_rates
from training.ablation.systems import SYSTEMS
from training.ablation.systems import TASKS
from training.finetuning.recipe import finetune_recipe
from training.run.checkpointing import OutputLock

VARIANTS = ("bert_bilstm", "no_nsp_bilstm", "random_bilstm", "bert_frozen_linear")
TABLE_ROWS = ("bert", "no_nsp", "ltr", "ltr_bilstm", "random", "bert_features")
OUTPUT_FILES = ("diagnosis.json", "diagnosis.md")


def variant_system(variant):
    """The table's `System` whose checkpoint the variant starts from."""
    name = {"bert_bilstm": "bert", "no_nsp_bilstm": "no_nsp", "random_bilstm": "random",
            "bert_frozen_linear": "bert"}[variant]
    return next(s for s in SYSTEMS if s.name == name)


def wrap_backbone(variant, backbone):
    """The variant's encoder around the backbone `training.finetune` built."""
    if backbone.causal:
        raise ValueError(f"{variant}: expected a bidirectional encoder.")
    if variant.endswith("_bilstm"):
        return BertBiLstmBackbone(backbone)
    config = backbone.bert_config.replace(hidden_dropout_prob=0.0,
                                          attention_probs_dropout_prob=0.0)
    frozen = BertBackbone.from_bert_config(config, dtype=backbone.dtype_policy)
    frozen.set_weights(backbone.get_weights())
    frozen.trainable = False
    return frozen


def run_variant(cfg, variant, rate, folder):
    """One fine-tuning run of the variant (unless done); its validation F1."""
    summary_path = os.path.join(folder, "summary.json")
    if not os.path.exists(summary_path):
        task = next(t for t in TASKS if t.name == "span_qa")
        ft = _finetune_config(cfg, variant_system(variant), task, "select", rate, 0, folder)
        # The variants are diagnostics, not options `training.finetune` offers:
        # they wrap the backbone it builds for the table's system, for this run.
        recipe = finetune_recipe(ft.model)
        build = recipe.build_backbone
        recipe.build_backbone = lambda self, v: wrap_backbone(variant, build(self, v))
        try:
            finetune.run(ft)
        finally:
            recipe.build_backbone = build  # the family's again
    with open(summary_path, encoding="utf-8") as f:
        return json.load(f)["history"]["dev_f1"][-1]


def table_rows(cfg, rates):
    """The run's own `select` cells at seed 0: {system: {rate: F1}}."""
    rows = {}
    for name in TABLE_ROWS:
        for rate in rates:
            path = os.path.join(cfg.output_dir, "finetune", name, "span_qa",
                                f"select-lr{rate:g}-seed0", "summary.json")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    rows.setdefault(name, {})[f"{rate:g}"] = json.load(f)["history"]["dev_f1"][-1]
    return rows


def check_output_dir(out):
    """ValueError unless `out` is absent or holds this command's files only
    (it is replaced whole)."""
    if os.path.lexists(out) and not os.path.isdir(out):
        raise ValueError(f"--output_dir={out} is not a folder.")
    if os.path.isdir(out):
        foreign = sorted(set(os.listdir(out)) - set(OUTPUT_FILES))
        if foreign:
            raise ValueError(f"--output_dir={out} holds {foreign[0]!r}, which this command "
                             "did not write; give an empty or new folder.")


def render(result):
    rates = result["learning_rates"]
    lines = ["| Encoder and head | " + " | ".join(f"lr {r}" for r in rates) + " | best |",
             "|---|" + "---|" * (len(rates) + 1)]
    for group in ("table", "variants"):
        for name, scores in result[group].items():
            cells = [f"{scores[r]:.1f}" if r in scores else "-" for r in rates]
            best = max(scores.values())
            label = name if group == "variants" else f"{name} (the table's cell)"
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {best:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv):
    del argv
    out = os.path.abspath(flags.FLAGS.output_dir)
    try:
        cfg = read_run(flags.FLAGS.run)
        check_output_dir(out)
        lock = OutputLock(cfg.output_dir)  # the run's own lock: no ablations run beside this
    except (ValueError, RuntimeError) as e:
        raise SystemExit(str(e)) from None
    try:
        write_diagnosis(cfg, out)
    finally:
        lock.release()


def read_run(run):
    """The `AblationsConfig` of the finished run in folder `run`, its
    `output_dir` that folder; ValueError naming the path when it has none."""
    run_dir = os.path.abspath(run)
    settings_path = os.path.join(run_dir, "settings.json")
    if not os.path.isfile(settings_path):
        raise ValueError(f"--run={run}: no {settings_path}; give the folder of a finished "
                         "`training.ablations` run.")
    with open(settings_path, encoding="utf-8") as f:
        settings = json.load(f)
    fields = {f.name for f in dataclasses.fields(AblationsConfig)}
    cfg = AblationsConfig(**{k: v for k, v in settings.items() if k in fields})
    return dataclasses.replace(cfg, output_dir=run_dir)


def write_diagnosis(cfg, out):
    """Every variant's runs (unless done), then `out` swapped in whole."""
    run_dir = cfg.output_dir
    rates = learning_rates(cfg)
    start = time.time()
    variants = {}
    for variant in VARIANTS:
        for rate in rates:
            folder = os.path.join(run_dir, "diagnosis", variant, f"select-lr{rate:g}-seed0")
            os.makedirs(folder, exist_ok=True)
            f1 = run_variant(cfg, variant, rate, folder)
            variants.setdefault(variant, {})[f"{rate:g}"] = f1
            print(f"  {variant:20s} lr {rate:<6g}: {f1:.2f}", flush=True)
    result = {"run": run_dir, "seed": cfg.seed, "commit": commit(),
              "learning_rates": [f"{r:g}" for r in rates], "split": "select", "finetune_seed": 0,
              "table": table_rows(cfg, rates), "variants": variants,
              "wall_seconds": round(time.time() - start)}
    parent, base = os.path.split(out)
    os.makedirs(parent, exist_ok=True)
    fresh = tempfile.mkdtemp(dir=parent, prefix=f".{base}.tmp-")
    with open(os.path.join(fresh, "diagnosis.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(fresh, "diagnosis.md"), "w", encoding="utf-8") as f:
        f.write(render(result))
    swap_in(fresh, out)
    print(render(result))


if __name__ == "__main__":
    flags.DEFINE_string("run", None, "A finished `training.ablations` run's folder.",
                        required=True)
    flags.DEFINE_string("output_dir", None, "Where diagnosis.json and diagnosis.md go.",
                        required=True)
    app.run(main)
