"""Tests for the verifiers, losses, checkpoints (model.py) and training (train.py)."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)

from model import (KINDS, bce_loss, build_verifier, count_params, listmle_loss, load_checkpoint, load_split,  # noqa: E402
                   make_batch, pairwise_loss, save_checkpoint, score_problems)
import train as T  # noqa: E402


@pytest.fixture(autouse=True, scope='module')
def one_thread():
    # the 2 cores are shared: torch's spinning OpenMP threads slow tiny ops ~7x when cores are busy
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def write_split(split_dir, n_problems=30, n_cands=16, d_gen=32, layers=(-1, -2), signal=1.0, seed=0,
                p_correct=None):
    """A split dir in the on-disk format with a learnable signal: the states of correct candidates are
    shifted along a hidden direction (in the layer stored first), on top of a per-problem offset."""
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(d_gen, generator=g)
    u /= u.norm()
    os.makedirs(os.path.join(split_dir, 'problems'), exist_ok=True)
    labels = {}
    for i in range(n_problems):
        key = f'{i:06d}'
        pc = p_correct if p_correct is not None else 0.2 + 0.6 * float(torch.rand(1, generator=g))
        offset = torch.randn(d_gen * len(layers), generator=g)
        cands, labs = [], []
        for _ in range(n_cands):
            ok = bool(torch.rand(1, generator=g) < pc)
            S = int(torch.randint(1, 7, (1,), generator=g))
            T_ = int(torch.randint(5, 20, (1,), generator=g))
            st = torch.randn(S, d_gen * len(layers), generator=g) + offset
            st[:, :d_gen] += signal * (1 if ok else -1) * u * math.sqrt(d_gen) / 4
            ids = torch.randint(0, 500, (T_,), generator=g) + (1000 if ok else 0) * (torch.rand(T_, generator=g) < 0.2)
            cands.append({'text': 'x', 'token_ids': ids.long(), 'logprobs': -torch.rand(T_), 'entropies': torch.rand(T_),
                          'step_pos': torch.arange(S), 'states': st.half(), 'finish': 'eos'})
            labs.append({'correct': ok, 'answer': '1' if ok else '2', 'stage': 'rule'})
        torch.save({'key': key, 'index': i, 'id': str(i), 'dataset': 'synth', 'question': 'q', 'gold': '1', 'meta': {},
                    'prompt': 'p', 'layers': list(layers), 'candidates': cands},
                   os.path.join(split_dir, 'problems', f'{key}.pt'))
        labels[key] = labs
    with open(os.path.join(split_dir, 'labels.json'), 'w') as f:
        json.dump({'version': 1, 'labels': labels, 'summary': {}}, f)
    with open(os.path.join(split_dir, 'config.json'), 'w') as f:
        json.dump({'d_gen': d_gen, 'layers': list(layers)}, f)
    return split_dir


FAST = dict(max_iters=60, eval_interval=20, batch_problems=4, lr=1e-3, d_model=None)


def _cfg(**kw):
    c = {k: v for k, v in FAST.items() if k != 'd_model'}
    c.update(kw)
    return c


# ----------------------------------------------------------------------------- losses


def test_pairwise_loss_hand_computed():
    sp = torch.nn.functional.softplus
    s = torch.tensor([1.0, 2.0, 0.0, 3.0])
    y = torch.tensor([1, 1, 0, 0])
    pid = torch.tensor([0, 0, 0, 1])  # problem 1 has one (incorrect) candidate: no pair, skipped
    want = (sp(torch.tensor(-1.0)) + sp(torch.tensor(-2.0))) / 2
    assert torch.allclose(pairwise_loss(s, y, pid), want)
    # exact value: all scores tied -> log 2 whatever the number of correct candidates
    assert math.isclose(float(pairwise_loss(torch.zeros(5), torch.tensor([1, 1, 1, 0, 0]), torch.zeros(5, dtype=torch.long))),
                        math.log(2), rel_tol=1e-6)
    # ties among correct candidates cost nothing: reordering/spreading correct scores above the wrong one
    # only changes the correct-vs-wrong terms
    a = pairwise_loss(torch.tensor([5.0, 5.0, 0.0]), torch.tensor([1, 1, 0]), torch.zeros(3, dtype=torch.long))
    b = pairwise_loss(torch.tensor([5.0, 5.0, 5.0, 0.0]), torch.tensor([1, 1, 1, 0]), torch.zeros(4, dtype=torch.long))
    assert torch.allclose(a, b) and torch.allclose(a, sp(torch.tensor(-5.0)))
    # two problems: mean over problems, not over pairs
    s2 = torch.tensor([1.0, 0.0, 0.0, 2.0, 0.0, 0.0])
    y2 = torch.tensor([1, 0, 0, 1, 0, 1])
    p2 = torch.tensor([0, 0, 0, 1, 1, 1])
    p0 = sp(torch.tensor(-1.0))  # problem 0: 2 identical pairs
    p1 = (sp(torch.tensor(-2.0)) + sp(torch.tensor(0.0))) / 2
    assert torch.allclose(pairwise_loss(s2, y2, p2), (p0 + p1) / 2)
    # no mixed problem -> None (nothing to learn)
    assert pairwise_loss(torch.randn(4), torch.tensor([1, 1, 0, 0]), torch.tensor([0, 0, 1, 1])) is None


def test_bce_and_listmle_hand_computed():
    s = torch.tensor([2.0, -1.0])
    y = torch.tensor([1, 0])
    want = (math.log1p(math.exp(-2.0)) + math.log1p(math.exp(-1.0))) / 2
    assert math.isclose(float(bce_loss(s, y)), want, rel_tol=1e-6)
    pid = torch.zeros(2, dtype=torch.long)
    # ListMLE, order (correct, wrong): (logsumexp(2,-1) - 2 + 0) / 2
    want = (math.log(math.exp(2) + math.exp(-1)) - 2) / 2
    assert math.isclose(float(listmle_loss(s, y, pid, torch.Generator().manual_seed(0))), want, rel_tol=1e-6)
    assert listmle_loss(s, torch.tensor([1, 1]), pid) is None


# ----------------------------------------------------------------------------- models


def test_param_counts_match_paper():
    def m(kind, d_gen=2048, **kw):
        return count_params(build_verifier(kind, d_gen, **kw)) / 1e6
    assert round(m('hsrm'), 2) == 2.12
    assert round(m('hsrm', 2560), 2) == 2.25
    assert round(m('hsrm', 4096), 2) == 2.65
    assert round(m('hsrm', layers=[-1, -2, -3, -4]), 2) == 3.69  # input-modality table, top-4 layers
    assert round(m('hsrm_narrow'), 2) == 0.67
    assert round(m('deepset'), 2) == 0.40
    # text: (vocab_size + max_tokens 512) * d + encoder + head; the paper's sizes pin the vocab size
    assert round(m('text', None, vocab_size=6493), 1) == 2.6
    assert round(m('text', None, vocab_size=50495, size='large'), 1) == 53.4


def _cands(n, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [{'states': torch.randn(int(torch.randint(1, 12, (1,), generator=g)), d, generator=g).half(),
             'token_ids': torch.randint(0, 50, (int(torch.randint(1, 30, (1,), generator=g)),), generator=g)}
            for _ in range(n)]


@pytest.mark.parametrize('kind', KINDS)
def test_padding_never_changes_a_score(kind):
    torch.manual_seed(0)
    cands = _cands(12, 32)
    m = build_verifier(kind, 32, vocab=list(range(40)), dropout=0.0)
    for mode in ('eval', 'train'):  # eval takes torch's nested-tensor fast path, train the plain one
        getattr(m, mode)()
        with torch.no_grad():
            b = make_batch(cands, m.spec)
            if 'states' in b:  # garbage in the padding
                b['states'][~b['step_mask']] = 1e4 * torch.randn_like(b['states'][~b['step_mask']])
            if 'tokens' in b:
                b['tokens'][~b['token_mask']] = torch.randint(2, 40, (int((~b['token_mask']).sum()),))
            together = m(b)
            alone = torch.cat([m(make_batch([c], m.spec)) for c in cands])
        assert torch.allclose(together, alone, atol=1e-5), (kind, mode, (together - alone).abs().max())


def test_last_step_and_layer_selection():
    cands = _cands(3, 64)  # stored: 2 layers of d_gen 32
    m = build_verifier('hsrm', 32, layers=[-2], input_steps='last')
    from model import layer_columns
    cols = layer_columns([-1, -2], [-2], 32, 64, 'test')
    b = make_batch(cands, m.spec, cols)
    assert b['states'].shape == (3, 1, 32)
    assert torch.equal(b['states'][1, 0], cands[1]['states'][-1, 32:].float())


def test_checkpoint_round_trip(tmp_path):
    probs = [{'key': '000000', 'layers': [-1], 'candidates': _cands(7, 32)},
             {'key': '000001', 'layers': [-1], 'candidates': _cands(5, 32, seed=1)}]
    for kind in KINDS:
        m = build_verifier(kind, 32, vocab=list(range(0, 50, 2)), **({'size': 'small'} if kind == 'text' else {}))
        p = str(tmp_path / f'{kind}.pt')
        save_checkpoint(p, m, {'train_config': {'seed': 1}, 'best_metric': 0.7, 'best_step': 10})
        ck = torch.load(p, weights_only=True)
        assert ck['kind'] == kind and ck['best_step'] == 10 and ck['n_params'] == count_params(m)
        m2, _ = load_checkpoint(p)
        assert type(m2) is type(m) and count_params(m2) == count_params(m)
        for a, b in zip(score_problems(m, probs), score_problems(m2, probs)):
            assert np.array_equal(a, b)


# ----------------------------------------------------------------------------- training


def test_training_learns_synthetic_signal(tmp_path):
    split = write_split(str(tmp_path / 'run' / 'train'), n_problems=40, n_cands=8, signal=0.6)
    tr, va = T.split_problems(load_split(split), 0.25, 42)
    assert {p['key'] for p in tr}.isdisjoint(p['key'] for p in va) and len(va) == 10
    untrained = build_verifier('hsrm', 32, layers=[-1, -2])
    torch.manual_seed(0)
    model, log = T.train(tr, va, _cfg(max_iters=60, eval_interval=20, seed=1))
    losses = [l for _, l in log['train_loss']]
    assert np.mean(losses[-20:]) < np.mean(losses[:20]) - 0.1
    assert log['best_val']['auroc'] > 0.75, log['best_val']
    # the returned model is the best one and scores held-out problems better than chance
    s = score_problems(model, va)
    from model import pool_metrics
    m = pool_metrics(s, [[c['correct'] for c in p['candidates']] for p in va])
    assert math.isclose(m['auroc'], log['best_val']['auroc'], abs_tol=1e-6) and m['acc'] > m['single']
    assert m['auroc'] > pool_metrics(score_problems(untrained, va), [[c['correct'] for c in p['candidates']] for p in va])['auroc']


@pytest.mark.parametrize('kw', [dict(verifier='deepset', loss='bce'), dict(verifier='hsrm_narrow', loss='listmle',
                                n_train=6, verifier_layers=[-1], input_steps='last'), dict(verifier='text', text_size='small'),
                                dict(verifier='hybrid', max_train_problems=10, early_stop_metric='loss')])
def test_variants_train(tmp_path, kw):
    split = write_split(str(tmp_path / 'train'), n_problems=20, n_cands=8)
    tr, va = T.split_problems(load_split(split))
    model, log = T.train(tr, va, _cfg(max_iters=10, eval_interval=5, **kw))
    assert log['best_step'] in (5, 10) and all(np.isfinite(l) for _, l in log['train_loss'])
    assert model.spec['kind'] == kw['verifier']
    if kw['verifier'] == 'deepset':  # the seed fixes everything: same run, same losses and model
        model2, log2 = T.train(tr, va, _cfg(max_iters=10, eval_interval=5, **kw))
        assert log2['train_loss'] == log['train_loss']
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), model2.state_dict().values()))
    if 'max_train_problems' in kw:
        assert log['n_train_problems'] == 10


def test_cli_writes_run_and_resumes(tmp_path):
    out = tmp_path / 'ex'
    write_split(str(out / 'train'), n_problems=15, n_cands=8)
    cmd = [sys.executable, os.path.join(HERE, 'train.py'), f'--out_dir={out}', '--max_iters=6', '--eval_interval=3',
           '--batch_problems=4', '--seeds=[1,2]']
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, env=env)
    assert r.returncode == 0, r.stderr
    assert T.run_name({**T.DEFAULTS, 'loss': 'bce', 'verifier_layers': [-1, -2], 'seed': 3}) == 'hsrm_layers-1-2_loss-bce_seed3'
    for s in (1, 2):
        d = out / 'verifiers' / f'hsrm_seed{s}'
        ck = torch.load(d / 'ckpt.pt', weights_only=True)
        assert ck['train_config']['seed'] == s and ck['d_gen'] == 32 and ck['layers'] == [-1, -2]
        assert json.load(open(d / 'log.json'))['done'] and json.load(open(d / 'config.json'))['seed'] == s
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, env=env)
    assert r.returncode == 0 and r.stdout.count('already finished') == 2


# ----------------------------------------------------------------------------- bad input


def _err(fn, *match):
    with pytest.raises((ValueError, FileNotFoundError)) as e:
        fn()
    for m in match:
        assert m in str(e.value), str(e.value)


def test_bad_inputs(tmp_path):
    split = write_split(str(tmp_path / 'a' / 'train'), n_problems=10, n_cands=6)
    probs = load_split(split)
    tr, va = T.split_problems(probs)
    # d_gen / layer mismatch between a model (checkpoint) and data
    m = build_verifier('hsrm', 48, layers=[-1])
    _err(lambda: score_problems(m, probs), 'd_gen=48', 'fix')
    m = build_verifier('hsrm', 32, layers=[-3])
    _err(lambda: score_problems(m, probs), '[-3]', 'stored [-1, -2]')
    _err(lambda: T.train(tr, va, _cfg(verifier_layers=[-5])), 'stored [-1, -2]')
    # labels missing for some candidates
    lab = json.load(open(os.path.join(split, 'labels.json')))
    lab['labels']['000003'] = lab['labels']['000003'][:-1]
    json.dump(lab, open(os.path.join(split, 'labels.json'), 'w'))
    _err(lambda: load_split(split), '000003', 'label.py')
    os.remove(os.path.join(split, 'labels.json'))
    _err(lambda: load_split(split), 'labels.json', 'label.py')
    # a split with no mixed problem: the pairwise loss has nothing to learn
    allok = load_split(write_split(str(tmp_path / 'b' / 'train'), n_problems=10, n_cands=4, p_correct=1.0))
    _err(lambda: T.train(*T.split_problems(allok), _cfg()), 'nothing to learn', '8 all correct')
    # NaN / inf in stored states: named file and candidate
    bad = write_split(str(tmp_path / 'c' / 'train'), n_problems=4, n_cands=3)
    f = os.path.join(bad, 'problems', '000002.pt')
    p = torch.load(f, weights_only=True)
    p['candidates'][1]['states'][0, 5] = float('inf')
    torch.save(p, f)
    _err(lambda: T.load_train_data([bad]), '000002.pt', 'candidate 1')
    # empty data
    os.makedirs(tmp_path / 'empty' / 'train')
    _err(lambda: T.load_train_data([str(tmp_path / 'empty' / 'train')]), 'no extracted problems')
    _err(lambda: T.split_problems(probs[:1]), 'val_frac')
