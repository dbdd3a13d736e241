#!/usr/bin/python3
"""Generates modeld's tiny ONNX test models in the transformers.js folder layout.

    /usr/bin/python3 scripts/gen-onnx/gen.py [OUT_DIR]     (default: testdata/onnx)

Needs Debian's python3-onnx and python3-numpy. Output is deterministic: the same
onnx/numpy versions give byte-identical files. Each model folder holds config.json,
tokenizer.json, tokenizer_config.json and onnx/*.onnx (plus generation_config.json
for the encoder-decoder and sentence-transformers pooling files for the embedders).
"""

import json
import os
import sys

import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import models  # noqa: E402
import vision  # noqa: E402
import vocab as vocabmod  # noqa: E402

VOCAB = vocabmod.build_vocab()


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False, sort_keys=False)
        f.write("\n")


def save_model(model, path):
    onnx.checker.check_model(model)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save_model(model, path)


def write_tokenizer(d, max_length):
    write_json(os.path.join(d, "tokenizer.json"), vocabmod.tokenizer_json(VOCAB, max_length))
    write_json(os.path.join(d, "tokenizer_config.json"), vocabmod.tokenizer_config(max_length))


def bert_config(cfg, arch, **extra):
    c = {
        "architectures": [arch], "model_type": "bert", "vocab_size": cfg.vocab,
        "hidden_size": cfg.hidden, "num_attention_heads": cfg.heads, "num_hidden_layers": cfg.layers,
        "intermediate_size": cfg.ffn, "max_position_embeddings": cfg.max_pos,
        "type_vocab_size": cfg.type_vocab, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
        "pad_token_id": vocabmod.PAD,
    }
    c.update(extra)
    return c


def labels(names):
    return {"id2label": {str(i): n for i, n in enumerate(names)}, "label2id": {n: i for i, n in enumerate(names)}}


def pooling_config(cfg, mode):
    return {
        "word_embedding_dimension": cfg.hidden,
        "pooling_mode_cls_token": mode == "cls",
        "pooling_mode_mean_tokens": mode == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": mode == "lasttoken",
        "include_prompt": True,
    }


def gen_encoders(out):
    cfg = models.Cfg(len(VOCAB))
    # embed-mean: sentence-transformers layout (modules.json -> 1_Pooling mean, 2_Normalize).
    d = os.path.join(out, "embed-mean")
    save_model(models.bert(cfg, seed=11), os.path.join(d, "onnx", "model.onnx"))
    write_json(os.path.join(d, "config.json"), bert_config(cfg, "BertModel"))
    write_tokenizer(d, cfg.max_pos)
    write_json(os.path.join(d, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])
    write_json(os.path.join(d, "1_Pooling", "config.json"), pooling_config(cfg, "mean"))
    os.makedirs(os.path.join(d, "2_Normalize"), exist_ok=True)
    with open(os.path.join(d, "2_Normalize", ".keep"), "w") as f:
        f.write("")

    # embed-cls: only 1_Pooling/config.json (CLS pooling), no modules.json, no Normalize.
    d = os.path.join(out, "embed-cls")
    save_model(models.bert(cfg, seed=12), os.path.join(d, "onnx", "model.onnx"))
    write_json(os.path.join(d, "config.json"), bert_config(cfg, "BertModel"))
    write_tokenizer(d, cfg.max_pos)
    write_json(os.path.join(d, "1_Pooling", "config.json"), pooling_config(cfg, "cls"))

    specs = [
        ("classify", 21, ["negative", "neutral", "positive"], "single_label_classification"),
        ("classify-multilabel", 22, ["sports", "politics", "technology", "food"], "multi_label_classification"),
        ("nli", 23, ["entailment", "neutral", "contradiction"], None),
        ("rerank", 24, ["LABEL_0"], None),
    ]
    for name, seed, names, problem in specs:
        d = os.path.join(out, name)
        save_model(models.bert(cfg, seed=seed, head="classify", num_labels=len(names)), os.path.join(d, "onnx", "model.onnx"))
        extra = labels(names)
        if problem:
            extra["problem_type"] = problem
        write_json(os.path.join(d, "config.json"), bert_config(cfg, "BertForSequenceClassification", **extra))
        write_tokenizer(d, cfg.max_pos)


def gen_seq2seq(out):
    cfg = models.Cfg(len(VOCAB), layers=1, max_pos=64)
    dcfg = models.Cfg(len(VOCAB), layers=2, max_pos=64)
    d = os.path.join(out, "summarize")
    enc = models.seq2seq_encoder(cfg, seed=31)
    emb = None
    for init in enc.graph.initializer:
        if init.name == "encoder.embeddings.word_embeddings":
            emb = numpy_helper.to_array(init)
    save_model(enc, os.path.join(d, "onnx", "encoder_model.onnx"))
    for merged, fname in ((True, "decoder_model_merged.onnx"), (False, "decoder_model.onnx")):
        dec = models.seq2seq_decoder(dcfg, 32, emb, vocabmod.SEP, 0.9, merged)
        save_model(dec, os.path.join(d, "onnx", fname))
    # The split cache layout's second half; the loader prefers the merged decoder,
    # so tests that load the split layout link the files they want into a folder.
    dec = models.seq2seq_decoder(dcfg, 32, emb, vocabmod.SEP, 0.9, False, with_past=True)
    save_model(dec, os.path.join(d, "onnx", "decoder_with_past_model.onnx"))
    write_json(os.path.join(d, "config.json"), {
        "architectures": ["BartForConditionalGeneration"], "model_type": "bart",
        "vocab_size": cfg.vocab, "d_model": cfg.hidden,
        "encoder_layers": cfg.layers, "decoder_layers": dcfg.layers,
        "encoder_attention_heads": cfg.heads, "decoder_attention_heads": dcfg.heads,
        "encoder_ffn_dim": cfg.ffn, "decoder_ffn_dim": dcfg.ffn,
        "max_position_embeddings": cfg.max_pos, "is_encoder_decoder": True,
        "bos_token_id": vocabmod.CLS, "eos_token_id": vocabmod.SEP, "pad_token_id": vocabmod.PAD,
        "decoder_start_token_id": vocabmod.CLS, "forced_eos_token_id": vocabmod.SEP,
    })
    write_json(os.path.join(d, "generation_config.json"), {
        "bos_token_id": vocabmod.CLS, "eos_token_id": vocabmod.SEP, "pad_token_id": vocabmod.PAD,
        "decoder_start_token_id": vocabmod.CLS, "forced_eos_token_id": vocabmod.SEP,
        "max_length": 24, "num_beams": 1, "no_repeat_ngram_size": 3,
        "length_penalty": 1.0, "early_stopping": True,
    })
    write_tokenizer(d, cfg.max_pos)


def vit_config(cfg, arch, **extra):
    c = {
        "architectures": [arch], "model_type": "vit", "hidden_size": cfg.hidden,
        "num_attention_heads": cfg.heads, "num_hidden_layers": cfg.layers,
        "intermediate_size": cfg.ffn, "image_size": cfg.image, "patch_size": cfg.patch,
        "num_channels": cfg.channels, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
    }
    c.update(extra)
    return c


def gen_vision(out):
    """Image models: preprocessor_config.json instead of a tokenizer."""
    cfg = vision.VitCfg()
    # vit-classify: ViT's own preprocessing (resize to 32x32 bilinear, mean/std 0.5).
    d = os.path.join(out, "vit-classify")
    save_model(vision.vit(cfg, seed=41, head="classify", num_labels=4), os.path.join(d, "onnx", "model.onnx"))
    write_json(os.path.join(d, "config.json"), vit_config(cfg, "ViTForImageClassification", **labels(["cat", "dog", "car", "tree"])))
    write_json(os.path.join(d, "preprocessor_config.json"), {
        "image_processor_type": "ViTImageProcessor", "do_resize": True, "size": {"height": cfg.image, "width": cfg.image},
        "resample": 2, "do_rescale": True, "rescale_factor": 0.00392156862745098,
        "do_normalize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    })
    # vit-embed: CLIP-style preprocessing (shortest edge, center crop, bicubic, CLIP's
    # mean/std) on a ViTModel with a pooler.
    d = os.path.join(out, "vit-embed")
    save_model(vision.vit(cfg, seed=42), os.path.join(d, "onnx", "model.onnx"))
    write_json(os.path.join(d, "config.json"), vit_config(cfg, "ViTModel"))
    write_json(os.path.join(d, "preprocessor_config.json"), {
        "image_processor_type": "CLIPImageProcessor", "do_resize": True, "size": {"shortest_edge": cfg.image},
        "resample": 3, "do_center_crop": True, "crop_size": {"height": cfg.image, "width": cfg.image},
        "do_rescale": True, "rescale_factor": 0.00392156862745098, "do_normalize": True,
        "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
        "do_convert_rgb": True,
    })
    # clip-vision: a CLIP-style folder (model_type clip) whose image tower is
    # onnx/vision_model.onnx with a projection (image_embeds, 16 dims).
    d = os.path.join(out, "clip-vision")
    save_model(vision.vit(cfg, seed=43, head="project", num_labels=16), os.path.join(d, "onnx", "vision_model.onnx"))
    write_json(os.path.join(d, "config.json"), {
        "architectures": ["CLIPModel"], "model_type": "clip", "projection_dim": 16,
        "vision_config": {"model_type": "clip_vision_model", "hidden_size": cfg.hidden, "image_size": cfg.image,
                          "patch_size": cfg.patch, "num_attention_heads": cfg.heads, "num_hidden_layers": cfg.layers,
                          "intermediate_size": cfg.ffn, "projection_dim": 16},
    })
    write_json(os.path.join(d, "preprocessor_config.json"), {
        "image_processor_type": "CLIPImageProcessor", "do_resize": True, "size": {"shortest_edge": cfg.image},
        "resample": 2, "do_center_crop": True, "crop_size": cfg.image,
        "do_rescale": True, "rescale_factor": 0.00392156862745098, "do_normalize": True,
        "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
    })


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "testdata", "onnx")
    out = os.path.abspath(out)
    gen_encoders(out)
    gen_seq2seq(out)
    gen_vision(out)
    print(f"wrote test models under {out}")


if __name__ == "__main__":
    main()
