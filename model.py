"""
What every stage shares: the on-disk format (atomic writes, loading a split back), the metrics,
and (below) the verifier models and losses.
"""
import glob
import json
import os
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# the encoder's inference fast path packs padded batches as nested tensors and warns that they are a prototype
warnings.filterwarnings('ignore', message='The PyTorch API of nested tensors')

# -----------------------------------------------------------------------------
# files: atomic writes and the extraction format (see README "On-disk format")


def atomic_save(obj, path):
    """torch.save to a temp file in the same directory, then rename: a killed run never leaves a half file."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f'{path}.tmp{os.getpid()}'
    torch.save(obj, tmp)
    os.replace(tmp, path)


def atomic_write_json(obj, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w') as f:
        json.dump(obj, f, indent=1, default=str)
    os.replace(tmp, path)


def resolve_device(device):
    """'auto' -> 'cuda' when a GPU is visible, else 'cpu'; an explicit 'cuda' without one is an error."""
    if device == 'auto':
        return 'cuda' if torch.cuda.is_available() else 'cpu'
    if device.startswith('cuda') and not torch.cuda.is_available():
        raise SystemExit(f"device={device!r} but CUDA is not available; fix: --device=cpu (or 'auto')")
    return device


def problem_files(split_dir):
    files = sorted(glob.glob(os.path.join(split_dir, 'problems', '*.pt')))
    if not files:
        raise FileNotFoundError(f"no extracted problems under {split_dir}/problems/; "
                                f"fix: run `python extract.py <config>` with out_dir pointing at {os.path.dirname(split_dir) or split_dir}")
    return files


def load_problem(path):
    return torch.load(path, weights_only=True)


def load_labels(split_dir):
    """{problem key: [label dict per candidate]} from {split_dir}/labels.json."""
    path = os.path.join(split_dir, 'labels.json')
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing; fix: run `python label.py <config>` on this extraction first")
    with open(path) as f:
        return json.load(f)['labels']


def load_split(split_dir, labels=True):
    """All problems of one split dir as a list of dicts (the per-problem .pt content), each candidate
    carrying 'correct' (bool) from labels.json when labels=True. Never needs the generator."""
    files = problem_files(split_dir)  # no data at all is the first thing to report
    lab = load_labels(split_dir) if labels else None
    problems = []
    for path in files:
        p = load_problem(path)
        if lab is not None:
            ls = lab.get(p['key'])
            if ls is None or len(ls) != len(p['candidates']):
                raise ValueError(f"labels.json in {split_dir} has {0 if ls is None else len(ls)} labels for problem "
                                 f"{p['key']} but it has {len(p['candidates'])} candidates; fix: re-run label.py on {split_dir}")
            for i, (c, l) in enumerate(zip(p['candidates'], ls)):
                if not isinstance(l.get('correct'), bool):
                    raise ValueError(f"labels.json in {split_dir}: problem {p['key']} candidate {i} has correct="
                                     f"{l.get('correct')!r}, not true/false; fix: re-run label.py on {split_dir}")
                c['correct'] = l['correct']
                c['answer'] = l.get('answer')
        problems.append(p)
    return problems


# -----------------------------------------------------------------------------
# metrics (per problem: scores and 0/1 labels of its candidates)


def best_of_n(scores, labels):
    """Expected correctness of argmax selection; ties split evenly, never 'first wins'."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    top = scores >= scores.max() - 1e-12 * max(1.0, abs(scores.max()))
    return float(labels[top].mean())


def within_auroc(scores, labels):
    """AUROC of one problem's pool (ties count 1/2); None when the pool is all right or all wrong."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    pos, neg = scores[labels], scores[~labels]
    if len(pos) == 0 or len(neg) == 0:
        return None
    diff = pos[:, None] - neg[None, :]
    return float((diff > 0).mean() + 0.5 * (diff == 0).mean())


def pool_metrics(score_lists, label_lists):
    """Best-of-N accuracy, mean within-problem AUROC (over problems where it is defined), oracle
    pass@N and single-pass accuracy over a list of problems."""
    bon = [best_of_n(s, l) for s, l in zip(score_lists, label_lists)]
    aucs = [a for a in (within_auroc(s, l) for s, l in zip(score_lists, label_lists)) if a is not None]
    return {
        'acc': float(np.mean(bon)) if bon else float('nan'),
        'auroc': float(np.mean(aucs)) if aucs else float('nan'),
        'n_auroc_problems': len(aucs),
        'oracle': float(np.mean([float(np.max(l)) for l in label_lists])) if label_lists else float('nan'),
        'single': float(np.mean([float(np.mean(l)) for l in label_lists])) if label_lists else float('nan'),
        'n_problems': len(label_lists),
    }


# -----------------------------------------------------------------------------
# verifiers. Every forward takes one padded batch dict (make_batch) and returns scores [B]:
#   'states' float32 [B,S,D], 'step_mask' bool [B,S] (True = real step), and for text models
#   'tokens' int64 [B,T] (ids into the restricted vocab), 'token_mask' bool [B,T].
#
# Parameter counts. The paper's equations (linear projection, 2 post-LN encoder layers with FFN 4d,
# mean pool, LN, one linear readout) give 2,104,833 parameters at d_gen 2048, i.e. 2.10M, while its
# tables say 2.12M / 2.25M / 2.65M (d_gen 2048/2560/4096), 3.69M (top-4 layers, 8192), 0.67M
# (Transformer d=128) and 0.40M (DeepSet d=128). Every one of them is reproduced by a score head
# LN -> Linear(d, 64) -> ReLU -> Linear(64, 1), i.e. 64*d + 128 more than a single linear readout
# (+16,256 at d=256). (A 64-entry learned step-position table would also fit the Transformer counts,
# but not DeepSet's, and would cap S at 64 where extraction keeps up to 100 steps.) Default HSRM:
#   input projection d_gen*256 + 256            524,544 at d_gen 2048 (the only d_gen-dependent part)
#   2 encoder layers x 789,760                1,579,520 (qkv 197,376 + out 65,792 + FFN 525,568 + 2 LN 1,024)
#   pooled LN 512 + head 16,448 + 65             17,025
#   total                                     2,121,089 (2.12M); 2,252,161 at 2560; 2,645,377 at 4096
# (the paper's "~3.4M" for d_gen 5120 does not fit any of this: the formula gives 2.91M there).
# No positional encoding over steps (the paper describes none): each step state comes from a causal
# LM, so it already encodes where in the solution it sits.

HEAD_HIDDEN = 64
PAD, UNK = 0, 1  # restricted-vocab ids reserved by text models; real tokens start at 2


def _score_head(d):
    return nn.Sequential(nn.LayerNorm(d), nn.Linear(d, HEAD_HIDDEN), nn.ReLU(), nn.Linear(HEAD_HIDDEN, 1))


def _encoder(d, n_layer, n_head, dropout):
    # post-LN, batch_first, relu: torch's nested-tensor fast path skips padding at inference
    layer = nn.TransformerEncoderLayer(d, n_head, 4 * d, dropout, batch_first=True)
    return nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=n_head % 2 == 0)


def _masked_mean(z, mask):
    """z [B,S,d], mask [B,S] -> [B,d]; padded positions get weight 0 whatever z holds there."""
    m = mask.unsqueeze(-1).to(z.dtype)
    return (z * m).sum(1) / m.sum(1).clamp(min=1.0)


def _encode(encoder, z, mask):
    # masked positions may come back as garbage (or 0 on the fast path); _masked_mean drops them
    return _masked_mean(encoder(z, src_key_padding_mask=~mask), mask)


class HSRM(nn.Module):
    """Per-step linear projection -> Transformer encoder over steps -> mean over real steps -> LN -> head."""

    def __init__(self, d_in, d_model=256, n_layer=2, n_head=4, dropout=0.1):
        super().__init__()
        self.proj = nn.Linear(d_in, d_model)
        self.encoder = _encoder(d_model, n_layer, n_head, dropout)
        self.head = _score_head(d_model)

    def pooled(self, batch):
        return _encode(self.encoder, self.proj(batch['states']), batch['step_mask'])

    def forward(self, batch):
        return self.head(self.pooled(batch)).squeeze(-1)


class DeepSet(nn.Module):
    """Per-step MLP (d_in -> d -> 4d -> d), mean over real steps, LN, head: no interaction between steps."""

    def __init__(self, d_in, d_model=128, dropout=0.1):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(d_in, d_model), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(d_model, 4 * d_model), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(4 * d_model, d_model))
        self.head = _score_head(d_model)

    def forward(self, batch):
        return self.head(_masked_mean(self.phi(batch['states']), batch['step_mask'])).squeeze(-1)


class TextVerifier(nn.Module):
    """EORM-style text-only energy model: token + learned position embeddings over the completion
    text, Transformer encoder, mean over real tokens, LN, head. The vocabulary is restricted to the
    generator-tokenizer ids seen in the training completions (build_vocab) plus PAD and UNK, so
    params = (vocab_size + max_tokens) * d + encoder + head: e.g. small (d 256, L 1, h 2) with
    max_tokens 512 is 2.6M at vocab_size 6,493 (a GSM8K-sized restricted vocab); large (d 768, L 2,
    h 4) is 53.4M only at vocab_size ~50.5k, a GPT-2-sized vocabulary: the paper's two EORM sizes
    imply different vocabularies, and ours makes both counts depend on the training data."""

    def __init__(self, vocab_size, d_model=256, n_layer=1, n_head=2, max_tokens=512, dropout=0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.pos = nn.Embedding(max_tokens, d_model)
        self.drop = nn.Dropout(dropout)
        self.encoder = _encoder(d_model, n_layer, n_head, dropout)
        self.head = _score_head(d_model)

    def pooled(self, batch):
        t = batch['tokens']
        z = self.drop(self.tok(t) + self.pos(torch.arange(t.shape[1], device=t.device)))
        return _encode(self.encoder, z, batch['token_mask'])

    def forward(self, batch):
        return self.head(self.pooled(batch)).squeeze(-1)


class Hybrid(nn.Module):
    """Text + hidden states: an HSRM branch and a small text branch (d_model, 1 layer, 2 heads),
    pooled vectors concatenated -> LN -> head."""

    def __init__(self, d_in, vocab_size, d_model=256, n_layer=2, n_head=4, text_layers=1, text_heads=2,
                 max_tokens=512, dropout=0.1):
        super().__init__()
        self.hidden = HSRM(d_in, d_model, n_layer, n_head, dropout)
        self.text = TextVerifier(vocab_size, d_model, text_layers, text_heads, max_tokens, dropout)
        del self.hidden.head, self.text.head  # only the branches' pooled vectors are used
        self.head = _score_head(2 * d_model)

    def forward(self, batch):
        return self.head(torch.cat([self.hidden.pooled(batch), self.text.pooled(batch)], -1)).squeeze(-1)


TEXT_SIZES = {'small': dict(d_model=256, n_layer=1, n_head=2), 'large': dict(d_model=768, n_layer=2, n_head=4)}
KINDS = ('hsrm', 'hsrm_narrow', 'deepset', 'text', 'hybrid')


def build_verifier(kind, d_gen=None, vocab_size=None, layers=(-1,), input_steps='all', vocab=None,
                   max_tokens=512, **args):
    """Build a verifier. d_gen: the generator's hidden size (per layer); layers: which stored layers it
    reads (input dim = len(layers) * d_gen); input_steps 'all' | 'last'; vocab: list of generator token
    ids (text/hybrid; vocab_size = len(vocab) + 2 for PAD/UNK; vocab_size alone builds a model for
    counting). args: architecture overrides (d_model, n_layer, n_head, dropout, size for 'text').
    The input choices are kept in model.spec, the architecture in model.args: a checkpoint holds both."""
    if kind not in KINDS:
        raise ValueError(f"verifier={kind!r} is not one of {KINDS}; fix: --verifier=hsrm")
    if input_steps not in ('all', 'last'):
        raise ValueError(f"input_steps={input_steps!r}; fix: --input_steps=all or --input_steps=last")
    layers = list(layers)
    if kind != 'text' and not d_gen:
        raise ValueError(f"verifier {kind!r} reads hidden states and needs d_gen (the generator's hidden size)")
    if kind in ('text', 'hybrid'):
        if vocab is not None:
            vocab_size = len(vocab) + 2
        if not vocab_size:
            raise ValueError(f"verifier {kind!r} needs vocab (build_vocab(train problems)) or vocab_size")
    d_in = (d_gen or 0) * len(layers)
    if kind == 'hsrm':
        model = HSRM(d_in, **args)
    elif kind == 'hsrm_narrow':
        model = HSRM(d_in, **{'d_model': 128, **args})
    elif kind == 'deepset':
        model = DeepSet(d_in, **args)
    elif kind == 'text':
        size = args.pop('size', 'small')
        if size not in TEXT_SIZES:
            raise ValueError(f"text size={size!r}; fix: --text_size=small or --text_size=large")
        model = TextVerifier(vocab_size, **{**TEXT_SIZES[size], 'max_tokens': max_tokens, **args})
        args['size'] = size
    else:
        model = Hybrid(d_in, vocab_size, max_tokens=max_tokens, **args)
    model.kind, model.args = kind, dict(args)
    model.spec = dict(kind=kind, d_gen=d_gen, layers=layers, input_steps=input_steps,
                      vocab=list(vocab) if vocab is not None else None, vocab_size=vocab_size,
                      max_tokens=max_tokens)
    return model


def count_params(model):
    return sum(p.numel() for p in model.parameters())


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
                         f"fix: --layers=<subset of {stored_layers}> or re-extract with those layers")
    if list(layers) == stored_layers:
        return None
    idx = [stored_layers.index(l) for l in layers]
    return torch.cat([torch.arange(i * d_gen, (i + 1) * d_gen) for i in idx])


def make_batch(candidates, spec, cols=None):
    """Padded batch dict for a verifier with input spec `spec` (model.spec) from candidate dicts; `cols`
    from layer_columns (None = every stored column). fp16 states become float32 here, per batch."""
    batch = {}
    if spec['kind'] != 'text':
        last = spec['input_steps'] == 'last'
        st = [c['states'][-1:] if last else c['states'] for c in candidates]
        if cols is not None:
            st = [s[:, cols] for s in st]
        batch['states'] = nn.utils.rnn.pad_sequence(st, batch_first=True).float()  # [B,S,D]
        n = torch.tensor([len(s) for s in st])
        batch['step_mask'] = torch.arange(batch['states'].shape[1])[None, :] < n[:, None]
    if spec['kind'] in ('text', 'hybrid'):
        vocab = torch.tensor(spec['vocab'], dtype=torch.long)
        toks = []
        for c in candidates:
            ids = c['token_ids'][-spec['max_tokens']:].long()  # keep the end: the final answer is there
            if len(ids) == 0:
                ids = torch.tensor([UNK])
            j = torch.searchsorted(vocab, ids).clamp(max=len(vocab) - 1)
            toks.append(torch.where(vocab[j] == ids, j + 2, UNK))
        batch['tokens'] = nn.utils.rnn.pad_sequence(toks, batch_first=True, padding_value=PAD)
        batch['token_mask'] = batch['tokens'] != PAD
    return batch


def batch_to(batch, device):
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def check_states(problems, where):
    """Raise on NaN/inf in stored states, naming the file, problem and candidate."""
    for p in problems:
        for i, c in enumerate(p['candidates']):
            if not torch.isfinite(c['states']).all():
                bad = int((~torch.isfinite(c['states'])).sum())
                raise ValueError(f"{where}/problems/{p['key']}.pt: candidate {i} has {bad} NaN/inf values in "
                                 f"'states' (fp16 overflow in extraction?); fix: re-extract problem {p['key']} "
                                 f"or delete the file")


def problem_columns(problems, spec, where):
    """layer_columns for a list of problems that share one stored layer list (one extraction split)."""
    if spec['kind'] == 'text' or not problems:
        return None
    shapes = {(tuple(p['layers']), p['candidates'][0]['states'].shape[1]) for p in problems}
    if len(shapes) > 1:
        raise ValueError(f"{where}: problems differ in (stored layers, state width): {sorted(shapes)}; all must come "
                         f"from one generator and layer list; fix: train/score one generator's extractions at a time")
    (stored, width), = shapes
    return layer_columns(stored, spec['layers'], spec['d_gen'], width, where)


def cand_length(c, spec):
    """Sequence length a candidate costs the verifier: tokens for text models, steps otherwise."""
    if spec['kind'] in ('text', 'hybrid'):
        return min(len(c['token_ids']), spec['max_tokens'])
    return 1 if spec['input_steps'] == 'last' else len(c['states'])


def score_sorted(model, cands, cols, chunk, device):
    """Scores of `cands` [M] in the given order, computed in chunks of `chunk` candidates of similar
    length (so padding stays small even when a few candidates are long). Keeps autograd if enabled."""
    order = sorted(range(len(cands)), key=lambda i: cand_length(cands[i], model.spec))
    chunk = chunk or len(cands)
    out = torch.cat([model(batch_to(make_batch([cands[i] for i in order[k:k + chunk]], model.spec, cols), device))
                     for k in range(0, len(order), chunk)])
    return out[torch.argsort(torch.tensor(order, device=out.device))]


@torch.inference_mode()
def score_problems(model, problems, batch_size=256, device='cpu', where='problems'):
    """Scores per candidate, per problem, in order: list of float np arrays. Candidates of all problems
    are sorted by length and batched together so batches carry little padding."""
    model.eval().to(device)
    cols = problem_columns(problems, model.spec, where)
    s = score_sorted(model, [c for p in problems for c in p['candidates']], cols, batch_size, device)
    return list(np.split(s.float().cpu().numpy(), np.cumsum([len(p['candidates']) for p in problems])[:-1]))


# -----------------------------------------------------------------------------
# losses: scores [M], labels [M] (0/1), problem_ids [M] (which problem each candidate belongs to)


def pairwise_loss(scores, labels, problem_ids):
    """The paper's tie-safe ranking loss: per problem, mean over (correct i, incorrect j) pairs of
    log(1 + exp(-(s_i - s_j))), then mean over problems that have both labels. Correct-correct and
    wrong-wrong pairs cost nothing. None when no problem in the batch has a pair."""
    labels = labels.bool()
    same = problem_ids[:, None] == problem_ids[None, :]
    pair = same & labels[:, None] & ~labels[None, :]  # [M,M] i correct, j incorrect, same problem
    if not pair.any():
        return None
    pl = F.softplus(-(scores[:, None] - scores[None, :]))  # [M,M]
    _, inv = torch.unique(problem_ids, return_inverse=True)
    rows = torch.zeros(int(inv.max()) + 1, dtype=scores.dtype, device=scores.device)
    per = rows.index_add(0, inv, (pl * pair).sum(1))
    cnt = rows.index_add(0, inv, pair.sum(1).to(scores.dtype))
    has = cnt > 0
    return (per[has] / cnt[has]).mean()


def bce_loss(scores, labels, problem_ids=None):
    """Pointwise: each candidate's score is a logit for P(correct); mean over candidates."""
    return F.binary_cross_entropy_with_logits(scores, labels.float())


def listmle_loss(scores, labels, problem_ids, generator=None):
    """ListMLE per problem with a total order built from the labels: correct before incorrect, ties
    broken uniformly at random (torch.Generator `generator`, seeded by the run). The loss is the
    negative Plackett-Luce log-likelihood divided by the list length, averaged over problems that have
    both labels (an all-tie list would only teach the random order). None when there is none."""
    losses = []
    for pid in torch.unique(problem_ids):
        m = problem_ids == pid
        s, l = scores[m], labels[m].float()
        if l.min() == l.max():
            continue
        noise = torch.rand(len(s), generator=generator).to(s.device)
        order = torch.argsort(l * 2 + noise, descending=True)  # labels dominate, noise breaks ties
        so = s[order]
        tail = torch.logcumsumexp(so.flip(0), 0).flip(0)  # log sum_{k >= i} exp(s_k)
        losses.append((tail - so).mean())
    return torch.stack(losses).mean() if losses else None


LOSSES = {'pairwise': pairwise_loss, 'bce': bce_loss, 'listmle': listmle_loss}


# -----------------------------------------------------------------------------
# checkpoints: everything needed to rebuild the exact model, loadable with weights_only=True


def save_checkpoint(path, model, meta):
    """meta: train_config (dict), best_metric, best_step, ... (plain Python values)."""
    s = model.spec
    ckpt = {'version': 1, 'kind': model.kind, 'model_args': dict(model.args), 'd_gen': s['d_gen'],
            'layers': list(s['layers']), 'input_steps': s['input_steps'], 'vocab': s['vocab'],
            'vocab_size': s['vocab_size'], 'max_tokens': s['max_tokens'], 'n_params': count_params(model),
            **meta, 'state_dict': {k: v.detach().cpu() for k, v in model.state_dict().items()}}
    atomic_save(ckpt, path)


def load_checkpoint(path, device='cpu'):
    """(model in eval mode, checkpoint dict). Rebuilds the architecture from what the file holds."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found; fix: run `python train.py <config>` first")
    ck = torch.load(path, map_location='cpu', weights_only=True)
    model = build_verifier(ck['kind'], d_gen=ck['d_gen'], vocab_size=ck['vocab_size'], layers=ck['layers'],
                           input_steps=ck['input_steps'], vocab=ck['vocab'], max_tokens=ck['max_tokens'],
                           **ck['model_args'])
    model.load_state_dict(ck['state_dict'])
    return model.to(device).eval(), ck
