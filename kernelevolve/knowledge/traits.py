"""What a reference computes, read from its source: the operator family and its traits.

Retrieval (knowledge/select.py) fills a prompt with documents of the operator's family first, so
it must know the family even for a bare KernelBench module (no spec, no `family:`). The reference
is parsed, never executed: every call in the module (`nn.LayerNorm(...)`, `F.cross_entropy(...)`,
`x.cumsum(...)`, `torch.matmul`, the `@` operator ...) is looked up in a table of operator names.

- `families`: what the computation *is*, best first (attention, convolution, matmul, scan,
  cross_entropy, layernorm, rmsnorm, normalization, softmax, pooling, reduction, embedding,
  bucketize; `elementwise` only when nothing else was found). A spec's own `family:` comes first.
- `traits`: what it also does (an elementwise epilogue, a reduction, masking, tensor cores).
- `evidence`: the names in the reference that said so, for the prompt and for people.

Two explicit matrix products with a softmax between them are attention even without
`scaled_dot_product_attention` (minGPT's `q @ k.transpose(-2, -1)` ... `att @ v`); a Linear
followed by a softmax is a matmul with a softmax epilogue, not attention.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from kernelevolve import pysource

# Operator name (lower case, underscores dropped) -> family. The names are torch's (functional,
# module and method spellings); the family names are the knowledge base's `family:` values.
_FAMILY_OF: dict[str, str] = {}


def _table(family: str, names: str) -> None:
    for name in names.split():
        _FAMILY_OF[name.replace("_", "").lower()] = family


_table("attention", "scaled_dot_product_attention MultiheadAttention multi_head_attention_forward flash_attn_func")
_table("conv1d", "conv1d Conv1d conv_transpose1d ConvTranspose1d")
_table("convolution", "conv2d conv3d Conv2d Conv3d conv_transpose2d conv_transpose3d ConvTranspose2d ConvTranspose3d")
_table("matmul", "matmul mm bmm addmm addbmm baddbmm einsum linear Linear Bilinear bilinear tensordot mv addmv")
_table("scan", "cumsum cumprod cummax cummin logcumsumexp associative_scan")
_table("cross_entropy", "cross_entropy CrossEntropyLoss nll_loss NLLLoss")
_table("layernorm", "layer_norm LayerNorm")
_table("rmsnorm", "rms_norm RMSNorm")
_table(
    "normalization",
    "group_norm GroupNorm batch_norm BatchNorm1d BatchNorm2d BatchNorm3d instance_norm InstanceNorm1d "
    "InstanceNorm2d InstanceNorm3d local_response_norm LocalResponseNorm normalize",
)
_table("softmax", "softmax Softmax log_softmax LogSoftmax softmin Softmin logsumexp")
_table(
    "pooling",
    "max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d avg_pool3d MaxPool1d MaxPool2d MaxPool3d AvgPool1d "
    "AvgPool2d AvgPool3d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool2d "
    "AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool2d",
)
_table(
    "reduction",
    "sum mean max min amax amin argmax argmin prod var std var_mean std_mean norm vector_norm all any "
    "mse_loss MSELoss l1_loss L1Loss smooth_l1_loss SmoothL1Loss huber_loss HuberLoss kl_div KLDivLoss "
    "cosine_similarity CosineSimilarity triplet_margin_loss TripletMarginLoss hinge_embedding_loss "
    "HingeEmbeddingLoss margin_ranking_loss",
)
_table("embedding", "embedding Embedding embedding_bag EmbeddingBag gather index_select scatter scatter_add")
_table("bucketize", "bucketize searchsorted")

# Names that add a trait but no family of their own.
_TRAIT_OF: dict[str, str] = {}
for _name in (
    "relu relu6 gelu silu sigmoid tanh leaky_relu elu selu celu hardtanh hardswish hardsigmoid softplus softsign "
    "mish swish logsigmoid tanhshrink threshold prelu ReLU ReLU6 GELU SiLU Sigmoid Tanh LeakyReLU ELU SELU CELU "
    "Hardtanh Hardswish Hardsigmoid Softplus Softsign Mish PReLU LogSigmoid exp exp2 log log2 log1p sqrt rsqrt "
    "abs clamp clip pow where sign erf"
).split():
    _TRAIT_OF[_name.lower()] = "elementwise"
for _name in "masked_fill tril triu".split():
    _TRAIT_OF[_name] = "masking"
# `max`/`min` with a dim are reductions; as Python builtins on scalars they are nothing: only method
# and torch spellings count (see _name_of).
_REDUCING_BUILTINS = {"max", "min", "sum", "abs", "all", "any", "pow"}

# The order a family takes when several were found: what decides a kernel's design comes first.
PRIORITY = (
    "attention",
    "conv1d",
    "convolution",
    "matmul",
    "scan",
    "cross_entropy",
    "layernorm",
    "rmsnorm",
    "normalization",
    "softmax",
    "pooling",
    "reduction",
    "embedding",
    "bucketize",
    "elementwise",
)

# Families whose documents serve each other (a LayerNorm problem reads the RMSNorm kernel; a
# conv2d reads the conv1d implicit-GEMM guidance). A kin family counts as the operator's own, one
# step below the family itself.
KIN: dict[str, tuple[str, ...]] = {
    "attention": ("flash_attention",),
    "flash_attention": ("attention",),
    "conv1d": ("convolution",),
    "convolution": ("conv1d",),
    "matmul": ("gemm",),
    "gemm": ("matmul",),
    "layernorm": ("normalization", "rmsnorm", "reduction"),
    "rmsnorm": ("normalization", "layernorm", "reduction"),
    "normalization": ("layernorm", "rmsnorm", "reduction"),
    "cross_entropy": ("softmax", "reduction"),
    "softmax": ("cross_entropy", "reduction"),
    "scan": ("reduction",),
    "pooling": ("reduction",),
}

# Extra search words per family (what its documents say that the operator's names do not).
QUERY_WORDS: dict[str, str] = {
    "attention": "attention flash online softmax causal kv",
    "conv1d": "convolution implicit gemm",
    "convolution": "convolution implicit gemm im2col",
    "matmul": "matmul gemm tiling tensor core epilogue",
    "scan": "scan prefix sum cumulative row",
    "cross_entropy": "cross entropy logsumexp online softmax row reduction",
    "layernorm": "layernorm normalization row reduction mean variance",
    "rmsnorm": "rmsnorm normalization row reduction",
    "normalization": "normalization reduction mean variance",
    "softmax": "softmax online softmax row reduction",
    "pooling": "pooling window reduction",
    "reduction": "reduction row memory bound",
    "embedding": "embedding gather index",
    "bucketize": "bucketize searchsorted binary search",
    "elementwise": "elementwise memory bound fusion",
}


@dataclass(frozen=True)
class OperatorTraits:
    families: tuple[str, ...] = ()
    traits: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()  # e.g. ("nn.LayerNorm",) or ("@ x2", "F.softmax")
    declared: str = ""  # the spec's own `family:`, when it has one
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def primary(self) -> str:
        return self.families[0] if self.families else ""

    def own(self) -> tuple[str, ...]:
        """The families whose documents are the operator's own: its families, then their kin."""
        out = list(self.families)
        for f in self.families:
            out += [k for k in KIN.get(f, ()) if k not in out]
        return tuple(out)

    def query_words(self) -> str:
        words = [w for f in self.families for w in (f.replace("_", " "), f, QUERY_WORDS.get(f, ""))]
        return " ".join([*words, *self.traits])

    def describe(self) -> str:
        """`layernorm (from nn.LayerNorm); also: normalization`; '' when nothing was found."""
        if not self.families:
            return ""
        where = "the spec's `family`" if self.declared and self.primary == self.declared else ""
        if self.evidence:
            where = (where + "; " if where else "") + "the reference calls " + ", ".join(self.evidence[:6])
        rest = [f for f in self.families[1:]] + [t for t in self.traits if t not in self.families]
        text = self.primary + (f" ({where})" if where else "")
        return text + (f"; also: {', '.join(rest)}" if rest else "")


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _name_of(call: ast.Call) -> tuple[str, str] | None:
    """(the called name, how it is shown) for `torch.cumsum(...)`, `nn.LayerNorm(...)`,
    `x.softmax(...)`; None for what cannot name an operator (self.ln(x), a builtin max())."""
    func = call.func
    if isinstance(func, ast.Name):
        if func.id in _REDUCING_BUILTINS:
            return None
        return func.id, func.id
    if isinstance(func, ast.Attribute):
        dotted = _dotted(func)
        head = dotted.split(".")[0]
        if head in ("self", "math", "np", "numpy", "random"):  # self.ln(x): named where it was built; scalars
            return None
        shown = dotted if head in ("torch", "nn", "F", "functional", "tl") else f".{func.attr}()"
        shown = shown.replace("torch.nn.functional.", "F.").replace("torch.nn.", "nn.")
        return func.attr, shown
    return None


def _is_explicit_matmul(node: ast.AST) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return True
    if isinstance(node, ast.Call):
        found = _name_of(node)
        return bool(found) and found[0].replace("_", "").lower() in ("matmul", "mm", "bmm", "einsum", "baddbmm")
    return False


def _computing_nodes(tree: ast.Module | None):
    """Every node of the module's classes and helper functions, but not of get_inputs and
    get_init_inputs (they make the inputs; a cumsum of offsets there is not the operator)."""
    if tree is None:
        return
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) or (
            isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
            and stmt.name not in ("get_inputs", "get_init_inputs")
        ):
            yield from ast.walk(stmt)


def infer(source: str, declared_family: str = "", tags: tuple[str, ...] | list[str] = ()) -> OperatorTraits:
    """The operator's families and traits from the reference's source (and the spec's `family`
    and `tags`, which come first). An unparsable source gives only what the spec declares."""
    declared = (declared_family or "").strip().lower()
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        tree = None
    found: dict[str, list[str]] = {}  # family -> the names that showed it, in source order
    traits: dict[str, list[str]] = {}
    explicit_matmuls = 0
    arithmetic = False  # `x * s + y`: elementwise even without a named operator
    for node in _computing_nodes(tree):
        if _is_explicit_matmul(node):
            explicit_matmuls += 1
        arithmetic = arithmetic or (isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            found.setdefault("matmul", []).append("@")
            continue
        named = _name_of(node) if isinstance(node, ast.Call) else None
        if named is None:
            continue
        name, shown = named
        key = name.replace("_", "").lower()
        if key in _FAMILY_OF:
            found.setdefault(_FAMILY_OF[key], []).append(shown)
        elif name.lower() in _TRAIT_OF or key in _TRAIT_OF:
            traits.setdefault(_TRAIT_OF.get(name.lower()) or _TRAIT_OF[key], []).append(shown)
    notes = []
    reduced = {s.rsplit(".", 1)[-1].strip("()") for s in found.get("reduction", [])}
    roots = {s.rsplit(".", 1)[-1].strip("()") for s in traits.get("elementwise", [])}
    if not found.keys() & {"layernorm", "rmsnorm", "normalization"}:
        if reduced & {"var", "std", "var_mean", "std_mean"} and roots & {"sqrt", "rsqrt"}:
            found["normalization"] = []
            notes.append("a variance and a square root: a normalization")
        elif "mean" in reduced and "rsqrt" in roots:
            found["rmsnorm"] = []
            notes.append("a mean and a reciprocal square root: an RMS normalization")
    if "attention" not in found and explicit_matmuls >= 2 and "softmax" in found:
        found["attention"] = []
        notes.append("two explicit matrix products with a softmax between them: attention")
    families = [f for f in PRIORITY if f in found]
    if not families and ("elementwise" in traits or arithmetic):
        families = ["elementwise"]
    extra = list(traits)
    if any(f in families for f in ("attention", "conv1d", "convolution", "matmul")):
        extra.append("tensor-core")
    if any(f in families for f in ("layernorm", "rmsnorm", "normalization", "softmax", "cross_entropy", "pooling")):
        extra.append("reduction")
    tag_families = [t.lower() for t in tags if t.lower() in PRIORITY]
    ordered = list(dict.fromkeys([*([declared] if declared else []), *families, *tag_families]))
    evidence = [s for f in families for s in found.get(f, [])] + [s for t in traits.values() for s in t]
    evidence = [("@" if s == "@" else s) for s in dict.fromkeys(evidence)]
    return OperatorTraits(
        families=tuple(ordered),
        traits=tuple(t for t in dict.fromkeys(extra) if t not in ordered),
        evidence=tuple(evidence),
        declared=declared,
        notes=tuple(notes),
    )


def of_spec(spec) -> OperatorTraits:
    """`infer` for a Spec (its reference source, `family` and `tags`); nothing when the
    reference cannot be read."""
    try:
        source = spec.reference_source
    except OSError:
        source = ""
    return infer(source, getattr(spec, "family", "") or "", tuple(getattr(spec, "tags", ()) or ()))
