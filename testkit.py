"""The helpers test_all.py and studies/test_studies.py share: tiny real tokenizers and models, split dirs and runs in
the on-disk format, running a stage's command. Their fixtures are in conftest.py."""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from grading import extract_answer
from model import build_verifier
from store import load_split, save_checkpoint
import bestofn as BON


REPO = os.path.dirname(os.path.abspath(__file__))


TEXT = ("Step 1: 23 + 15 = 38.\nStep 2: 38 - 7 = 31.\n\nThe answer is 31.\n"
        "First, we compute the total:\n\n12 * 3 = 36\nSo the answer is 36.\n") * 20


def require(ok, msg):
    """Missing benchmark data or embedded model: a skip here, a failure under CI (env CI=true)."""
    if not ok:
        (pytest.fail if os.environ.get('CI') else pytest.skip)(msg)


def plant_labels(split_dir):
    """labels.json of a split sampled from a random model, planted by its token ids (the grader would mark every
    candidate wrong): a candidate is correct where its ids sum to an even number."""
    labels = {p['key']: [{'correct': int(c['token_ids'].sum()) % 2 == 0, 'answer': extract_answer(c['text'])[0],
                          'stage': 'planted'} for c in p['candidates']]
              for p in load_split(split_dir, labels=False)}
    with open(os.path.join(split_dir, 'labels.json'), 'w') as f:
        json.dump({'version': 1, 'labels': labels, 'summary': {}}, f)


def tiny_tokenizer(think=False):
    """A real byte-level BPE tokenizer trained here on math-like text (small vocab, so that a random
    model emits newline tokens often); think=True adds '</think>' as a special token, as Qwen3 has it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator([TEXT], trainers.BpeTrainer(vocab_size=300, special_tokens=['<eos>'] + ['</think>'] * think,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=t, eos_token='<eos>', pad_token='<eos>')


def tiny_model(kind, vocab, newline_ids=None, dtype=torch.float32, positions=512):
    """A random Qwen3, Llama or Qwen2 (the embedded qwen05's kind: q/k/v biases, tied embeddings). newline_ids: raise
    those tokens' logits (along the mean final state) so that sampling meets step boundaries often. positions: its
    max_position_embeddings."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config
    torch.manual_seed(0)
    args = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=positions, eos_token_id=0, pad_token_id=0,
                tie_word_embeddings=kind == 'qwen2')
    cfg = {'qwen3': lambda: Qwen3Config(head_dim=16, **args), 'llama': lambda: LlamaConfig(**args),
           'qwen2': lambda: Qwen2Config(**args)}[kind]()
    model = AutoModelForCausalLM.from_config(cfg).eval()
    if newline_ids is not None:
        with torch.no_grad():
            h = model.model(input_ids=torch.randint(1, vocab, (4, 32))).last_hidden_state.mean((0, 1))
            model.lm_head.weight[newline_ids] += 30 * h / h.square().sum()
    return model.to(dtype)


def _run(*args):
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=600)


FAST = dict(max_iters=60, eval_interval=20, batch_problems=4, lr=1e-3, d_model=None)


def _cfg(**kw):
    c = {k: v for k, v in FAST.items() if k != 'd_model'}
    c.update(kw)
    return c


# -----------------------------------------------------------------------------
# tiny split dirs in the on-disk format (extract.py's, labelled), read by every later stage


def write_split_eval(split_dir, n_problems, n_cands, d_gen=16, seed=0, start=0, confidences=False, shift=1.0):
    """Extraction format + labels.json with a learnable signal: correct candidates' states are shifted
    along a direction, their token ids include a marker token and their log-probs are a bit higher.
    Wrong answers come from two values, so votes have something to do. Steps end at the last token,
    as extraction's do. confidences=True adds DeepConf token confidences (drawn from their own
    generator, so the other fields do not change), a little higher for correct candidates. shift: the states' signal
    (below 1, a verifier that ranks imperfectly)."""
    g = torch.Generator().manual_seed(seed)
    gc = torch.Generator().manual_seed(seed + 7)
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
            st = torch.randn(S, d_gen, generator=g) + (shift if ok else -shift) * u
            ids = torch.randint(10, 60, (T,), generator=g)
            if ok:
                ids[-1] = 7
            text = '\n\n'.join(['Step %d.' % k for k in range(S - 1)] + [f'The answer is \\boxed{{{ans}}}'])
            cands.append({'text': text, 'token_ids': ids, 'logprobs': -torch.rand(T, generator=g) - (0 if ok else 0.2),
                          'entropies': torch.rand(T, generator=g), 'step_pos': (torch.arange(1, S + 1) * T) // S - 1,
                          'states': st.half(), 'finish': 'eos'})
            if confidences:
                cands[-1]['confidences'] = 2 + torch.rand(T, generator=gc) + (0.3 if ok else 0.0)
            labs.append({'correct': ok, 'answer': ans, 'stage': 'boxed/exact'})
        torch.save({'key': key, 'index': i, 'id': str(i), 'dataset': 'synth', 'question': f'What is {i}+1?',
                    'gold': gold, 'meta': {}, 'prompt': f'What is {i}+1?', 'layers': [-1], 'candidates': cands},
                   os.path.join(split_dir, 'problems', f'{key}.pt'))
        labels[key] = labs
    with open(os.path.join(split_dir, 'labels.json'), 'w') as f:
        json.dump({'version': 1, 'labels': labels, 'summary': {}}, f)
    with open(os.path.join(split_dir, 'config.json'), 'w') as f:
        json.dump({'model': 'synthetic', 'dataset': 'synth', 'd_gen': d_gen, 'layers': [-1]}, f)


def write_untrained_run(out):
    """A run folder of 20 training and 30 evaluation problems x 8 with two seeds of a real (untrained) HSRM."""
    write_split_eval(f'{out}/train', 20, 8, seed=1, confidences=True)
    write_split_eval(f'{out}/eval', 30, 8, seed=2, start=1000, confidences=True)
    for s in (1, 2):
        torch.manual_seed(s)
        save_checkpoint(f'{out}/verifiers/hsrm_seed{s}/ckpt.pt', build_verifier('hsrm', 16, dropout=0.0),
                        {'train_config': {'seed': s}})


def _run_all(*cmds):
    """Several stage commands at once (each pays its own imports): their CompletedProcess-like (returncode, stderr)."""
    procs = [subprocess.Popen([sys.executable, *c], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    errs = [p.communicate(timeout=600)[1].strip() for p in procs]
    return [(p.returncode, e) for p, e in zip(procs, errs)]


def _last_line(r):
    """A refused CLI run: exit 1, no traceback, the stderr's last line."""
    assert r.returncode == 1 and 'Traceback' not in r.stderr, r.stderr[-2000:]
    return r.stderr.strip().splitlines()[-1]


def _think_split(split_dir, seed):
    """write_split_eval's split as a thinking extraction: a candidate's first step is thinking (think_end =
    its position, its state overwritten with noise); one-step candidates were cut off while thinking."""
    g = torch.Generator().manual_seed(seed)
    for f in glob.glob(os.path.join(split_dir, 'problems', '*.pt')):
        p = torch.load(f, weights_only=True)
        for c in p['candidates']:
            c['think_end'] = int(c['step_pos'][0]) if len(c['step_pos']) > 1 else None
            if c['think_end'] is not None:
                c['states'][0] = (5 * torch.randn(c['states'].shape[1], generator=g)).half()
        torch.save(p, f)


def think_run(out):
    """A thinking extraction (train 30 x 8, eval 12 x 8: _think_split) under out and an HSRM run on it that reads
    the answer's last 2 steps (input_steps='answer', max_steps=2), 6 steps."""
    import train as T
    write_split_eval(f'{out}/train', 30, 8, seed=1)
    write_split_eval(f'{out}/eval', 12, 8, seed=2, start=1000)
    for split, seed in (('train', 1), ('eval', 2)):
        _think_split(f'{out}/{split}', seed)
    T.run({**T.DEFAULTS, 'out_dir': out, 'seeds': None, 'max_iters': 6, 'eval_interval': 3, 'batch_problems': 4,
           'input_steps': 'answer', 'max_steps': 2})


def assert_overlap_refused(run, out, ck):
    """run({'out_dir', 'eval_dir', 'plots'}) on 4 problems of which 18 and 19 are the run's own training or
    validation problems refuses them in one line naming checkpoint ck and the fix, and writes nothing."""
    write_split_eval(f'{out}/overlap', 4, 8, seed=3, start=18)
    with pytest.raises(ValueError) as e:
        run({'out_dir': str(out), 'eval_dir': f'{out}/overlap', 'plots': False})
    msg = str(e.value)
    assert ('2 of the 4 problems to score share a group with' in msg and ck in msg
            and 'fix: score problems it never trained on' in msg)
    assert '\n' not in msg and sorted(os.listdir(out)) == ['eval', 'overlap', 'train', 'verifiers']


def _pool(labels, scores=None, answers=None, n=None, n_subsets=200, equal=None):
    labels = np.asarray(labels, dtype=float)
    answers = answers if answers is not None else [str(int(x)) for x in labels]
    p = {'key': '000000', 'index': 0,
         'candidates': [{'correct': bool(l), 'answer': a} for l, a in zip(labels, answers)]}
    return BON.build_pool([p], [n or len(labels)], n_subsets, 0, equal or (lambda a, b: a == b))[0]


def _families(tmp_path, sizes=(24, 12, 16), shift=1.0):
    """Cells (train/ and eval/ splits) of a few synthetic families in the on-disk format, with confidences."""
    fams = {}
    for i, n in enumerate(sizes):
        d = str(tmp_path / f'fam{i}')
        write_split_eval(f'{d}/train', n, 8, seed=10 + i, confidences=True, shift=shift)
        write_split_eval(f'{d}/eval', 10, 8, seed=20 + i, start=1000, confidences=True, shift=shift)
        fams[f'fam{i}'] = d
    return fams


# the training knobs of sample_run's runs, as a config file sets them (sample.py picks among their seeds: cfg['train']),
# and the folder train.py names their runs, less the seed
SAMPLE_TRAIN = {'seeds': [1, 2], 'max_iters': 10, 'eval_interval': 5, 'batch_problems': 4, 'lr': 1e-3}


SAMPLE_RUN = 'hsrm_lr-0.001_max_iters-10_batch_problems-4_eval_interval-5'


def _jsonl(path):
    return [json.loads(line) for line in open(path)]


FIT_RUN = 'hsrm_lr-0.001_max_iters-4_batch_problems-4_eval_interval-2'  # _fit's runs' folder, less the seed
