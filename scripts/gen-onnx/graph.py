"""A small builder over onnx.helper for the tiny transformer graphs (opset 17)."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
NEG = -1.0e4  # additive attention bias for masked positions (exp underflows to 0 in float32)


class Graph:
    """Collects nodes and initializers; names are unique across nested subgraphs."""

    def __init__(self, counter=None):
        self.nodes = []
        self.inits = []
        self.counter = counter if counter is not None else [0]

    def _name(self, prefix):
        self.counter[0] += 1
        return f"{prefix}_{self.counter[0]}"

    def sub(self):
        return Graph(self.counter)

    def weight(self, name, arr):
        arr = np.asarray(arr)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def f32(self, value, name=None):
        return self.weight(name or self._name("c"), np.asarray(value, dtype=np.float32))

    def i64(self, value, name=None):
        return self.weight(name or self._name("c"), np.asarray(value, dtype=np.int64))

    def op(self, op_type, inputs, outputs=None, n_out=1, **attrs):
        if outputs is None:
            outputs = [self._name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=self._name(op_type), **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    # --- composite pieces -------------------------------------------------

    def dim(self, x, axis):
        """Scalar int64 holding x.shape[axis]."""
        return self.op("Gather", [self.op("Shape", [x]), self.i64(axis)], axis=0)

    def linear(self, x, w, b):
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x, gamma, beta):
        return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)

    def gelu(self, x):
        half = self.op("Mul", [x, self.f32(0.5)])
        erf = self.op("Erf", [self.op("Div", [x, self.f32(np.sqrt(2.0))])])
        return self.op("Mul", [half, self.op("Add", [erf, self.f32(1.0)])])

    def heads(self, x, n_heads, head_dim):
        """[B,S,H] -> [B,nH,S,dH]."""
        r = self.op("Reshape", [x, self.i64([0, 0, n_heads, head_dim])])
        return self.op("Transpose", [r], perm=[0, 2, 1, 3])

    def attend(self, q, k, v, bias, hidden, head_dim):
        """softmax(q k^T / sqrt(d) + bias) v, merged back to [B,T,H]."""
        kt = self.op("Transpose", [k], perm=[0, 1, 3, 2])
        scores = self.op("MatMul", [q, kt])
        scores = self.op("Mul", [scores, self.f32(1.0 / np.sqrt(head_dim))])
        for b in bias:
            scores = self.op("Add", [scores, b])
        probs = self.op("Softmax", [scores], axis=-1)
        out = self.op("MatMul", [probs, v])
        out = self.op("Transpose", [out], perm=[0, 2, 1, 3])
        return self.op("Reshape", [out, self.i64([0, 0, hidden])])

    def padding_bias(self, mask):
        """int64 mask [B,S] -> additive float bias [B,1,1,S]."""
        m = self.op("Cast", [mask], to=TensorProto.FLOAT)
        b = self.op("Mul", [self.op("Sub", [self.f32(1.0), m]), self.f32(NEG)])
        return self.op("Unsqueeze", [b, self.i64([1, 2])])


class Params:
    """Deterministic random weights, named under a prefix."""

    def __init__(self, graph, seed, scale=0.2):
        self.g = graph
        self.rng = np.random.default_rng(seed)
        self.scale = scale

    def normal(self, name, shape, scale=None):
        s = self.scale if scale is None else scale
        return self.g.weight(name, (self.rng.standard_normal(shape) * s).astype(np.float32))

    def ones(self, name, n):
        return self.g.weight(name, (1.0 + 0.1 * self.rng.standard_normal(n)).astype(np.float32))

    def zeros(self, name, n):
        return self.g.weight(name, (0.05 * self.rng.standard_normal(n)).astype(np.float32))


def tensor_input(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def make_model(graph, inputs, outputs, name):
    g = helper.make_graph(graph.nodes, name, inputs, outputs, graph.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="modeld-gen-onnx")
    m.ir_version = 8
    return m
