"""Learning curves for sizing Table 5 in miniature, before any verdict is seen.

Fine-tunes one pretrained BERT and the same model from scratch (the only
two systems the design may look at: whether a task can be learned, and
whether pretraining helps at all) on candidate tasks, at a grid of learning
rates, one seed each, recording the dev score after every epoch:

    python -m training.ablation.calibration --pretrained=runs/bert/export/pretrainer.keras \\
        --vocab_file=runs/bert/data/vocab.txt --output_dir=/tmp/calibration

Writes `calibration.json` (every run's per-epoch dev scores) and prints the
curves. `training.ablations` pre-registers its tasks, rows and epochs from
such a run; the ablation systems (No NSP, LTR, + BiLSTM, GPT, ...) are never
run here.
"""

import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import sys

from absl import flags

from tf_records.command_line import console
from training.ablation import task_rows
from training.ablation import tasks as ablation_tasks
from training.ablation.cells import _free_models
from training.finetune import FinetuneConfig
from training.finetune import run

FLAGS = flags.FLAGS
CANDIDATES = {  # name: (training.finetune task, max_seq_length)
    "word_order": ("glue/cola", 64),
    "replaced_word": ("glue/sst2", 64),
    "topic": ("glue/sst2", 64),
    "sentence_order": ("glue/rte", 96),
    "answer_sentence": ("glue/qnli", 96),
    "span_qa": ("squad", 128),
}


def _one(job):
    task, system, lr, folder, tasks_dir, pretrained, vocab, epochs = job
    summary_path = os.path.join(folder, "summary.json")
    if not os.path.exists(summary_path):
        os.makedirs(folder, exist_ok=True)
        name, length = CANDIDATES[task]
        cfg = FinetuneConfig(
            task=name, data_dir=os.path.join(tasks_dir, task), output_dir=folder,
            init_checkpoint=pretrained if system == "bert" else "", vocab_file=vocab,
            preset="" if system == "bert" else "tiny", max_seq_length=length,
            doc_stride=length // 2, max_query_length=48, max_answer_length=10, batch_size=32,
            epochs=epochs, learning_rate=lr, warmup_proportion=0.1, seed=1, export=False)
        with open(os.path.join(folder, "log.txt"), "a", encoding="utf-8") as log:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                try:
                    run(cfg)
                finally:
                    _free_models()
    with open(summary_path, encoding="utf-8") as f:
        history = json.load(f)["history"]
    key = {"span_qa": "dev_f1", "word_order": "dev_matthews_corr"}.get(task, "dev_accuracy")
    curve = [v if key == "dev_f1" else 100 * v for v in history[key]]
    print(f"{task:16s} {system:6s} lr {lr:g}: " + " ".join(f"{v:5.1f}" for v in curve),
          flush=True)
    return {"task": task, "system": system, "learning_rate": lr, "curve": curve,
            "wall_seconds": json.load(open(summary_path)).get("wall_seconds")}


def main(argv):
    del argv
    task_rows.PARAGRAPH_SENTENCES = FLAGS.paragraph_sentences
    tasks_dir = os.path.join(FLAGS.output_dir, "tasks")
    manifest = ablation_tasks.write_ablation_tasks(tasks_dir, FLAGS.num_train, FLAGS.num_dev,
                                                   seed=0, names=FLAGS.tasks)
    jobs = [(task, system, lr, os.path.join(FLAGS.output_dir, task, system, f"lr{lr:g}"),
             tasks_dir, os.path.abspath(FLAGS.pretrained), os.path.abspath(FLAGS.vocab_file),
             FLAGS.epochs)
            for task in FLAGS.tasks for lr in map(float, FLAGS.learning_rates)
            for system in ("bert", "random")]
    with concurrent.futures.ProcessPoolExecutor(
            FLAGS.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_one, jobs))
    out = {"settings": {k: FLAGS[k].value for k in ("pretrained", "num_train", "num_dev", "epochs",
                                                     "learning_rates", "tasks",
                                                     "paragraph_sentences")},
           "baselines": manifest["tasks"], "runs": results}
    with open(os.path.join(FLAGS.output_dir, "calibration.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    sys.exit(0)


def cli():
    flags.DEFINE_string("pretrained", None, "A pretrained BERT (.keras) to calibrate with.")
    flags.DEFINE_string("vocab_file", None, "Its vocab.txt.")
    flags.DEFINE_string("output_dir", "ablation_calibration", "Run folder.")
    flags.DEFINE_integer("num_train", 3000, "Training rows per task.")
    flags.DEFINE_integer("num_dev", 400, "Dev rows per task.")
    flags.DEFINE_integer("epochs", 6, "Fine-tuning epochs (dev scored after each).")
    flags.DEFINE_list("learning_rates", ["1e-4", "3e-4", "1e-3"], "Learning-rate grid.")
    flags.DEFINE_list("tasks", list(CANDIDATES), "Candidate tasks.")
    flags.DEFINE_integer("workers", 2, "Worker processes.")
    flags.DEFINE_integer("paragraph_sentences", 1, "Span QA: sentences per paragraph.")
    flags.mark_flags_as_required(["pretrained", "vocab_file"])
    console.run(main, __name__)


if __name__ == "__main__":
    cli()
