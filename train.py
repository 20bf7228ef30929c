"""
Train a verifier on cached step-boundary hidden states (extract.py) and correctness labels (label.py).
Never loads the generator.

    python train.py config/gsm8k_1p7b.py                      # HSRM, paper settings, seed 42
    python train.py config/gsm8k_1p7b.py --seeds=[42,123,456,789,1024]
    python train.py config/x.py --verifier=deepset --loss=bce --max_train_problems=100
    python train.py --out_dir=out/math --train_dirs="['out/gsm8k/train','out/math/train']"   # pooled

Writes {run_dir}/ckpt.pt (best model by validation `early_stop_metric`), config.json and log.json.
A run dir whose log.json says it finished with the same config is skipped, so a seed sweep that was
interrupted picks up at the first unfinished seed.
"""
import copy
import json
import math
import os
import time

import numpy as np
import torch
from tqdm import tqdm

from configurator import configure, knobs
from model import (LOSSES, atomic_write_json, build_verifier, build_vocab, check_states, count_params, load_split,
                   pool_metrics, problem_columns, resolve_device, save_checkpoint, score_problems, score_sorted)

# -----------------------------------------------------------------------------
# config (options in the comments; the defaults are the paper's Table "HSRM training hyperparameters")
out_dir = 'out/demo'        # extraction run dir: reads {out_dir}/train unless train_dirs is set
train_dirs = None           # list of split dirs; several = pooled training (e.g. ['out/gsm8k/train', 'out/math/train'])
run_dir = None              # where ckpt.pt goes; None -> {out_dir}/verifiers/{run_name(config)}, e.g. hsrm_seed42
verifier = 'hsrm'           # 'hsrm' | 'hsrm_narrow' | 'deepset' | 'text' | 'hybrid'
text_size = 'small'         # text verifier size: 'small' (d 256, L 1, h 2) | 'large' (d 768, L 2, h 4)
max_tokens = 512            # text/hybrid: last tokens of each completion read (= position table size)
verifier_layers = None      # stored layers to read, e.g. [-1] or [-1, -2, -3, -4]; None = all stored
input_steps = 'all'         # 'all' step states | 'last' (final step only)
loss = 'pairwise'           # 'pairwise' (paper, tie-safe) | 'bce' | 'listmle'
lr = 1e-4
weight_decay = 0.01         # AdamW's default (the paper does not give one)
lr_schedule = 'constant'    # 'constant' (paper's HSRM) | 'cosine' (with warmup_iters; the paper's EORM)
warmup_iters = 0
max_iters = 1000
batch_problems = 8          # problems per batch, each with all (or n_train) of its candidates
n_train = None              # candidates sampled per problem per batch; None = all
dropout = 0.1
val_frac = 0.2              # problem-level validation split ...
val_seed = 42               # ... and its seed (fixed across training seeds, as in the paper)
eval_interval = 50          # validate every this many steps (and at the end)
early_stop_metric = 'auroc' # 'auroc' | 'acc' | 'loss': the checkpoint kept is the best on this
patience = 0                # stop after this many evals without improvement; 0 = run all max_iters
max_train_problems = None   # K: train on K problems drawn (by seed) from the training part; None = all
seed = 42
seeds = None                # list of seeds: one run (and run dir) per seed
device = 'auto'             # 'auto' (cuda when visible) | 'cpu' | 'cuda'
chunk_candidates = 128      # a batch's candidates run length-sorted in chunks of this many (0 = one chunk)
eval_batch_size = 256       # candidates per scoring batch in validation
threads = 0                 # CPU threads for torch; 0 = torch's default (on a busy shared CPU, 1 is often much faster)
# -----------------------------------------------------------------------------
DEFAULTS = knobs(globals())  # the knobs above as a dict: what run() and other stages start from


def split_problems(problems, val_frac=0.2, val_seed=42):
    """Deterministic problem-level split -> (train, val). Every candidate of a problem lands on one side."""
    n = len(problems)
    n_val = int(round(val_frac * n))
    if n_val < 1 or n - n_val < 1:
        raise ValueError(f"val_frac={val_frac} on {n} problems leaves {n - n_val} train / {n_val} val problems; "
                         f"fix: extract more problems or change --val_frac")
    perm = np.random.default_rng(val_seed).permutation(n)
    val = set(perm[:n_val].tolist())
    return [p for i, p in enumerate(problems) if i not in val], [p for i, p in enumerate(problems) if i in val]


def is_mixed(p):
    ls = [c['correct'] for c in p['candidates']]
    return any(ls) and not all(ls)


def load_train_data(dirs):
    """Problems of each split dir (labels attached, states checked), each tagged with its dir."""
    out = []
    for d in dirs:
        probs = load_split(d)
        check_states(probs, d)
        for p in probs:
            p['src'] = d
        out.append(probs)
    return out


def _labels(problems):
    return [[float(c['correct']) for c in p['candidates']] for p in problems]


def _loss_of(name, scores, labels, pids, gen):
    fn = LOSSES[name]
    return fn(scores, labels, pids, gen) if name == 'listmle' else fn(scores, labels, pids)


def val_metrics(model, problems, cfg, dev, gen):
    scores = score_problems(model, problems, cfg['eval_batch_size'], dev, where='validation split')
    m = pool_metrics(scores, _labels(problems))
    s = torch.tensor(np.concatenate(scores))
    lab = torch.tensor(np.concatenate(_labels(problems)))
    pid = torch.cat([torch.full((len(p['candidates']),), i) for i, p in enumerate(problems)])
    l = _loss_of(cfg['loss'], s, lab, pid, gen)
    m['loss'] = float(l) if l is not None else float('nan')
    return m


def train(train_problems, val_problems, cfg):
    """Train one verifier; returns (best model, log). cfg: train.py config keys (missing = defaults).
    Writes {run_dir}/ckpt.pt, config.json, log.json when cfg['run_dir'] is set."""
    cfg = {**DEFAULTS, **cfg}
    if cfg['loss'] not in LOSSES:
        raise ValueError(f"loss={cfg['loss']!r}; fix: --loss= one of {list(LOSSES)}")
    if cfg['early_stop_metric'] not in ('auroc', 'acc', 'loss'):
        raise ValueError(f"early_stop_metric={cfg['early_stop_metric']!r}; fix: auroc, acc or loss")
    seed_ = cfg['seed']
    torch.manual_seed(seed_)
    rng = np.random.default_rng(seed_)
    gen = torch.Generator().manual_seed(seed_)  # ListMLE tie breaks
    dev = resolve_device(cfg['device'])

    if not train_problems or not val_problems:
        raise ValueError(f"{len(train_problems)} training / {len(val_problems)} validation problems; both need at "
                         f"least one; fix: check train_dirs and val_frac")
    if cfg['max_train_problems'] is not None:
        k = cfg['max_train_problems']
        if not 0 < k <= len(train_problems):
            raise ValueError(f"max_train_problems={k} but the training part has {len(train_problems)} problems; "
                             f"fix: --max_train_problems=<1..{len(train_problems)}>")
        train_problems = [train_problems[i] for i in sorted(rng.choice(len(train_problems), k, replace=False))]
    # problems with one label only give the ranking losses nothing (the paper omits them)
    pool = train_problems if cfg['loss'] == 'bce' else [p for p in train_problems if is_mixed(p)]
    if not pool:
        n_ok = sum(all(c['correct'] for c in p['candidates']) for p in train_problems)
        raise ValueError(f"none of the {len(train_problems)} training problems has both a correct and an incorrect "
                         f"candidate ({n_ok} all correct, {len(train_problems) - n_ok} all wrong): the {cfg['loss']} "
                         f"loss has nothing to learn; fix: more samples per problem, more/harder problems, or --loss=bce")
    if cfg['early_stop_metric'] == 'auroc' and not any(is_mixed(p) for p in val_problems):
        raise ValueError(f"no validation problem has both labels, so within-problem AUROC is undefined; "
                         f"fix: --early_stop_metric=acc (or loss), or a larger --val_frac")

    # input choice from the stored layers
    p0 = pool[0]
    stored = list(p0['layers'])
    use_layers = list(cfg['verifier_layers']) if cfg['verifier_layers'] is not None else stored
    d_gen = p0['candidates'][0]['states'].shape[1] // len(stored)
    arch = {'dropout': cfg['dropout']}
    if cfg['verifier'] == 'text':
        arch['size'] = cfg['text_size']
    vocab = build_vocab(train_problems) if cfg['verifier'] in ('text', 'hybrid') else None
    model = build_verifier(cfg['verifier'], d_gen=d_gen, layers=use_layers, input_steps=cfg['input_steps'],
                           vocab=vocab, max_tokens=cfg['max_tokens'], **arch).to(dev)
    spec = model.spec
    cols = problem_columns(pool, spec, 'training data')
    problem_columns(val_problems, spec, 'validation data')  # same checks, fail before training

    opt = torch.optim.AdamW(model.parameters(), lr=cfg['lr'], weight_decay=cfg['weight_decay'])

    def lr_at(it):
        if it < cfg['warmup_iters']:
            return cfg['lr'] * (it + 1) / cfg['warmup_iters']
        if cfg['lr_schedule'] == 'cosine':
            frac = (it - cfg['warmup_iters']) / max(1, cfg['max_iters'] - cfg['warmup_iters'])
            return cfg['lr'] * 0.5 * (1 + math.cos(math.pi * frac))
        return cfg['lr']

    higher = cfg['early_stop_metric'] != 'loss'
    best, best_step, best_state, bad_evals = -math.inf if higher else math.inf, -1, None, 0
    log = {'train_loss': [], 'val': [], 'n_params': count_params(model), 'n_train_problems': len(train_problems),
           'n_pool_problems': len(pool), 'n_val_problems': len(val_problems), 'd_gen': d_gen, 'layers': use_layers,
           'skipped_batches': 0, 'step_time_s': 0.0}
    run_dir_ = cfg['run_dir']
    t0 = time.time()
    order, cursor = rng.permutation(len(pool)), 0
    bar = tqdm(range(cfg['max_iters']), desc=f"train {cfg['verifier']} seed {seed_}", dynamic_ncols=True)
    for it in bar:
        # a batch: batch_problems problems (epoch-wise shuffled), all or n_train candidates of each
        if cursor + cfg['batch_problems'] > len(order):
            order, cursor = rng.permutation(len(pool)), 0
        idx = order[cursor:cursor + cfg['batch_problems']]
        cursor += cfg['batch_problems']
        cands, pids = [], []
        for j, pi in enumerate(idx):
            cs = pool[pi]['candidates']
            if cfg['n_train'] is not None and cfg['n_train'] < len(cs):
                cs = [cs[i] for i in rng.choice(len(cs), cfg['n_train'], replace=False)]
            cands += cs
            pids += [j] * len(cs)
        labels = torch.tensor([float(c['correct']) for c in cands], device=dev)
        for g in opt.param_groups:
            g['lr'] = lr_at(it)
        model.train()
        t1 = time.time()
        scores = score_sorted(model, cands, cols, cfg['chunk_candidates'], dev)
        l = _loss_of(cfg['loss'], scores, labels, torch.tensor(pids, device=dev), gen)
        if l is None:  # a sampled n_train subset held one label only
            log['skipped_batches'] += 1
        else:
            opt.zero_grad(set_to_none=True)
            l.backward()
            opt.step()
            log['step_time_s'] += time.time() - t1
            log['train_loss'].append((it, l.item()))
            bar.set_postfix(loss=f'{l.item():.4f}', best=f'{best:.4f}')

        if (it + 1) % cfg['eval_interval'] == 0 or it + 1 == cfg['max_iters']:
            m = val_metrics(model, val_problems, cfg, dev, gen)
            m['iter'] = it + 1
            log['val'].append(m)
            v = m[cfg['early_stop_metric']]
            if (v > best) if higher else (v < best):
                best, best_step, bad_evals = v, it + 1, 0
                best_state = copy.deepcopy(model.state_dict())
                if run_dir_:
                    save_checkpoint(os.path.join(run_dir_, 'ckpt.pt'), model,
                                    {'train_config': cfg, 'early_stop_metric': cfg['early_stop_metric'],
                                     'best_metric': v, 'best_step': best_step, 'best_val': m})
            else:
                bad_evals += 1
            if run_dir_:
                atomic_write_json({**log, 'done': False}, os.path.join(run_dir_, 'log.json'))
            if cfg['patience'] and bad_evals >= cfg['patience']:
                print(f"early stop at step {it + 1}: no {cfg['early_stop_metric']} gain in {bad_evals} evals")
                break
    if best_state is None:
        raise ValueError(f"validation {cfg['early_stop_metric']} was never finite; fix: check labels / val split")
    model.load_state_dict(best_state)
    log.update(best_metric=best, best_step=best_step, time_s=time.time() - t0, done=True,
               best_val=next(m for m in log['val'] if m['iter'] == best_step))
    if run_dir_:
        atomic_write_json(log, os.path.join(run_dir_, 'log.json'))
    return model.eval(), log


# keys whose non-default values name the default run dir, so ablation runs do not overwrite each other
NAME_KEYS = ('text_size', 'verifier_layers', 'input_steps', 'loss', 'n_train', 'max_train_problems')


def run_name(cfg):
    """'hsrm_seed42' for the paper's settings; e.g. 'hsrm_layers-1-2-3-4_loss-bce_seed42' otherwise."""
    tags = [cfg['verifier']]
    for k in NAME_KEYS:
        if cfg[k] != DEFAULTS[k] and not (k == 'text_size' and cfg['verifier'] != 'text'):
            v = cfg[k]
            k = k.replace('verifier_', '')
            tags.append(k + ''.join(str(x) for x in v) if isinstance(v, list) else f'{k}-{v}')
    return '_'.join(tags + [f"seed{cfg['seed']}"])


def run(cfg):
    """The CLI: load the split dirs, split each by problem, pool, train one model per seed."""
    dirs = cfg['train_dirs'] or [os.path.join(cfg['out_dir'], 'train')]
    data = load_train_data(dirs)
    tr, va = [], []
    for d, probs in zip(dirs, data):
        a, b = split_problems(probs, cfg['val_frac'], cfg['val_seed'])
        tr, va = tr + a, va + b
    for s in cfg['seeds'] or [cfg['seed']]:
        c = {**cfg, 'seed': s, 'train_dirs': dirs, 'seeds': None}
        c['run_dir'] = os.path.join(cfg['out_dir'], 'verifiers', run_name(c))
        if cfg['run_dir']:  # one dir per seed below it when sweeping
            c['run_dir'] = os.path.join(cfg['run_dir'], f'seed{s}') if cfg['seeds'] else cfg['run_dir']
        logp = os.path.join(c['run_dir'], 'log.json')
        cfgp = os.path.join(c['run_dir'], 'config.json')
        if os.path.exists(logp) and os.path.exists(cfgp):
            with open(logp) as f1, open(cfgp) as f2:
                if json.load(f1).get('done') and json.load(f2) == json.loads(json.dumps(c, default=str)):
                    print(f"{c['run_dir']} already finished with this config; skipping")
                    continue
            print(f"{c['run_dir']} holds an unfinished or different run; training it again")
        atomic_write_json(c, cfgp)
        _, log = train(tr, va, c)
        bv = log['best_val']
        print(f"seed {s}: best {c['early_stop_metric']}={log['best_metric']:.4f} at step {log['best_step']} "
              f"(val acc {bv['acc']:.4f}, auroc {bv['auroc']:.4f}, oracle {bv['oracle']:.4f}) -> {c['run_dir']}/ckpt.pt")


if __name__ == '__main__':
    config = configure(globals())  # config files, then --key=value, override the knobs above
    if threads:
        torch.set_num_threads(threads)
    run(config)
