"""Shared fixtures: a tiny BEIR corpus written by the tests, its index (built once per session with the
cpu-default index stages), a tiny random Qwen3 model with an in-process tokenizer, and the path of the real
corpora in ../shared/data (tests that need them skip when it is absent)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the packaged embedding model and the tiny model are local
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The tests feed models a handful of short texts: one thread is fastest, and several threads spin badly when
# the machine is busy (a 4-query MiniLM encode went from 12 ms to 1 s on two loaded cores).
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parent.parent
# The tests live in one folder per package; a test module may share its helpers with another folder's by module
# name (``from test_garen import drive``), so every folder of tests is importable from every other.
TEST_FOLDERS = sorted(p for p in Path(__file__).parent.iterdir() if p.is_dir() and any(p.glob("test_*.py")))
sys.path.extend(str(folder) for folder in TEST_FOLDERS if str(folder) not in sys.path)
SHARED_DATA = REPO.parent / "shared" / "data"

# ---- the tiny corpus: three topics, four documents each -------------------------------------------------------
DOCS = [
    ("vol1", "Volcanic eruptions",
     "A volcano erupts when magma rises through the crust and escapes as lava, ash and gas."),
    ("vol2", "Lava flows",
     "Basaltic lava flows from shield volcanoes such as Kilauea move slowly downhill and cool into rock."),
    ("vol3", "Volcanic ash",
     "Ash clouds from explosive eruptions ground aircraft because the glass particles melt in jet engines."),
    ("vol4", "Magma chambers",
     "Pressure builds in a magma chamber beneath the volcano until the rock above fractures."),
    ("pho1", "Photosynthesis",
     "Plants use chlorophyll to capture sunlight and convert carbon dioxide and water into glucose and oxygen."),
    ("pho2", "Chloroplasts",
     "Chloroplasts are the organelles in leaf cells where the light reactions of photosynthesis take place."),
    ("pho3", "The Calvin cycle",
     "In the Calvin cycle the enzyme rubisco fixes carbon dioxide into sugars using energy from ATP."),
    ("pho4", "Leaf pigments",
     "Green chlorophyll masks the yellow carotenoids of leaves until autumn, when chlorophyll breaks down."),
    ("py1", "Python lists",
     "A Python list is a mutable sequence; append adds an item and sort orders the items in place."),
    ("py2", "Python dictionaries",
     "A Python dictionary maps keys to values; lookups by key take constant time on average."),
    ("py3", "Python exceptions",
     "Python raises an exception such as KeyError or ValueError; catch it with try and except blocks."),
    ("py4", "Python generators",
     "A Python generator function uses yield to produce values lazily, one at a time, on demand."),
]
QUERIES = [
    ("q1", "why do volcanoes erupt lava and ash", []),
    ("q2", "how do plants turn sunlight into sugar with chlorophyll", []),
    ("q3", "python dictionary key lookup", ["py2"]),  # excludes a document it would otherwise rank first
    ("q4", "catching an exception in python", []),
]
QRELS = [
    ("q1", "vol1", 2), ("q1", "vol4", 1), ("q1", "vol2", 1),
    ("q2", "pho1", 2), ("q2", "pho2", 1), ("q2", "pho3", 1),
    ("q3", "py1", 1),
    ("q4", "py3", 2),
]


def one_error_line(capsys, command: str | None = None, alone: bool = True) -> str:
    """The one error line a command wrote to stderr, with no traceback. ``command`` (``"garen-infer run"``): the line
    starts with ``<command>: error: ``. ``alone``: stderr holds nothing else; False lets progress lines surround it."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    errors = lines if alone else [line for line in lines if "error:" in line]
    assert len(errors) == 1, err
    assert command is None or errors[0].startswith(f"{command}: error: "), err
    return errors[0]


def write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_beir(folder: Path, docs=DOCS, queries=QUERIES, qrels=QRELS, split: str = "test") -> Path:
    """Write a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) and return it."""
    folder = Path(folder)
    write_jsonl(folder / "corpus.jsonl", [{"_id": d, "title": t, "text": x} for d, t, x in docs])
    write_jsonl(
        folder / "queries.jsonl",
        [{"_id": q, "text": x, **({"excluded_ids": ex} if ex else {})} for q, x, ex in queries],
    )
    (folder / "qrels").mkdir(exist_ok=True)
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (folder / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def beir_dir(tmp_path_factory) -> Path:
    """The tiny BEIR folder, shared by the session: treat it as read-only."""
    return write_beir(tmp_path_factory.mktemp("tiny") / "tiny")


@pytest.fixture(scope="session")
def tiny_dataset(beir_dir):
    from garen_infer.data.beir import load_beir

    return load_beir(beir_dir)


BASE_STAGES = ("bm25", "embeddings", "knn_graph")


def cpu_default_stages() -> dict:
    """cpu-default's index stages, its embeddings computed in f32: the preset's bf16 runs only on CPUs with AMX or
    AVX512_BF16, so its vectors, and the near-ties of the rankings the tests pin, would move with the CPU."""
    from garen_infer.configuration.presets import load_preset

    stages = load_preset("cpu-default")["index"]
    return {**stages, "embeddings": {**stages["embeddings"], "precision": "f32"}}


@pytest.fixture(scope="session")
def index_config():
    """cpu-default's bm25, embeddings and knn_graph stages: what bm25, rerank and slidegar need."""
    from garen_infer.index.stages import IndexConfig

    stages = cpu_default_stages()
    return IndexConfig.from_dict({name: stages[name] for name in BASE_STAGES})


@pytest.fixture(scope="session")
def tiny_index(tiny_dataset, index_config, tmp_path_factory):
    """The tiny corpus indexed with the cpu-default stages (bm25, embeddings, knn_graph); read-only."""
    from garen_infer.index.folder import IndexFolder

    path = tmp_path_factory.mktemp("index") / "tiny-index"
    IndexFolder.build(tiny_dataset, path, index_config, log=lambda *_: None)
    return IndexFolder.open(path, tiny_dataset)


@pytest.fixture(scope="session")
def full_index(tiny_index, tiny_dataset, tmp_path_factory):
    """The tiny index completed with every stage of cpu-default (groups, proximity graph, ...), for the methods
    that need more than bm25/embeddings/knn_graph; read-only."""
    import shutil

    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    path = tmp_path_factory.mktemp("full-index") / "index"
    shutil.copytree(tiny_index.path, path)
    config = IndexConfig.from_dict(cpu_default_stages())
    return IndexFolder.build(tiny_dataset, path, config, log=lambda *_: None)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (the real SciFact and Cranfield copies); skips the test when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real corpora not available: {SHARED_DATA} is absent")
    return SHARED_DATA


# ---- a tiny random Qwen3 with a byte-level BPE tokenizer trained here ------------------------------------------
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _training_text() -> list[str]:
    words = " ".join(f"{t} {x}" for _, t, x in DOCS).split() + " ".join(q for _, q, _ in QUERIES).split()
    extra = (
        "yes no rank the passages above based on their relevance to the search query identifiers [1] > [2] "
        "received passage you are rankgpt an intelligent assistant system user assistant okay please provide "
        "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"
    ).split()
    return [" ".join(words + extra)] * 4


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A folder holding a randomly initialised 2-layer Qwen3 and its tokenizer, loadable by transformers."""
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


def build_tiny_qwen3(folder: Path) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(  # no progress: it writes blank lines to stdout, where gpu_check's lines go
        vocab_size=600, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(_training_text(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=128, head_dim=16, max_position_embeddings=4096,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        tie_word_embeddings=True, initializer_range=0.5,
    )
    Qwen3ForCausalLM(config).save_pretrained(folder)
    return folder


# ---- a tiny random BERT (cross-encoder family) with a fixed WordPiece vocabulary ------------------------------
def build_tiny_bert(folder: Path) -> Path:
    """A randomly initialised 2-layer BERT encoder and its uncased WordPiece tokenizer, saved as an HF folder."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, BertTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # a fixed vocabulary (specials, characters, whole words) rather than tokenizers' WordPieceTrainer, whose ties
    # fall in hash order: each process got another vocabulary, so training tests moved from run to run
    normalizer, pre_tokenizer = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    words = sorted(
        {
            w
            for text in _training_text()
            for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))
        }
    )
    chars = sorted({c for w in words for c in w})
    pieces = specials + chars + [f"##{c}" for c in chars] + [w for w in words if len(w) > 1]
    raw = Tokenizer(models.WordPiece(vocab={piece: i for i, piece in enumerate(pieces)}, unk_token="[UNK]"))
    raw.normalizer, raw.pre_tokenizer, raw.decoder = normalizer, pre_tokenizer, decoders.WordPiece()
    cls, sep = raw.token_to_id("[CLS]"), raw.token_to_id("[SEP]")
    raw.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tokenizer = BertTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]",
                                  cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    tokenizer.model_max_length = 512
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.2,
    )
    BertModel(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    """A folder holding a randomly initialised 2-layer BERT encoder (no head) and its tokenizer."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


# ---- mined training pairs over the tiny corpus (the format `garen-train mine` writes) ---------------------------
PARAPHRASES = {
    "q1": ["what makes a volcano erupt", "lava and ash eruptions"],
    "q2": ["chlorophyll and sunlight in plants", "how leaves make sugar"],
    "q3": ["looking up a key in a python dict", "python mapping keys to values"],
    "q4": ["python try except", "handling errors in python code"],
}
TOPICS = {"vol": ("volcanoes, lava", "Volcanic eruptions, lava flows, ash and magma chambers."),
          "pho": ("photosynthesis, chlorophyll", "How plants capture sunlight in chloroplasts and fix carbon."),
          "py": ("python, data structures", "Python lists, dictionaries, exceptions and generators.")}


def tiny_pair_rows() -> tuple[list[dict], list[dict]]:
    """(document pairs, group pairs) for 12 queries (the tiny queries and two paraphrases each): every document
    (label 1 when judged for the query, first-stage rank = corpus order) and every topic group."""
    from garen_infer.index.grouping.summaries import group_text

    gold = {}
    for q, d, _ in QRELS:
        gold.setdefault(q, set()).add(d)
    documents, groups = [], []
    for qid, text, _ in QUERIES:
        for n, query in enumerate([text, *PARAPHRASES[qid]]):
            key = f"{qid}-{n}"
            for rank, (doc, title, body) in enumerate(DOCS, start=1):
                label = int(doc in gold.get(qid, ()))
                documents.append({"qid": key, "query": query, "kind": "document", "item": doc,
                                  "text": f"{title}\n{body}",
                                  "label": label, "provenance": "judged" if label else "hard_negative",
                                  "iteration": None, "rank": rank})
            for topic, (concept, summary) in TOPICS.items():
                label = int(any(d.startswith(topic) for d in gold.get(qid, ())))
                groups.append({"qid": key, "query": query, "kind": "group", "item": topic,
                               "text": group_text(concept, summary),
                               "label": label, "provenance": "scored", "iteration": 0, "rank": None})
    return documents, groups


def write_tiny_pairs(folder: Path, purpose: str = "training", keep=lambda qid: True) -> Path:
    """A mined folder as ``garen-train mine`` writes it (manifest with digests) of the queries ``keep`` selects."""
    from garen_train.mining.folder import write_mined

    documents, groups = tiny_pair_rows()
    documents, groups = [r for r in documents if keep(r["qid"])], [r for r in groups if keep(r["qid"])]
    write_mined(folder, groups, documents,
                {"purpose": purpose, "dataset": {"name": f"tiny-{purpose}", "split": "train"}})
    return folder


@pytest.fixture(scope="session")
def tiny_pairs(tmp_path_factory) -> Path:
    """A mined-pairs folder (documents.jsonl, groups.jsonl, manifest.json) over the tiny corpus; read-only."""
    return write_tiny_pairs(tmp_path_factory.mktemp("pairs") / "tiny-pairs")


@pytest.fixture
def server():
    """A scripted OpenAI-compatible server on loopback for one test (tests/openai_server.py)."""
    from openai_server import ScriptedServer

    srv = ScriptedServer()
    yield srv
    srv.stop()
