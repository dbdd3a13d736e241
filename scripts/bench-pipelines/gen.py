#!/usr/bin/python3
"""Generates the embedding model of scripts/bench-pipelines: a BERT-like
feature-extraction model of a realistic size, with random weights, in the
transformers.js folder layout (sentence-transformers mean pooling + Normalize).

    /usr/bin/python3 scripts/bench-pipelines/gen.py OUT_DIR [--preset minilm|small]

Presets (the tokenizer is always the real bert-base-uncased WordPiece vocabulary
of pipelines/tokenizer/testdata/bert-uncased, 30522 tokens, so that texts split
into as many tokens as they would with a real model):

    minilm  6 layers, hidden 384, 12 heads, FFN 1536: the shape of
            all-MiniLM-L6-v2 (~87 MB, 47 MB of it the word embeddings)
    small   4 layers, hidden 256, 4 heads, FFN 1024 (~44 MB)

The graph comes from scripts/gen-onnx (the same builder as the test fixtures);
only the sizes differ. The model is large: write it to a temporary directory,
do not commit it.
"""

import argparse
import json
import os
import shutil
import sys

import onnx

sys.dont_write_bytecode = True  # no __pycache__ in scripts/gen-onnx

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.abspath(os.path.join(here, "..", ".."))
sys.path.insert(0, os.path.join(root, "scripts", "gen-onnx"))

import gen  # noqa: E402  (scripts/gen-onnx/gen.py: config and pooling helpers)
import models  # noqa: E402

PRESETS = {
    "minilm": dict(layers=6, hidden=384, heads=12, ffn=1536),
    "small": dict(layers=4, hidden=256, heads=4, ffn=1024),
}
TOKENIZER_DIR = os.path.join(root, "pipelines", "tokenizer", "testdata", "bert-uncased")
MAX_POS = 512


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="model folder to write")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="minilm")
    args = ap.parse_args()

    with open(os.path.join(TOKENIZER_DIR, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    cfg = models.Cfg(len(vocab), max_pos=MAX_POS, **PRESETS[args.preset])
    d = os.path.abspath(args.out)
    os.makedirs(d, exist_ok=True)
    gen.save_model(models.bert(cfg, seed=101), os.path.join(d, "onnx", "model.onnx"))
    config = gen.bert_config(cfg, "BertModel")
    config["pad_token_id"] = vocab["[PAD]"]
    gen.write_json(os.path.join(d, "config.json"), config)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(TOKENIZER_DIR, name), os.path.join(d, name))
    gen.write_json(os.path.join(d, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])
    gen.write_json(os.path.join(d, "1_Pooling", "config.json"), gen.pooling_config(cfg, "mean"))
    os.makedirs(os.path.join(d, "2_Normalize"), exist_ok=True)
    size = os.path.getsize(os.path.join(d, "onnx", "model.onnx"))
    print(f"wrote {args.preset} embedding model ({size / 1e6:.1f} MB, onnx {onnx.__version__}) to {d}")


if __name__ == "__main__":
    main()
