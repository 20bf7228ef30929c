"""Tests for evaluation (evaluate.py) and baselines (baselines.py)."""
import json
import math
import os
import subprocess
import sys
from itertools import combinations

import numpy as np
import pytest
import torch

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)

import baselines as B  # noqa: E402
import evaluate as E  # noqa: E402
from model import best_of_n, build_verifier, within_auroc  # noqa: E402


def _pool(labels, scores=None, answers=None, n=None, n_subsets=200, equal=None):
    labels = np.asarray(labels, dtype=float)
    answers = answers if answers is not None else [str(int(x)) for x in labels]
    p = {'key': '000000', 'index': 0, 'candidates': [{'correct': bool(l), 'answer': a} for l, a in zip(labels, answers)]}
    return E.build_pool([p], [n or len(labels)], n_subsets, 0, equal or (lambda a, b: a == b))[0]


# -----------------------------------------------------------------------------
# metrics on hand-made pools


@pytest.mark.parametrize('scores,labels,want', [
    ([3, 1, 2], [1, 0, 0], 1.0),           # clear winner
    ([3, 3, 1, 3], [1, 0, 1, 0], 1 / 3),    # three-way tie at the top: expected correctness, never "first wins"
    ([2, 2], [1, 0], 0.5),
    ([5, 1, 0], [1, 1, 1], 1.0),            # all correct
    ([5, 1, 0], [0, 0, 0], 0.0),            # all wrong
    ([0.3], [1], 1.0), ([0.3], [0], 0.0),   # single candidate
    ([-np.inf, -np.inf], [1, 0], 0.5),      # nothing scored: uniform pick
])
def test_best_of_n_rules(scores, labels, want):
    s, l = np.array(scores, dtype=float), np.array(labels, dtype=float)
    sub = E.subset_index(len(l), len(l), 10, 0)
    assert sub.shape == (1, len(l))
    assert E.best_of_n_sub(s, l, sub) == pytest.approx(want)
    assert best_of_n(s, l) == pytest.approx(want)


def test_subset_averaged_best_of_n_matches_exact_expectation():
    s, l = np.array([4., 3., 2., 1., 0.]), np.array([0., 1., 1., 0., 1.])
    exact = np.mean([best_of_n(s[list(c)], l[list(c)]) for c in combinations(range(5), 2)])  # 0.6
    sub = E.subset_index(5, 2, 4000, [0, 7])
    assert sub.shape == (4000, 2) and all(len(set(r)) == 2 for r in sub[:50])
    assert np.array_equal(sub, E.subset_index(5, 2, 4000, [0, 7]))          # fixed seed: same subsets
    assert not np.array_equal(sub, E.subset_index(5, 2, 4000, [1, 7]))
    assert E.best_of_n_sub(s, l, sub) == pytest.approx(exact, abs=0.03)
    # oracle pass@n on the subsets converges to the exact 1 - C(m-c, n) / C(m, n)
    assert E.oracle_sub(l, sub) == pytest.approx(1 - math.comb(2, 2) / math.comb(5, 2), abs=0.03)
    full = E.subset_index(3, 3, 10, 0)
    assert E.oracle_sub(np.zeros(3), full) == 0.0 and E.oracle_sub(np.array([0., 1., 0.]), full) == 1.0


def test_auroc_and_scored_metrics():
    pools = [_pool([1, 0, 0, 1]), _pool([1, 1, 1, 1]), _pool([0, 0, 0, 0]), _pool([0, 1])]
    scores = [np.array([4., 1., 2., 3.]), np.array([1., 2., 3., 4.]), np.array([0., 0., 0., 1.]), np.array([5., 5.])]
    assert within_auroc(scores[0], pools[0]['labels']) == 1.0
    assert within_auroc(scores[1], pools[1]['labels']) is None
    auc, n_def = E.mean_auroc(scores, pools)
    assert n_def == 2 and auc == pytest.approx((1.0 + 0.5) / 2)               # only defined problems count
    m = E.scored_metrics(scores, [{**q, 'subsets': {2: E.subset_index(len(q['labels']), 2, 500, [0, i])}}
                                  for i, q in enumerate(pools)], [2])
    assert m['n_auroc_problems'] == 2 and 0 <= m['acc_at'][2] <= 1
    m = E.scored_metrics([np.array([np.nan, 1.0])], [_pool([1, 0])], [2])    # NaN scores never win
    assert m['acc_at'][2] == 0.0


# -----------------------------------------------------------------------------
# votes


def test_majority_vote_rules():
    def maj(labels, answers):
        q = _pool(labels, answers=answers)
        return E.vote_sub(q['groups'], q['labels'], q['subsets'][len(labels)])
    assert maj([1, 1, 0], ['2', '2', '3']) == 1.0
    assert maj([0, 0, 1], ['2', '2', '3']) == 0.0
    assert maj([1, 0], ['2', '3']) == 0.5                          # tied groups: expected correctness
    assert maj([1, 0, 1, 0], ['2', '3', '2', '3']) == 0.5
    assert maj([1, 1, 0], [None, None, '3']) == 0.0                # no answer: no vote
    assert maj([1, 0, 0], [None, None, None]) == pytest.approx(1 / 3)  # nobody answered: uniform pick
    assert maj([1], ['4']) == 1.0 and maj([1, 1], ['4', '4']) == 1.0 and maj([0, 0], ['4', '5']) == 0.0


def test_answer_groups_use_label_equivalence():
    from label import answers_equal
    g = E.answer_groups(['0.5', '\\frac{1}{2}', '1/2', '0.7', '0.7', None, '$\\dfrac12$'], answers_equal)
    assert list(g[:3]) == [0, 0, 0] and g[3] == g[4] != 0 and g[5] == -1 and g[6] == 0
    q = _pool([1, 1, 1, 0, 0, 0], answers=['0.5', '\\frac{1}{2}', '1/2', '0.7', '0.7', '2'], equal=answers_equal)
    assert E.vote_sub(q['groups'], q['labels'], q['subsets'][6]) == 1.0  # 3 forms of 1/2 outvote 2 x 0.7


def test_weighted_vote_and_temperature_choice():
    # majority says '7' (wrong, 3 votes); the verifier is sure of '5' (right, 2 votes)
    labels, answers = [0, 0, 0, 1, 1], ['7', '7', '7', '5', '5']
    s = np.array([0.0, 0.1, 0.0, 3.0, 2.9])
    q = _pool(labels, answers=answers)
    sub = q['subsets'][5]
    assert E.vote_sub(q['groups'], q['labels'], sub, s, temp=0.1) == 1.0   # low T: the verifier's pick
    assert E.vote_sub(q['groups'], q['labels'], sub, s, temp=1e4) == 0.0   # high T: majority
    assert E.vote_sub(q['groups'], q['labels'], sub, np.array([.1, .1, .1, .9, .9])) == 1.0  # PRM probs as weights
    assert E.vote_sub(q['groups'], q['labels'], sub, np.array([.7, .7, .7, .9, .9])) == 0.0
    # tiny temperatures underflow nothing: weights are normalised within each subset
    assert E.vote_sub(q['groups'], q['labels'], sub, s - 1e4, temp=1e-3) == 1.0
    assert E.choose_temp([s], [q], 5, [0.1, 1e4]) == 0.1
    q2 = _pool([1, 1, 1, 0, 0], answers=answers)  # now the majority is right and the verifier wrong
    assert E.choose_temp([s], [q2], 5, [0.1, 1e4]) == 1e4


# -----------------------------------------------------------------------------
# cheap scorers


def test_cheap_scorers_on_hand_made_statistics():
    c = {'logprobs': torch.tensor([-1., -2., -3.]), 'entropies': torch.tensor([1., 2., 3.]),
         'step_pos': torch.tensor([0, 2]), 'token_ids': torch.tensor([5, 6, 7])}
    want = {'cumulative_logprob': -6.0, 'mean_logprob': -2.0, 'neg_mean_entropy': -2.0,
            'neg_varentropy': -2.0 / 3.0, 'shortest': -3.0, 'fewest_steps': -2.0, 'longest': 3.0}
    assert set(B.CHEAP_SCORERS) == set(want)
    for name, v in want.items():
        assert B.CHEAP_SCORERS[name](c) == pytest.approx(v), name
    flat = {'logprobs': torch.tensor([-0.5]), 'entropies': torch.tensor([0.7]), 'step_pos': torch.tensor([0]),
            'token_ids': torch.tensor([1])}
    assert B.neg_varentropy(flat) == 0.0
    empty = {'logprobs': torch.zeros(0), 'entropies': torch.zeros(0), 'step_pos': torch.tensor([0]),
             'token_ids': torch.zeros(0, dtype=torch.long)}
    for name in ('cumulative_logprob', 'mean_logprob', 'neg_mean_entropy', 'neg_varentropy'):
        assert B.CHEAP_SCORERS[name](empty) == -math.inf
    # a problem: the confident candidate is right, the long one wrong
    p = {'candidates': [c, flat]}
    assert list(B.cheap_scores([p], 'mean_logprob')[0]) == [-2.0, -0.5]
    assert list(B.cheap_scores([p], 'longest')[0]) == [3.0, 1.0]
    with pytest.raises(ValueError, match='cheap scorer'):
        B.cheap_scores([p], 'nope')


# -----------------------------------------------------------------------------
# off-the-shelf PRM scoring path on a tiny random model with the same head shape


@pytest.fixture(scope='module')
def tiny_prm(tmp_path_factory):
    """A Qwen2 backbone with a 2-class token head and a byte-level BPE tokenizer that has <extra_0>
    and a ChatML template, saved like a hub checkpoint."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForTokenClassification
    specials = ['<unk>', '<pad>', '<|im_start|>', '<|im_end|>', B.PRM_SEP]
    tok = Tokenizer(models.BPE(unk_token='<unk>'))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(['Please reason step by step. What is 2+3? The answer is \\boxed{5}.'] * 4,
                            trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token='<unk>', pad_token='<pad>',
                                 additional_special_tokens=specials[2:])
    hf.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                        "{% endfor %}")
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(hf), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=64, num_labels=2)
    path = str(tmp_path_factory.mktemp('tiny_prm'))
    Qwen2ForTokenClassification(cfg).save_pretrained(path)
    hf.save_pretrained(path)
    return path


TEXTS = ['First, 2+3.\n\nSo 5.\n\nThe answer is \\boxed{5}', 'The answer is 5', 'a\n\n\n\nb\n\n  \n\nc', '']


def test_prm_scoring_path(tiny_prm):
    assert B.split_steps(TEXTS[0]) == ['First, 2+3.', 'So 5.', 'The answer is \\boxed{5}']
    assert B.split_steps(TEXTS[2]) == ['a', 'b', 'c'] and B.split_steps('') == ['']
    model, tok = B.load_prm(tiny_prm, 'float32')
    assert type(model).__name__ == 'Qwen2ForTokenClassification'
    text = B.prm_text(tok, 'What is 2+3?', TEXTS[0])
    assert B.PRM_SYSTEM in text and text.count(B.PRM_SEP) == 3 and text.index('What is 2+3?') < text.index('First')
    probs = B.prm_step_probs(model, tok, 'What is 2+3?', TEXTS, batch_size=4)
    assert [len(p) for p in probs] == [3, 1, 3, 1]                             # one score per step
    # the scores are the positive-class probabilities at exactly the separator positions
    ids = torch.tensor([tok(text, add_special_tokens=False)['input_ids']])
    with torch.no_grad():
        ref = torch.softmax(model(input_ids=ids)[0][0], -1)[:, 1]
    sep = tok.convert_tokens_to_ids(B.PRM_SEP)
    assert probs[0] == pytest.approx(ref[ids[0] == sep].tolist(), abs=1e-5)
    # batched (right-padded) == one at a time
    one = [B.prm_step_probs(model, tok, 'What is 2+3?', [t], batch_size=1)[0] for t in TEXTS]
    for a, b in zip(probs, one):
        assert a == pytest.approx(b, abs=1e-5)
    assert B.prm_reduce([0.9, 0.2, 0.6], 'last') == 0.6
    assert B.prm_reduce([0.9, 0.2, 0.6], 'min') == 0.2
    assert B.prm_reduce([0.9, 0.2, 0.6], 'prod') == pytest.approx(0.108)
    with pytest.raises(ValueError, match='prm_reduce'):
        B.prm_reduce([0.5], 'mean')


def test_prm_cache_is_resumable(tiny_prm, tmp_path):
    problems = [{'key': f'{i:06d}', 'question': 'What is 2+3?', 'candidates': [{'text': t} for t in TEXTS]} for i in range(3)]
    path = str(tmp_path / 'prm_scores.json')
    B.score_prm(problems[:2], path, tiny_prm, batch_size=2, dtype='float32', save_every=1)
    first = json.load(open(path))
    assert sorted(first['steps']) == ['000000', '000001'] and first['n_params'] > 0
    cache = B.score_prm(problems, path, tiny_prm, batch_size=3, dtype='float32')  # only the new problem is scored
    assert sorted(cache['steps']) == ['000000', '000001', '000002']
    assert cache['steps']['000000'] == first['steps']['000000']
    for a, b in zip(cache['steps']['000002'], cache['steps']['000000']):  # same texts, same scores
        assert a == pytest.approx(b, abs=1e-5)
    with pytest.raises(ValueError, match='prm_model'):
        B.score_prm(problems, path, 'another/model')


# -----------------------------------------------------------------------------
# analytic FLOPs agree with torch's FLOP counter


@pytest.mark.parametrize('kind', ['hsrm', 'deepset', 'text', 'hybrid'])
def test_verifier_flops_match_flop_counter(kind):
    from torch.utils.flop_counter import FlopCounterMode
    m = build_verifier(kind, d_gen=64, vocab_size=100, d_model=32, dropout=0.0,
                       **({'n_head': 2} if kind in ('hsrm', 'hybrid') else {}))
    S, T = 7, 23
    batch = {'states': torch.randn(1, S, 64), 'step_mask': torch.ones(1, S, dtype=torch.bool),
             'tokens': torch.randint(2, 100, (1, T)), 'token_mask': torch.ones(1, T, dtype=torch.bool)}
    m.train()  # the unfused attention path: the counter sees every matmul, but not CPU attention
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        m(batch)
    attn = {'hsrm': [(S, 2)], 'deepset': [], 'text': [(T, 1)], 'hybrid': [(S, 2), (T, 1)]}[kind]
    assert E.verifier_flops(m, S, T) == fc.get_total_flops() + sum(4 * L * L * 32 * n for L, n in attn)


# -----------------------------------------------------------------------------
# end to end: tiny split dirs in the on-disk format -> train.py -> baselines.py -> evaluate.py


def write_split(split_dir, n_problems, n_cands, d_gen=16, seed=0, start=0):
    """Extraction format + labels.json with a learnable signal: correct candidates' states are shifted
    along a direction, their token ids include a marker token and their log-probs are a bit higher.
    Wrong answers come from two values, so votes have something to do."""
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(d_gen, generator=torch.Generator().manual_seed(99))
    os.makedirs(os.path.join(split_dir, 'problems'), exist_ok=True)
    labels = {}
    for i in range(start, start + n_problems):
        key, gold = f'{i:06d}', str(i + 1)
        pc = 0.15 + 0.7 * float(torch.rand(1, generator=g))
        cands, labs = [], []
        for _ in range(n_cands):
            ok = bool(torch.rand(1, generator=g) < pc)
            ans = gold if ok else str(i + 2 + int(torch.randint(0, 2, (1,), generator=g)))
            S, T = int(torch.randint(1, 6, (1,), generator=g)), int(torch.randint(6, 30, (1,), generator=g))
            st = torch.randn(S, d_gen, generator=g) + (1.0 if ok else -1.0) * u
            ids = torch.randint(10, 60, (T,), generator=g)
            if ok:
                ids[-1] = 7
            text = '\n\n'.join(['Step %d.' % k for k in range(S - 1)] + [f'The answer is \\boxed{{{ans}}}'])
            cands.append({'text': text, 'token_ids': ids, 'logprobs': -torch.rand(T, generator=g) - (0 if ok else 0.2),
                          'entropies': torch.rand(T, generator=g), 'step_pos': torch.arange(S) * (T // S),
                          'states': st.half(), 'finish': 'eos'})
            labs.append({'correct': ok, 'answer': ans, 'stage': 'boxed/exact'})
        torch.save({'key': key, 'index': i, 'id': str(i), 'dataset': 'synth', 'question': f'What is {i}+1?', 'gold': gold,
                    'meta': {}, 'prompt': f'What is {i}+1?', 'layers': [-1], 'candidates': cands},
                   os.path.join(split_dir, 'problems', f'{key}.pt'))
        labels[key] = labs
    with open(os.path.join(split_dir, 'labels.json'), 'w') as f:
        json.dump({'version': 1, 'labels': labels, 'summary': {}}, f)
    with open(os.path.join(split_dir, 'config.json'), 'w') as f:
        json.dump({'model': 'synthetic', 'dataset': 'synth', 'd_gen': d_gen, 'layers': [-1]}, f)


@pytest.fixture
def one_thread():
    # the machine's 2 cores are shared: one torch thread is 3x faster here than two fighting for them
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_end_to_end(tmp_path, tiny_prm, one_thread):
    import train
    out = str(tmp_path / 'run')
    write_split(f'{out}/train', 40, 16, seed=1)
    write_split(f'{out}/eval', 25, 16, seed=2, start=1000)
    tcfg = {**train.DEFAULTS, 'out_dir': out, 'seeds': [1, 2], 'max_iters': 16, 'eval_interval': 8,
            'batch_problems': 4, 'lr': 1e-3}
    train.run(tcfg)
    B.run({'out_dir': out, 'text_sizes': ['small'], 'text_train_overrides': {'lr_schedule': 'cosine', 'warmup_iters': 2},
           'prm_model': tiny_prm, 'prm_dtype': 'float32'}, {**tcfg, 'seeds': [1]})
    assert sorted(os.listdir(f'{out}/verifiers')) == ['hsrm_seed1', 'hsrm_seed2', 'text_small_seed1']
    res = E.run({'out_dir': out, 'n_scaling': [8, 16], 'n_subsets': 50, 'eval_batch_size': 64})
    rows = {r['method']: r for r in res['rows']}
    assert res['pool_size'] == 16 and res['ns'] == [8, 16] and res['n_problems'] == 25
    hsrm, text, orc = rows['HSRM'], rows['EORM-style text (small)'], rows['Oracle pass@8']
    assert hsrm['n_runs'] == 2 and hsrm['acc_std'] is not None and hsrm['params'] > 0
    single = rows['Single-pass (expected accuracy of one sample)']['acc']
    assert hsrm['acc'] > single + 0.1 and hsrm['auroc'] > 0.8            # the signal is easy to learn
    for r in res['rows']:
        assert 0 <= r['acc'] <= orc['acc'] + 1e-9, r['method']           # no selection beats the oracle
        assert r['acc_at'][16] <= rows['Oracle pass@8']['acc_at'][16] + 1e-9, r['method']
    assert orc['acc_at'][16] >= orc['acc_at'][8]
    for name in ('Majority vote (extracted answers)', 'HSRM + weighted vote', 'Cumulative log-prob',
                 'EORM-style text (small) + weighted vote', f'{os.path.basename(tiny_prm)} (last step)'):
        assert name in rows, name
    assert any(r['type'] == 'cheap_best_val' for r in res['rows']) and any(r['type'] == 'cheap_best_test' for r in res['rows'])
    assert all(r['temp'] in E.DEFAULTS['vote_temps'] for r in hsrm['runs'])
    cost = {c['verifier']: c for c in res['cost']}
    assert cost['HSRM']['flops'] > 0 and cost['HSRM']['seconds_per_candidate'] > 0
    assert cost[f'{os.path.basename(tiny_prm)} (last step)']['params'] < 1e6  # the tiny PRM's real count
    md = open(f'{out}/results.md').read()
    assert '| Method | Params | Bo8 Acc. (%) | Within-AUROC |' in md and '| HSRM (2 seeds) |' in md
    assert '### N-scaling' in md and '### Verifier cost' in md and '50 random N-subsets' in md
    saved = json.load(open(f'{out}/results.json'))
    assert saved['rows'][0]['acc'] == pytest.approx(res['rows'][0]['acc'])
    # a rerun reuses the cached scores (files untouched) and gives the same table
    cache = [os.path.join(d, f) for d, _, fs in os.walk(f'{out}/scores') for f in fs]
    stamps = {f: os.path.getmtime(f) for f in cache}
    again = E.run({'out_dir': out, 'n_scaling': [8, 16], 'n_subsets': 50, 'plots': False})
    assert {f: os.path.getmtime(f) for f in cache} == stamps
    assert [r['acc'] for r in again['rows']] == [r['acc'] for r in res['rows']]
    # zero-shot transfer: this run's checkpoints on another run's eval split
    write_split(str(tmp_path / 'other/eval'), 12, 8, seed=3, start=2000)
    tr = E.run({'out_dir': out, 'eval_dir': str(tmp_path / 'other/eval'), 'n_scaling': [8], 'plots': False})
    assert tr['transfer'] and os.path.exists(f'{out}/results_on_other.md')
    assert 'zero-shot transfer' in open(f'{out}/results_on_other.md').read()
    assert not any(r['type'] == 'prm' for r in tr['rows'])                 # no PRM cache for that split
    # an interrupted PRM cache leaves the PRM rows out, with a note saying how to finish it
    prm = json.load(open(f'{out}/eval/prm_scores.json'))
    prm['steps'].pop('001000')
    json.dump(prm, open(f'{out}/eval/prm_scores.json', 'w'))
    part = E.run({'out_dir': out, 'n_scaling': [8], 'plots': False})
    assert not any(r['type'] == 'prm' for r in part['rows']) and any('covers 24 of 25' in t for t in part['notes'])


def test_cli_and_bad_config(tmp_path):
    out = str(tmp_path / 'run')
    write_split(f'{out}/eval', 6, 8, seed=4)
    env = {**os.environ, 'PYTHONPATH': HERE}
    r = subprocess.run([sys.executable, os.path.join(HERE, 'evaluate.py'), f'--out_dir={out}', '--n_scaling=[4,8]',
                        '--n_eval=4', '--plots=False'], capture_output=True, text=True, cwd=str(tmp_path), env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'Best-of-4' in r.stdout and 'No labelled' in r.stdout and os.path.exists(f'{out}/results.json')
    r = subprocess.run([sys.executable, os.path.join(HERE, 'evaluate.py'), f'--out_dir={out}', '--n_eval=9'],
                       capture_output=True, text=True, cwd=str(tmp_path), env=env)
    assert r.returncode != 0 and 'n_eval=9' in r.stderr and 'fix: --n_eval=8' in r.stderr
