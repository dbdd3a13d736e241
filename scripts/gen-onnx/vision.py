"""A tiny ViT-like image encoder as an ONNX graph, with the inputs and outputs of
real Hugging Face exports: pixel_values [batch, 3, height, width] in; logits
(ViTForImageClassification) or last_hidden_state and pooler_output (ViTModel) out.
"""

import numpy as np
from onnx import TensorProto

from graph import Graph, Params, make_model, tensor_input
import models

F32 = TensorProto.FLOAT


class VitCfg:
    def __init__(self, image=32, patch=8, channels=3, hidden=32, heads=2, layers=2, ffn=64):
        self.image, self.patch, self.channels = image, patch, channels
        self.hidden, self.heads, self.layers, self.ffn = hidden, heads, layers, ffn
        self.head_dim = hidden // heads
        self.patches = (image // patch) ** 2


def vit(cfg, seed, head=None, num_labels=0):
    """head=None: ViTModel (last_hidden_state, pooler_output); head="classify": logits;
    head="project": a CLIP vision tower with projection (image_embeds, last_hidden_state)."""
    g = Graph()
    p = Params(g, seed)
    inputs = [tensor_input("pixel_values", F32, ["batch_size", cfg.channels, cfg.image, cfg.image])]
    # Patch embedding: a stride-patch convolution, then [B, H, n] -> [B, n, H].
    w = p.normal("vit.patch.weight", (cfg.hidden, cfg.channels, cfg.patch, cfg.patch), 1.0 / np.sqrt(cfg.channels * cfg.patch * cfg.patch))
    conv = g.op("Conv", ["pixel_values", w, p.zeros("vit.patch.bias", cfg.hidden)], kernel_shape=[cfg.patch, cfg.patch], strides=[cfg.patch, cfg.patch])
    flat = g.op("Reshape", [conv, g.i64([0, cfg.hidden, -1])])
    x = g.op("Transpose", [flat], perm=[0, 2, 1])
    # A learned [CLS] token in front, then position embeddings.
    cls = p.normal("vit.cls_token", (1, 1, cfg.hidden), 0.5)
    batch = g.op("Unsqueeze", [g.dim("pixel_values", 0), g.i64([0])])
    cls_b = g.op("Expand", [cls, g.op("Concat", [batch, g.i64([1, cfg.hidden])], axis=0)])
    x = g.op("Concat", [cls_b, x], axis=1)
    x = g.op("Add", [x, p.normal("vit.position_embeddings", (1, cfg.patches + 1, cfg.hidden), 0.2)])
    mc = models.Cfg(vocab=1, hidden=cfg.hidden, heads=cfg.heads, layers=cfg.layers, ffn=cfg.ffn)
    for i in range(cfg.layers):
        x = models._self_attention(g, p, mc, f"vit.layer.{i}.attention", x, [])
        x = models._ffn(g, p, mc, f"vit.layer.{i}.ffn", x)
    x = g.layer_norm(x, p.ones("vit.ln.weight", cfg.hidden), p.zeros("vit.ln.bias", cfg.hidden))
    first = g.op("Gather", [x, g.i64(0)], axis=1)
    if head == "project":
        g.op("Identity", [x], outputs=["last_hidden_state"])
        post = g.layer_norm(first, p.ones("vit.post_ln.weight", cfg.hidden), p.zeros("vit.post_ln.bias", cfg.hidden))
        wp = p.normal("visual_projection.weight", (cfg.hidden, num_labels), 1.0 / np.sqrt(cfg.hidden))
        g.op("MatMul", [post, wp], outputs=["image_embeds"])
        outputs = [tensor_input("image_embeds", F32, ["batch_size", num_labels]),
                   tensor_input("last_hidden_state", F32, ["batch_size", cfg.patches + 1, cfg.hidden])]
    elif head is None:
        g.op("Identity", [x], outputs=["last_hidden_state"])
        pw = p.normal("vit.pooler.weight", (cfg.hidden, cfg.hidden), 1.0 / np.sqrt(cfg.hidden))
        g.op("Tanh", [g.linear(first, pw, p.zeros("vit.pooler.bias", cfg.hidden))], outputs=["pooler_output"])
        outputs = [tensor_input("last_hidden_state", F32, ["batch_size", cfg.patches + 1, cfg.hidden]),
                   tensor_input("pooler_output", F32, ["batch_size", cfg.hidden])]
    else:
        wc = p.normal("classifier.weight", (cfg.hidden, num_labels), 1.5 / np.sqrt(cfg.hidden))
        g.op("Add", [g.op("MatMul", [first, wc]), p.zeros("classifier.bias", num_labels)], outputs=["logits"])
        outputs = [tensor_input("logits", F32, ["batch_size", num_labels])]
    return make_model(g, inputs, outputs, "vit")
