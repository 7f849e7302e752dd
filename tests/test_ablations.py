"""The miniature Tables 5 and 1, the command (`python -m training.ablations`):
its tasks, a quick run end to end, the learning-rate schedule, flags, scaling
stages and workers."""

import json
import os
import shutil
import time

import pytest
from forked_python import run_python


def test_task_builder_files_and_answers(tmp_path):
    """The three tasks in their official layouts: SQuAD answers are the exact
    text at answer_start (the official reader takes every one), classes are
    balanced, validation rows are training-side rows apart from train, the
    topic labels follow the source module, and dev comes only from documents
    held out of pretraining."""
    from training.ablation.task_rows import INTERNET_SOURCES
    from training.ablation.tasks import HELDOUT_PERCENT
    from training.ablation.tasks import span_qa_supply
    from training.ablation.tasks import write_ablation_tasks
    from training.pretraining.default_corpus import document_sources
    from training.pretraining.default_corpus import write_default_corpus
    from training.tasks import glue
    from training.tasks import squad

    folder = tmp_path / "tasks"
    manifest = write_ablation_tasks(str(folder), num_train=60, num_dev=30, seed=3,
                                    num_validation=20)
    assert set(manifest["tasks"]) == {"topic", "answer_sentence", "span_qa"}
    layouts = {"": ("train", "dev", 60, 30), "select": ("train", "dev", 60, 20)}
    for sub, (_, _, n_train, n_dev) in layouts.items():
        for side, count in (("train", n_train), ("dev", n_dev)):
            path = str(folder / "span_qa" / sub / f"{side}-v1.1.json")
            data = squad.load_squad_json(path)
            qas = [(p["context"], qa) for a in data for p in a["paragraphs"] for qa in p["qas"]]
            assert len(qas) == count and len({qa["id"] for _, qa in qas}) == count
            for context, qa in qas:
                (answer,) = qa["answers"]
                start = answer["answer_start"]
                assert context[start:start + len(answer["text"])] == answer["text"]
                assert "what" in qa["question"] and qa["question"].endswith("?")
            examples, skipped = squad.read_squad_examples(path, is_training=True)
            assert len(examples) == count and skipped == 0
            for name, task in (("topic", "sst2"), ("answer_sentence", "qnli")):
                examples, _ = glue.read_glue(task, str(folder / name / sub), side)
                labels = [e.label for e in examples]
                assert len(examples) == count
                assert abs(labels.count(labels[0]) - count / 2) <= 0.5  # balanced
    for name in ("topic", "answer_sentence"):
        train = {e.text_a for e in glue.read_glue("sst2" if name == "topic" else "qnli",
                                                   str(folder / name), "train")[0]}
        validation = glue.read_glue("sst2" if name == "topic" else "qnli",
                                    str(folder / name / "select"), "dev")[0]
        assert not train & {e.text_a for e in validation}, name
    # QNLI's construction: the entailed sentence is the question's own.
    for e in glue.read_glue("qnli", str(folder / "answer_sentence"), "dev")[0]:
        words, asked = e.text_b.rstrip(".").split(), e.text_a.rstrip("?").split()
        overlap = len(set(words) & set(asked)) / len(set(asked))
        assert overlap > 0.6 or e.label == "not_entailment"

    paths, _ = write_default_corpus(str(tmp_path / "corpus"), heldout_percent=HELDOUT_PERCENT)
    heldout = {" ".join(line.split())
               for line in open(paths["heldout"], encoding="utf-8").read().splitlines()}
    dev_pairs, _ = glue.read_glue("qnli", str(folder / "answer_sentence"), "dev")
    assert all(e.text_b in heldout for e in dev_pairs)
    topic_dev, _ = glue.read_glue("sst2", str(folder / "topic"), "dev")
    assert all(e.text_a in heldout for e in topic_dev)
    train_topics, _ = glue.read_glue("sst2", str(folder / "topic"), "train")
    pretraining = {" ".join(line.split())
                   for line in open(paths["train"], encoding="utf-8").read().splitlines()}
    assert not any(e.text_a in pretraining for e in topic_dev)
    assert all(e.text_a in pretraining for e in train_topics)
    source_of = {}
    for text, source in document_sources().items():
        for sentence in text.split("\n"):
            source_of.setdefault(" ".join(sentence.split()), set()).add(source)
    for e in train_topics:
        assert (e.label == "1") == bool(source_of[e.text_a] & INTERNET_SOURCES), e.text_a
    # Written once: the same call reads the manifest back.
    assert write_ablation_tasks(str(folder), num_train=60, num_dev=30, seed=3,
                                num_validation=20) == manifest
    # Span QA on more rows: the same 60 first, then others; validation and
    # dev rows as they were, no extra paragraph a validation paragraph.
    more = tmp_path / "more"
    record = write_ablation_tasks(str(more), num_train=60, num_dev=30, seed=3, num_validation=20,
                                  names=("span_qa",), span_qa_num_train=90)
    assert record["tasks"]["span_qa"]["train"] == 90

    def questions(path):
        return {qa["id"]: (p["context"], qa) for a in squad.load_squad_json(str(path))
                for p in a["paragraphs"] for qa in p["qas"]}

    before, after = (questions(f / "span_qa" / "train-v1.1.json") for f in (folder, more))
    assert len(after) == 90 and all(after[k] == before[k] for k in before)
    for name in ("dev-v1.1.json", "select/dev-v1.1.json"):
        assert (more / "span_qa" / name).read_bytes() == (folder / "span_qa" / name).read_bytes()
    validation = {c for c, _ in questions(folder / "span_qa" / "select" / "dev-v1.1.json").values()}
    assert not {after[k][0] for k in set(after) - set(before)} & validation
    # The supply the flag is checked against is the writer's own count.
    supply = span_qa_supply(60, 20, seed=3)
    with pytest.raises(ValueError, match=f"Only {supply - 60} more usable"):
        write_ablation_tasks(str(tmp_path / "too_many"), num_train=60, num_dev=30, seed=3,
                             num_validation=20, names=("span_qa",),
                             span_qa_num_train=supply + 1)


@pytest.mark.slow(seconds=240)
def test_quick_tables_end_to_end(tmp_path):
    """`python -m training.ablations --quick` into an existing empty folder
    (as `mktemp -d` makes): every system pretrained and fine-tuned on every
    task (GPT's and ELMo's span QA n/a), the JSON and PNG of both tables and
    the printed tables; a rerun into the same folder redoes nothing, and the
    folder's console log holds both runs."""

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tmp_path / "table5"
    out.mkdir(mode=0o700)
    command = ["-m", "training.ablations", "--quick", f"--output_dir={out}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=root)
    result = run_python(command, root, env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    print(result.stdout[result.stdout.index("Table 5 in miniature:"):])
    table5 = json.load(open(out / "table5.json"))
    table1 = json.load(open(out / "table1.json"))
    assert table5["errors"] == [] and table1["errors"] == []
    assert set(table5["systems"]) == {"bert", "no_nsp", "ltr", "ltr_bilstm", "random"}
    assert set(table1["systems"]) == {"bert", "bert_features", "gpt", "elmo", "xlnet", "random"}
    for table in (table5, table1):
        for name, row in table["systems"].items():
            assert set(row["tasks"]) == {"topic", "answer_sentence", "span_qa"}
            for task, entry in row["tasks"].items():
                if name in ("gpt", "elmo") and task == "span_qa":
                    assert "na" in entry
                else:
                    assert entry["interval"]["n"] == 1, (name, task)
                    assert 0 <= entry["interval"]["mean"] <= 100
                    assert entry["learning_rate"] == 1e-3 and entry["selection"] == {}
    assert table5["commit"] and table5["settings"]["seeds"] == 1
    for name in ("bert", "no_nsp", "ltr", "gpt", "xlnet"):
        assert table5["pretraining"][name]["batches_trained"] == 20, name
    from training.ablation.settings import QUICK
    from training.ablation.settings import AblationsConfig
    from training.ablation.settings import elmo_steps

    assert table5["pretraining"]["elmo"]["batches_trained"] == elmo_steps(
        AblationsConfig(**QUICK))
    assert {d["better"] + ">" + d["worse"] for d in table5["directions"]} >= {
        "bert>no_nsp", "no_nsp>ltr", "ltr_bilstm>ltr", "bert>random"}
    assert {d["better"] + ">" + d["worse"] for d in table1["directions"]} >= {
        "bert>gpt", "bert>elmo", "bert>bert_features"}
    assert "Table 1 in miniature" in (out / "tables.txt").read_text()
    from PIL import Image

    for name in ("table5.png", "table1.png"):
        with Image.open(out / name) as image:
            image.verify()
    for text in ("Table 5 in miniature", "Table 1 in miniature", "LTR & No NSP", "+ BiLSTM",
                 "OpenAI GPT", "ELMo", "XLNet", "No pretraining", "Directions", "n/a"):
        assert text in result.stdout, text

    # Table 5's systems again: nothing reruns, table1.json is left as it was.
    table1_bytes = (out / "table1.json").read_bytes()
    again = run_python(command + ["--systems=table5"], root, env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Pretraining bert (" not in again.stdout and "done before" in again.stdout
    assert " gpt           topic" not in again.stdout and "table1.json: kept" in again.stdout
    assert json.load(open(out / "table5.json"))["systems"] == table5["systems"]
    assert (out / "table1.json").read_bytes() == table1_bytes
    assert "Table 1 in miniature" in (out / "tables.txt").read_text()
    runs = [line for line in (out / "logs" / "console.log").read_text().splitlines()
            if line.startswith("=== ")]
    assert len(runs) == 2 and "--systems=table5" in runs[1], runs


def test_learning_rate_is_chosen_on_validation_then_seeds_run_at_it(tmp_path, monkeypatch):
    """Without workers and with the runs replaced by a score table: each cell
    tries every rate on validation (seed index --seeds: not a reported seed),
    and the next rate out while the
    best is at an end of those tried (at most two past each end), takes the
    best (a tie: the smaller), then runs its seeds at that rate on dev; a failed pretraining
    leaves its systems' cells with its error, and No NSP and LTR say BERT's
    records are missing."""
    from training.ablation import runs
    from training.ablation.settings import AblationsConfig
    from training.ablation.settings import chosen_systems

    calls = []
    # Validation scores by task and rate: topic rises past the grid's top
    # (extended twice, then stopped), answer_sentence peaks inside it (a
    # tie: the smaller), span_qa peaks one step below its bottom.
    validation = {
        "topic": {1e-4: 50.0, 3e-4: 55.0, 1e-3: 60.0, 3e-3: 61.0, 1e-2: 62.0},
        "answer_sentence": {1e-4: 50.0, 3e-4: 60.0, 1e-3: 60.0},
        "span_qa": {1e-5: 52.0, 3e-5: 58.0, 1e-4: 57.0, 3e-4: 55.0, 1e-3: 40.0}}

    def fake_cell(config, system, task, split, rate, k):
        calls.append((system, task, split, rate, k))
        score = validation[task][rate] if split == "select" else 70.0 + k
        return {"seed": k, "score": score}

    def fake_pretraining(config, name, corpus):
        return {"error": f"no corpus for {name}"}

    monkeypatch.setattr(runs, "_run_cell", fake_cell)
    monkeypatch.setattr(runs, "_run_pretraining", fake_pretraining)
    cfg = AblationsConfig(output_dir=str(tmp_path), workers=1, seeds=3,
                          systems="bert,no_nsp,random,gpt")
    pretraining, cells = runs._schedule(cfg, {}, chosen_systems(cfg), None)
    assert pretraining == {"bert": {"error": "no corpus for bert"},
                           "no_nsp": {"error": "BERT's pretraining data was not written (see "
                                               "pretrain/bert/log.txt)."},
                           "gpt": {"error": "no corpus for gpt"}}
    chosen = {"topic": 1e-2, "answer_sentence": 3e-4, "span_qa": 3e-5}
    for task in ("topic", "answer_sentence", "span_qa"):
        cell = cells["random", task]
        assert cell["selection"] == {f"{r:g}": v for r, v in validation[task].items()}
        assert cell["learning_rate"] == chosen[task]
        assert sorted(s["score"] for s in cell["seeds"]) == [70.0, 71.0, 72.0]
        assert ("random", task, "dev", chosen[task], 2) in calls
        assert cells["bert", task]["errors"] == ["pretraining bert failed: no corpus for bert"]
    assert "na" in cells["gpt", "span_qa"]
    assert not any(c[0] != "random" for c in calls)
    assert {c[4] for c in calls if c[2] == "select"} == {3}  # after the reported 0, 1, 2
    assert {c[4] for c in calls if c[2] == "dev"} == {0, 1, 2}


def test_no_pretraining_waits_for_berts_vocabulary(tmp_path, monkeypatch):
    """No pretraining's runs read BERT's vocabulary: in a fresh folder they
    start once BERT's pretraining has written it, not with the schedule,
    and asking for No pretraining alone pretrains BERT for it."""
    import concurrent.futures

    from training.ablation import runs
    from training.ablation.settings import AblationsConfig
    from training.ablation.settings import chosen_systems

    vocab = tmp_path / "pretrain" / "bert" / "data" / "vocab.txt"
    seen = []

    def fake_pretraining(config, name, corpus):
        time.sleep(0.3)
        vocab.parent.mkdir(parents=True)
        vocab.write_text("[PAD]\n")
        time.sleep(0.3)
        return {"error": "stopped after its vocabulary"}

    def fake_cell(config, system, task, split, rate, k):
        seen.append(vocab.exists())
        return {"seed": k, "score": 1.0}

    monkeypatch.setattr(runs, "_run_cell", fake_cell)
    monkeypatch.setattr(runs, "_run_pretraining", fake_pretraining)
    cfg = AblationsConfig(output_dir=str(tmp_path), seeds=1, learning_rates="1e-3",
                          systems="random")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        pretraining, cells = runs._schedule(cfg, {}, chosen_systems(cfg), pool)
    assert pretraining == {"bert": {"error": "stopped after its vocabulary"}}
    assert seen == [True, True, True]


def test_systems_name_groups_and_tables_keep_other_systems(tmp_path, monkeypatch):
    """`--systems`: table5 (the default), table1, all or names; a run of
    some systems reads the others' finished runs in the folder into the
    tables, and leaves out a system with a run missing."""
    from training import ablations
    from training.ablation import runs
    from training.ablation.settings import AblationsConfig
    from training.ablation.settings import chosen_systems

    def names(systems):
        return [s.name for s in chosen_systems(AblationsConfig(systems=systems))]

    assert names(AblationsConfig().systems) == ["bert", "no_nsp", "ltr", "ltr_bilstm", "random"]
    assert names("table1") == ["bert", "bert_features", "gpt", "elmo", "xlnet", "random"]
    assert names("table1,ltr") == ["bert", "ltr", "bert_features", "gpt", "elmo", "xlnet",
                                   "random"]
    assert len(names("all")) == 9
    with pytest.raises(SystemExit, match="'table2' not one of table5, table1, all, bert"):
        names("table2")

    def fake_load(config, system, task, split, rate, k):
        if system == "xlnet" and k == 1:
            return {"error": "not run"}
        return {"seed": k, "score": {1e-4: 50.0, 3e-4: 60.0, 1e-3: 40.0}[rate]}

    monkeypatch.setattr(runs, "_load_cell", fake_load)
    monkeypatch.setattr(runs, "_pretraining_summary", lambda cfg, name: {"steps": name})
    cfg = AblationsConfig(output_dir=str(tmp_path), workers=1, seeds=2)
    pretraining, cells = {"bert": {"steps": "bert"}}, {}
    ablations._add_finished_systems(cfg, {}, chosen_systems(cfg), pretraining, cells)
    assert {name for name, _ in cells} == {"bert_features", "gpt", "elmo"}  # xlnet: seed 1
    assert cells["gpt", "topic"]["learning_rate"] == 3e-4
    assert [s["score"] for s in cells["gpt", "topic"]["seeds"]] == [60.0, 60.0]
    assert set(pretraining) == {"bert", "gpt", "elmo", "xlnet"}


def test_bad_flags_are_refused_before_anything_is_written(tmp_path):
    from training import ablations
    from training.ablation.settings import AblationsConfig

    for changes, message in (({"learning_rates": "1e-3,x"}, "--learning_rates='1e-3,x'"),
                             ({"learning_rates": "0"}, "must be > 0"),
                             ({"systems": "bert,elmo2"}, "'elmo2' not one of"),
                             ({"pretrain_seq_length": 3}, "--pretrain_seq_length=3"),
                             ({"seeds": 0}, "--seeds=0"),
                             ({"span_qa_num_train": 100}, "--span_qa_num_train=100"),
                             ({"span_qa_num_train": 10**5},
                              "--span_qa_num_train=100000: the default corpus holds")):
        cfg = AblationsConfig(output_dir=str(tmp_path / "out"), **changes)
        with pytest.raises(SystemExit, match=message):
            ablations.run(cfg)
        assert not (tmp_path / "out").exists()


def test_scaling_runs_one_stage_per_command_and_plots_every_stage_present(tmp_path):
    """`--scaling` with the runs replaced: each command runs the next stage
    not done (1/4, 1/2, then the default run itself), a stage's JSON copied
    in counts as done, and the gaps pair each budget's seeds (No
    pretraining's from the full budget) with their intervals."""
    from PIL import Image

    from training.ablation import scaling as ablation_scaling
    from training.ablation.settings import AblationsConfig

    ran = []

    def fake_run(cfg):
        ran.append((cfg.output_dir, cfg.pretrain_steps, cfg.pretrain_warmup_steps, cfg.systems))
        gain = cfg.pretrain_steps / 100  # BERT's lead grows with the budget
        systems = {name: {"tasks": {t.name: {"seeds": [
            {"seed": k, "score": 50 + k + (gain if name != "random" else 0)
             + (k % 2 if name == "ltr" else 0) - (gain / 2 if name == "ltr" else 0)}
            for k in range(5)]} for t in ablation_scaling.TASKS}}
            for name in ("bert", "no_nsp", "ltr", "random")}
        os.makedirs(cfg.output_dir, exist_ok=True)
        with open(os.path.join(cfg.output_dir, "table5.json"), "w") as f:
            json.dump({"systems": systems}, f)
        return 0

    cfg = AblationsConfig(output_dir=str(tmp_path), scaling=True,
                          pretrain_steps=400, pretrain_warmup_steps=40)
    assert ablation_scaling.run_scaling(cfg, fake_run) == 0
    assert ran == [(str(tmp_path / "scaling" / "steps100"), 100, 10, "bert,no_nsp,ltr")]
    scaling = json.load(open(tmp_path / "scaling.json"))
    assert scaling["stages"] == [100] and scaling["planned"] == [100, 200, 400]
    gap = next(g for g in scaling["gaps"] if g["label"] == "BERT - No pretraining")
    assert gap["points"] == []  # No pretraining's seeds come from the full budget
    # The 1/2 stage arrives from another machine; the next command runs the full one.
    os.rename(tmp_path / "scaling" / "stage_100.json", tmp_path / "stage_100.json")
    shutil.copy(tmp_path / "stage_100.json", tmp_path / "scaling" / "stage_100.json")
    shutil.copy(tmp_path / "stage_100.json", tmp_path / "scaling" / "stage_200.json")
    assert ablation_scaling.run_scaling(cfg, fake_run) == 0
    assert ran[-1] == (str(tmp_path), 400, 40, "table5")
    scaling = json.load(open(tmp_path / "scaling.json"))
    assert scaling["stages"] == [100, 200, 400]
    gap = next(g for g in scaling["gaps"] if g["label"] == "BERT - No pretraining"
               and g["task"] == "span_qa")
    assert [p["steps"] for p in gap["points"]] == [100, 200, 400]
    assert gap["points"][-1]["difference"]["mean"] == pytest.approx(4.0)
    assert gap["points"][-1]["verdict"] == "reproduced"
    ltr = next(g for g in scaling["gaps"] if g["label"] == "No NSP - LTR & No NSP")
    assert ltr["points"][-1]["difference"]["mean"] == pytest.approx(2.0 - 0.4)
    with Image.open(tmp_path / "scaling.png") as image:
        image.verify()
    ran.clear()
    assert ablation_scaling.run_scaling(cfg, fake_run) == 0 and ran == []  # every stage done


def test_workers_take_their_share_of_the_cores(monkeypatch):
    """Each worker process gets cores // workers op and BLAS threads before
    TensorFlow starts in it; a value the environment sets is kept."""
    from training.ablation import runs

    for name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS",
                 "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    runs._start_worker(1)
    assert os.environ["TF_NUM_INTRAOP_THREADS"] == os.environ["TF_NUM_INTEROP_THREADS"] == "1"
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1" and os.environ["OMP_NUM_THREADS"] == "3"

