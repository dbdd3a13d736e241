"""Tiny BERT-like encoders and a tiny BART-like encoder-decoder, as ONNX graphs.

The graphs have the inputs and outputs of real Hugging Face ONNX exports (the
names transformers.js and modeld read); their insides are small and random.
"""

import numpy as np
from onnx import TensorProto, helper

from graph import Graph, Params, make_model, tensor_input, NEG

I64, F32, BOOL = TensorProto.INT64, TensorProto.FLOAT, TensorProto.BOOL


class Cfg:
    def __init__(self, vocab, hidden=32, heads=2, layers=2, ffn=64, max_pos=128, type_vocab=2):
        self.vocab, self.hidden, self.heads, self.layers = vocab, hidden, heads, layers
        self.ffn, self.max_pos, self.type_vocab = ffn, max_pos, type_vocab
        self.head_dim = hidden // heads


def _embed(g, p, cfg, name, ids, positions, type_ids=None):
    x = g.op("Gather", [p.normal(f"{name}.word_embeddings", (cfg.vocab, cfg.hidden), 0.5), ids])
    x = g.op("Add", [x, g.op("Gather", [p.normal(f"{name}.position_embeddings", (cfg.max_pos, cfg.hidden), 0.2), positions])])
    if type_ids is not None:
        te = p.normal(f"{name}.token_type_embeddings", (cfg.type_vocab, cfg.hidden), 0.3)
        x = g.op("Add", [x, g.op("Gather", [te, type_ids])])
    return g.layer_norm(x, p.ones(f"{name}.ln.weight", cfg.hidden), p.zeros(f"{name}.ln.bias", cfg.hidden))


def _proj(g, p, cfg, name, x):
    w = p.normal(f"{name}.weight", (cfg.hidden, cfg.hidden), 1.0 / np.sqrt(cfg.hidden))
    return g.linear(x, w, p.zeros(f"{name}.bias", cfg.hidden))


def _ffn(g, p, cfg, name, x):
    h = g.linear(x, p.normal(f"{name}.fc1.weight", (cfg.hidden, cfg.ffn), 1.0 / np.sqrt(cfg.hidden)), p.zeros(f"{name}.fc1.bias", cfg.ffn))
    h = g.gelu(h)
    h = g.linear(h, p.normal(f"{name}.fc2.weight", (cfg.ffn, cfg.hidden), 1.0 / np.sqrt(cfg.ffn)), p.zeros(f"{name}.fc2.bias", cfg.hidden))
    return g.layer_norm(g.op("Add", [x, h]), p.ones(f"{name}.ln.weight", cfg.hidden), p.zeros(f"{name}.ln.bias", cfg.hidden))


def _self_attention(g, p, cfg, name, x, bias):
    q = g.heads(_proj(g, p, cfg, f"{name}.q", x), cfg.heads, cfg.head_dim)
    k = g.heads(_proj(g, p, cfg, f"{name}.k", x), cfg.heads, cfg.head_dim)
    v = g.heads(_proj(g, p, cfg, f"{name}.v", x), cfg.heads, cfg.head_dim)
    a = _proj(g, p, cfg, f"{name}.o", g.attend(q, k, v, bias, cfg.hidden, cfg.head_dim))
    return g.layer_norm(g.op("Add", [x, a]), p.ones(f"{name}.ln.weight", cfg.hidden), p.zeros(f"{name}.ln.bias", cfg.hidden))


def encoder_stack(g, p, cfg, name, ids, mask, type_ids=None):
    """BERT-style encoder: embeddings, post-LN self-attention + GELU FFN layers."""
    seq = g.dim(ids, 1)
    positions = g.op("Range", [g.i64(0), seq, g.i64(1)])
    x = _embed(g, p, cfg, f"{name}.embeddings", ids, positions, type_ids)
    bias = g.padding_bias(mask)
    for i in range(cfg.layers):
        x = _self_attention(g, p, cfg, f"{name}.layer.{i}.attention", x, [bias])
        x = _ffn(g, p, cfg, f"{name}.layer.{i}.ffn", x)
    return x


def bert(cfg, seed, head=None, num_labels=0, with_type_ids=True):
    """head=None: feature extraction (last_hidden_state); head="classify": logits."""
    g = Graph()
    p = Params(g, seed)
    inputs = [tensor_input("input_ids", I64, ["batch_size", "sequence_length"]),
              tensor_input("attention_mask", I64, ["batch_size", "sequence_length"])]
    type_ids = None
    if with_type_ids:
        inputs.append(tensor_input("token_type_ids", I64, ["batch_size", "sequence_length"]))
        type_ids = "token_type_ids"
    x = encoder_stack(g, p, cfg, "bert", "input_ids", "attention_mask", type_ids)
    if head is None:
        g.op("Identity", [x], outputs=["last_hidden_state"])
        outputs = [tensor_input("last_hidden_state", F32, ["batch_size", "sequence_length", cfg.hidden])]
    else:
        cls = g.op("Gather", [x, g.i64(0)], axis=1)
        pooled = g.op("Tanh", [g.linear(cls, p.normal("pooler.weight", (cfg.hidden, cfg.hidden), 1.0 / np.sqrt(cfg.hidden)), p.zeros("pooler.bias", cfg.hidden))])
        w = p.normal("classifier.weight", (cfg.hidden, num_labels), 1.5 / np.sqrt(cfg.hidden))
        g.op("Add", [g.op("MatMul", [pooled, w]), p.zeros("classifier.bias", num_labels)], outputs=["logits"])
        outputs = [tensor_input("logits", F32, ["batch_size", num_labels])]
    return make_model(g, inputs, outputs, "bert")


def seq2seq_encoder(cfg, seed):
    g = Graph()
    p = Params(g, seed)
    inputs = [tensor_input("input_ids", I64, ["batch_size", "encoder_sequence_length"]),
              tensor_input("attention_mask", I64, ["batch_size", "encoder_sequence_length"])]
    x = encoder_stack(g, p, cfg, "encoder", "input_ids", "attention_mask")
    g.op("Identity", [x], outputs=["last_hidden_state"])
    outputs = [tensor_input("last_hidden_state", F32, ["batch_size", "encoder_sequence_length", cfg.hidden])]
    return make_model(g, inputs, outputs, "encoder")


def _cross_kv(g, p, cfg, name, enc):
    k = g.heads(_proj(g, p, cfg, f"{name}.k", enc), cfg.heads, cfg.head_dim)
    v = g.heads(_proj(g, p, cfg, f"{name}.v", enc), cfg.heads, cfg.head_dim)
    return k, v


def seq2seq_decoder(cfg, seed, word_embeddings, eos_id, eos_slope, merged, with_past=False):
    """BART-like decoder. merged=True: decoder_model_merged.onnx (KV cache inputs and
    use_cache_branch); merged=False: decoder_model.onnx (no past inputs);
    with_past=True: decoder_with_past_model.onnx (past inputs, no encoder_hidden_states,
    only the decoder's present outputs), the other half of the split cache layout.
    All three have the same weights.

    word_embeddings are the encoder's (shared, as in BART; the LM head is not tied so
    that the tiny model does not just repeat its input token). logits get eos_slope *
    position added to the EOS column, so generation ends after a few steps."""
    g = Graph()
    p = Params(g, seed)
    g.weight("shared.word_embeddings", word_embeddings)
    nh, hd = cfg.heads, cfg.head_dim
    inputs = [tensor_input("input_ids", I64, ["batch_size", "decoder_sequence_length"]),
              tensor_input("encoder_attention_mask", I64, ["batch_size", "encoder_sequence_length"])]
    if not with_past:
        inputs.append(tensor_input("encoder_hidden_states", F32, ["batch_size", "encoder_sequence_length", cfg.hidden]))
    outputs = [tensor_input("logits", F32, ["batch_size", "decoder_sequence_length", cfg.vocab])]
    if merged or with_past:
        for i in range(cfg.layers):
            for kind, seqname in (("decoder", "past_decoder_sequence_length"), ("encoder", "encoder_sequence_length_out")):
                for kv in ("key", "value"):
                    inputs.append(tensor_input(f"past_key_values.{i}.{kind}.{kv}", F32, ["batch_size", nh, seqname, hd]))
        if merged:
            inputs.append(tensor_input("use_cache_branch", BOOL, [1]))
        past_len = g.dim("past_key_values.0.decoder.key", 2)
    else:
        past_len = g.i64(0)
    kinds = (("decoder", "past_decoder_sequence_length + decoder_sequence_length"), ("encoder", "encoder_sequence_length_out"))
    for i in range(cfg.layers):
        for kind, seqname in kinds[:1] if with_past else kinds:
            for kv in ("key", "value"):
                outputs.append(tensor_input(f"present.{i}.{kind}.{kv}", F32, ["batch_size", nh, seqname, hd]))

    end = g.op("Add", [past_len, g.dim("input_ids", 1)])
    qpos = g.op("Range", [past_len, end, g.i64(1)])
    kpos = g.op("Range", [g.i64(0), end, g.i64(1)])
    x = g.op("Gather", ["shared.word_embeddings", "input_ids"])
    x = g.op("Add", [x, g.op("Gather", [p.normal("decoder.position_embeddings", (cfg.max_pos, cfg.hidden), 0.2), qpos])])
    x = g.layer_norm(x, p.ones("decoder.ln_emb.weight", cfg.hidden), p.zeros("decoder.ln_emb.bias", cfg.hidden))
    future = g.op("Less", [g.op("Unsqueeze", [qpos, g.i64([1])]), g.op("Unsqueeze", [kpos, g.i64([0])])])
    causal = g.op("Where", [future, g.f32(NEG), g.f32(0.0)])
    enc_bias = g.padding_bias("encoder_attention_mask")

    for i in range(cfg.layers):
        name = f"decoder.layer.{i}"
        q = g.heads(_proj(g, p, cfg, f"{name}.self.q", x), nh, hd)
        k = g.heads(_proj(g, p, cfg, f"{name}.self.k", x), nh, hd)
        v = g.heads(_proj(g, p, cfg, f"{name}.self.v", x), nh, hd)
        if merged or with_past:
            k = g.op("Concat", [f"past_key_values.{i}.decoder.key", k], axis=2)
            v = g.op("Concat", [f"past_key_values.{i}.decoder.value", v], axis=2)
        g.op("Identity", [k], outputs=[f"present.{i}.decoder.key"])
        g.op("Identity", [v], outputs=[f"present.{i}.decoder.value"])
        a = _proj(g, p, cfg, f"{name}.self.o", g.attend(q, k, v, [causal], cfg.hidden, hd))
        x = g.layer_norm(g.op("Add", [x, a]), p.ones(f"{name}.self.ln.weight", cfg.hidden), p.zeros(f"{name}.self.ln.bias", cfg.hidden))

        cq = g.heads(_proj(g, p, cfg, f"{name}.cross.q", x), nh, hd)
        if with_past:
            ck, cv = f"past_key_values.{i}.encoder.key", f"past_key_values.{i}.encoder.value"
        elif merged:
            # use_cache_branch: reuse the cached encoder keys/values, else compute them.
            then_g, else_g = g.sub(), g.sub()
            then_k = then_g.op("Identity", [f"past_key_values.{i}.encoder.key"])
            then_v = then_g.op("Identity", [f"past_key_values.{i}.encoder.value"])
            ek, ev = _cross_kv(else_g, Params(else_g, seed * 100 + i), cfg, f"{name}.cross", "encoder_hidden_states")
            # else_g's weights are created with their own rng; keep them in the main graph.
            g.inits.extend(else_g.inits)
            else_g.inits = []
            out_t = [helper.make_tensor_value_info(n, F32, None) for n in (then_k, then_v)]
            out_e = [helper.make_tensor_value_info(n, F32, None) for n in (ek, ev)]
            ck, cv = g.op("If", ["use_cache_branch"], outputs=[f"present.{i}.encoder.key", f"present.{i}.encoder.value"],
                          then_branch=helper.make_graph(then_g.nodes, f"then_{i}", [], out_t),
                          else_branch=helper.make_graph(else_g.nodes, f"else_{i}", [], out_e))
        else:
            ck, cv = _cross_kv(g, Params(g, seed * 100 + i), cfg, f"{name}.cross", "encoder_hidden_states")
            g.op("Identity", [ck], outputs=[f"present.{i}.encoder.key"])
            g.op("Identity", [cv], outputs=[f"present.{i}.encoder.value"])
        a = _proj(g, p, cfg, f"{name}.cross.o", g.attend(cq, ck, cv, [enc_bias], cfg.hidden, hd))
        x = g.layer_norm(g.op("Add", [x, a]), p.ones(f"{name}.cross.ln.weight", cfg.hidden), p.zeros(f"{name}.cross.ln.bias", cfg.hidden))
        x = _ffn(g, p, cfg, f"{name}.ffn", x)

    lm_head = p.normal("lm_head.weight", (cfg.hidden, cfg.vocab), 2.5 / np.sqrt(cfg.hidden))
    logits = g.op("MatMul", [x, lm_head])
    logits = g.op("Add", [logits, p.zeros("final_logits_bias", cfg.vocab)])
    eos = np.zeros(cfg.vocab, dtype=np.float32)
    eos[eos_id] = eos_slope
    step = g.op("Unsqueeze", [g.op("Cast", [qpos], to=F32), g.i64([1])])
    g.op("Add", [logits, g.op("Mul", [step, g.f32(eos)])], outputs=["logits"])
    return make_model(g, inputs, outputs, "decoder_merged" if merged else "decoder_with_past" if with_past else "decoder")
