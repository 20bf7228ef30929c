"""
bench.py's former sections that back no number in README.md or RESULTS.md, kept for whoever needs them again:
label.py's grading throughput, training and scoring against the machine's floor, the verifier cost table's measured
column, pruning's replay cost, and online pruning against the same run without it. Run from the repo root:

    python -m studies.bench_lab --only=label|train|cost|prune|online
"""
import json
import os
import random
import re
import sys
import time

import numpy as np
import torch

import generator
import grading
import tasks
import train as T
from model import build_verifier, count_params, score_problems, verifier_flops
from studies.bench import DATA, HERE, machine_floor, read_flags, run_sections, table


# -----------------------------------------------------------------------------
# labeling: label.py stage 1 (grading.grade) throughput on pools shaped like real ones (64 candidates per
# problem, a few distinct answers each, repeated in several surface forms)


def _rows(rel):
    with open(os.path.join(DATA, rel)) as f:
        return [json.loads(line) for line in f]


def _label_pools(kind, n_problems, n_cands, rng):
    """[(text, gold, dataset)]: per problem the gold solution's body with an ending per candidate; 60% give the
    gold answer, the rest one of 3 wrong answers, each in one of several surface forms (box, statements, last $..$)."""
    cands = []
    if kind == 'gsm8k':
        rs = _rows('gsm8k/test.jsonl')[:n_problems]
        for r in rs:
            body, gold = r['answer'].split('####')
            body = re.sub(r'<<[^<>]*>>', '', body).strip()
            g = int(gold.strip().replace(',', ''))
            wrong = [str(g + d) for d in rng.sample([-10, -2, -1, 1, 2, 5, 12, 100], 3)]
            for _ in range(n_cands):
                ans = gold.strip() if rng.random() < 0.6 else rng.choice(wrong)
                cands.append((body + rng.choice([f'\nThe answer is {ans}.', f'\nSo the final answer is ${ans}$.',
                                                  f'\n\\boxed{{{ans}}}', f'\n#### {ans}', f' {ans}']), r['answer'],
                              'gsm8k'))
    else:
        rs = _rows('math500/test.jsonl')
        for i, r in enumerate(rs[:n_problems]):
            body = r['solution'].rsplit('\\boxed', 1)[0]
            g = r['answer']
            forms = [g, g.replace('\\frac', '\\dfrac'), g.replace(' ', ''), f'\\left({g}\\right)' if ',' not in g
                     else g]
            wrong = [rs[(i + k) % len(rs)]['answer'] for k in (7, 13, 101)]
            for _ in range(n_cands):
                ans = rng.choice(forms) if rng.random() < 0.6 else rng.choice(wrong)
                cands.append((body + rng.choice([f'\\boxed{{{ans}}}.',
                                                 f' The final answer is ${ans}$. I hope it is correct.',
                                                  f' Therefore the answer is ${ans}$.']), g, 'math500'))
    return cands


def _rate(cands):
    """candidates/s for grade() over (text, gold, dataset), from cold caches; and the Math-Verify calls made."""
    grading._equiv.cache_clear()
    grading._mv_cache.clear()
    grading.is_equiv('1', 'x')  # start the Math-Verify worker outside the timing
    grading._equiv.cache_clear()
    grading._mv_cache.clear()
    calls = grading._stats['calls']
    t = time.perf_counter()
    n_correct = sum(grading.grade(text, gold, ds)['correct'] for text, gold, ds in cands)
    return len(cands) / (time.perf_counter() - t), n_correct / len(cands), grading._stats['calls'] - calls


def bench_labeling(n_problems=150, n_cands=64, seed=0):
    rng = random.Random(seed)
    rows = []
    for kind in ('gsm8k', 'math500'):
        cands = _label_pools(kind, n_problems, n_cands, rng)
        rate, acc, calls = _rate(cands)
        rows.append([f'{kind}-style', n_problems, len(cands), len({(t, g) for t, g, _ in cands}), calls, f'{acc:.0%}',
                     f'{rate:,.0f}'])
    table(rows, ['pool', 'problems', 'candidates', 'distinct texts', 'Math-Verify calls', 'correct', 'candidates/s'])
    print(f'(stage 1 only, cold caches, one process + the Math-Verify worker; {os.cpu_count()} CPUs visible)')


# -----------------------------------------------------------------------------
# training and scoring: GSM8K-sized synthetic cache against the machine's floor


def synthetic_cache(n_problems=500, n_cands=64, d_gen=2048, seed=0):
    """In-memory problems in the on-disk format (states only what training reads), one fp16 buffer."""
    g = torch.Generator().manual_seed(seed)
    steps = torch.randint(5, 16, (n_problems, n_cands), generator=g)
    buf = torch.empty(int(steps.sum()), d_gen, dtype=torch.float16).normal_(generator=g)
    correct = torch.rand(n_problems, n_cands, generator=g) < torch.rand(n_problems, 1, generator=g)
    problems, at = [], 0
    for i in range(n_problems):
        cands = []
        for j in range(n_cands):
            s = int(steps[i, j])
            cands.append({'states': buf[at:at + s], 'token_ids': torch.zeros(s, dtype=torch.long),
                          'correct': bool(correct[i, j])})
            at += s
        problems.append({'key': f'{i:06d}', 'layers': [-1], 'candidates': cands})
    return problems


def bench_training(train_steps=6, score_problems_n=40, threads=None):
    """threads: torch CPU threads (None = torch's default, one per core)."""
    t_all = time.time()
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f} "
          f"(other work on these cores slows every number below)")
    gf, bw = (x / 1e9 for x in machine_floor())
    print(f"machine: fp32 matmul {gf:.0f} GFLOP/s, copy bandwidth {bw:.1f} GB/s")
    t = time.time()
    probs = synthetic_cache()
    n_tok = sum(len(c['states']) for p in probs for c in p['candidates'])
    print(f"cache: {len(probs)} problems x 64 candidates, {n_tok / len(probs) / 64:.1f} steps mean, d_gen 2048, "
          f"{n_tok * 2048 * 2 / 1e9:.2f} GB fp16 (built in {time.time() - t:.1f}s)")
    tr, va = probs[:480], probs[480:]

    rows = []
    model = build_verifier('hsrm', 2048)

    def flops(cands, train):
        """Matmul FLOPs of forward (+ backward when train) over these candidates, from verifier_flops:
        backward is 2x forward, except that the projection needs no gradient for its input (the data)."""
        fwd = sum(verifier_flops(model, len(c['states']), 0) for c in cands)
        proj = sum(2 * len(c['states']) * model.proj.in_features * model.proj.out_features for c in cands)
        return fwd + (2 * fwd - proj if train else 0)

    for n_train in (None, 16):
        cfg = dict(max_iters=train_steps, eval_interval=10 ** 9, n_train=n_train, early_stop_metric='acc', seed=0)
        _, log = T.train(tr, va, cfg)
        s_step = log['step_time_s'] / train_steps
        batch = [c for p in tr[:8] for c in p['candidates'][:n_train or 64]]  # a typical batch
        n_tok = sum(len(c['states']) for c in batch)
        byts = n_tok * 2048 * 2 + count_params(model) * 4 * 12  # fp16 states read once; params/grads/Adam moments
        floor = max(flops(batch, True) / (gf * 1e9), byts / (bw * 1e9))
        rows.append((f"train step, n_train={n_train or 'all (64)'}", f"{s_step * 1e3:.0f} ms", f"{floor * 1e3:.0f} ms",
                     f"{s_step / floor:.1f}x", f"1000 steps {s_step * 1000 / 60:.1f} min (target < 5)"))

    model.eval()
    sp = probs[:score_problems_n]
    cands = [c for p in sp for c in p['candidates']]
    score_problems(model, sp[:2])  # warm-up
    t = time.perf_counter()
    score_problems(model, sp)
    dt = time.perf_counter() - t
    n_tok = sum(len(c['states']) for c in cands)
    floor = max(flops(cands, False) / (gf * 1e9), n_tok * 2048 * 2 / (bw * 1e9))
    rows.append(("HSRM scoring", f"{len(cands) / dt:,.0f} cand/s", f"{len(cands) / floor:,.0f} cand/s",
                 f"{(len(cands) / floor) / (len(cands) / dt):.1f}x", "target >= 10,000 cand/s"))
    table(rows, ['what', 'measured', 'floor', 'slower by', 'vs target'])
    per = flops(cands, False) / len(cands)
    print(f"floor = max(FLOPs / {gf:.0f} GFLOP/s, bytes / {bw:.1f} GB/s); FLOPs from model.verifier_flops (matmuls, "
          f"attention included): HSRM at {n_tok / len(cands):.1f} steps mean needs {per / 1e6:.0f} MFLOP per "
          f"candidate, so 10,000 cand/s needs {per * 1e4 / 1e9:.0f} GFLOP/s")
    print(f"bench took {time.time() - t_all:.0f}s")


# -----------------------------------------------------------------------------
# verifier cost: the evaluation cost table's measured column at the paper's shapes


# text vocabularies (+ PAD/UNK) as train.py builds them by default: GPT-2's 50,257 tokens for both sizes (small
# 13.80M, large 53.22M at 512 positions; the paper says 2.6M / 53.4M). Scoring cost does not depend on the vocab.
TEXT_VOCAB = {'small': 50_257 + 2, 'large': 50_257 + 2}


def synthetic_pool(n_problems, n_cands, n_steps, n_tokens, d_gen, vocab_size, seed=0):
    """Problems in the on-disk format (random states, token ids drawn from the vocab ids)."""
    g = torch.Generator().manual_seed(seed)
    return [{'key': f'{i:06d}', 'layers': [-1], 'candidates': [
        {'states': torch.randn(n_steps, d_gen, generator=g).half(), 'step_pos': torch.arange(n_steps),
         'token_ids': torch.randint(0, vocab_size, (n_tokens,), generator=g)} for _ in range(n_cands)]}
        for i in range(n_problems)]


def bench_eval(d_gen=2048, n_steps=20, n_tokens=300, n_problems=2, n_cands=8, repeats=2, batch_size=64,
               device='cpu', seed=0):
    """Rows {verifier, params, fp16_mb, flops, ms_per_candidate, device}: the median of `repeats`
    timed score_problems calls over n_problems x n_cands candidates, after one warm-up call."""
    torch.manual_seed(seed)
    models = {'HSRM': build_verifier('hsrm', d_gen=d_gen)}
    for size, v in TEXT_VOCAB.items():
        models[f'text ({size})'] = build_verifier('text', vocab=list(range(v - 2)), size=size)
    pool = synthetic_pool(n_problems, n_cands, n_steps, n_tokens, d_gen, TEXT_VOCAB['small'] - 2, seed)
    rows = []
    for name, model in models.items():
        score_problems(model, pool[:1], batch_size, device)  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            score_problems(model, pool, batch_size, device)
            times.append(time.perf_counter() - t0)
        n = count_params(model)
        rows.append({'verifier': name, 'params': n, 'fp16_mb': 2 * n / 1e6,
                     'flops': verifier_flops(model, n_steps, n_tokens),
                     'ms_per_candidate': 1e3 * float(np.median(times)) / (n_problems * n_cands),
                     'device': f'{device} ({torch.get_num_threads()} threads)' if device == 'cpu' else device})
    return rows


def bench_cost(n_steps=20, n_tokens=300):
    rows = bench_eval(n_steps=n_steps, n_tokens=n_tokens)
    table([(r['verifier'], f"{r['params'] / 1e6:.2f}M", f"{r['fp16_mb']:.1f}", f"{r['flops']:.3g}",
            f"{r['ms_per_candidate']:.3f} ({r['device']})") for r in rows],
          [f'Verifier (S={n_steps} steps, T={n_tokens} tokens)', 'Params', 'fp16 MB', 'FLOPs / candidate',
           'ms / candidate'])


# ====================================================================================================
# pruning: scoring every prefix next to scoring finished candidates, and the offline replay's speed
# ====================================================================================================


def bench_prune(n_problems=8, n_cands=8, n_steps=20, n_tokens=300, d_gen=2048, repeats=3, window=64, gen_params=1.7e9,
                seed=0):
    """HSRM scoring of finished candidates (score_problems) vs of every step prefix (score_prefixes,
    what online pruning needs) at the paper's shapes, each against its floor; the prefix scores'
    cost next to the generator's own (gen_params: 2 FLOPs per parameter per token, Qwen3-1.7B by
    default); and how many pools per second the offline replays simulate."""
    from studies.policy import replay_deepconf, replay_prune
    from model import score_prefixes
    from bestofn import group_confidences
    torch.manual_seed(seed)
    gf, bw = machine_floor()
    print(f"torch {torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}; fp32 matmul {gf / 1e9:.0f} "
          f"GFLOP/s, copy {bw / 1e9:.1f} GB/s")
    model = build_verifier('hsrm', d_gen).eval()
    pool = synthetic_pool(n_problems, n_cands, n_steps, n_tokens, d_gen, 100, seed)
    n = n_problems * n_cands
    f_full = n * verifier_flops(model, n_steps, 0)
    f_pre = n * sum(verifier_flops(model, k + 1, 0) for k in range(n_steps))
    b_full, b_pre = n * n_steps * d_gen * 2, n * n_steps * (n_steps + 1) // 2 * d_gen * 2  # fp16 states as read
    rows = []
    for name, fn, fl, by in (('score finished candidates', score_problems, f_full, b_full),
                             ('score every step prefix', score_prefixes, f_pre, b_pre)):
        fn(model, pool[:1])  # warm-up
        ts = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn(model, pool)
            ts.append(time.perf_counter() - t)
        dt, floor = float(np.median(ts)), max(fl / gf, by / bw)
        rows.append((name, f'{fl / n / 1e6:.0f}', f'{dt / n * 1e3:.2f}', f'{floor / n * 1e3:.2f}',
                     f'{dt / floor:.1f}x'))
    table(rows, [f'HSRM, d_gen {d_gen}, S={n_steps} steps', 'MFLOP / candidate', 'ms / candidate', 'floor ms',
                 'slower by'])
    gen = 2 * gen_params * n_tokens
    print(f"prefix scores cost {f_pre / f_full:.1f}x the final score's FLOPs; per candidate that is "
          f"{f_pre / n / gen:.2e} of the generator's {gen / 1e9:.0f} GFLOP for {n_tokens} tokens at "
          f"{gen_params / 1e9:.1f}B parameters: scoring every prefix is free next to generating")
    # replays: random prefix scores / confidences on pools of n_cands rows with n_steps steps and n_tokens tokens
    rng = np.random.default_rng(seed)
    pre = [rng.standard_normal(n_steps) for _ in range(n_cands)]
    sp = [np.sort(rng.choice(n_tokens - 1, n_steps - 1, replace=False)).tolist() + [n_tokens - 1]
          for _ in range(n_cands)]
    gc = [group_confidences(rng.random(n_tokens), window) for _ in range(n_cands)]
    lows = np.array([g.min() for g in gc])
    rows = []
    for name, fn in (('verifier rule (policy.prune_now at each step boundary)',
                      lambda: replay_prune(pre, sp, [n_tokens] * n_cands, 0.0, 'global')),
                     (f'DeepConf online (window {window})',
                      lambda: replay_deepconf(gc, lows, [n_tokens] * n_cands, window, float(np.median(lows)), 2))):
        k, t = 0, time.perf_counter()
        while time.perf_counter() - t < 1.0:
            fn()
            k += 1
        rows.append((name, f'{k / (time.perf_counter() - t):,.0f}'))
    table(rows, [f'offline replay, pools of {n_cands} x {n_steps} steps x {n_tokens} tokens', 'pools / s'])


# -----------------------------------------------------------------------------
# online pruning: extract.py's sampler with a verifier stopping rows, against the same run without it.
# Each row's draws depend only on the seed, its row and the step, so the rows that are not stopped
# generate exactly the tokens of the unpruned run: the two runs differ only by what pruning removes.

DEMO_CKPT = os.path.join(HERE, 'out', 'demo', 'verifiers', 'hsrm_seed42', 'ckpt.pt')


def demo_threshold(ckpt, rule):
    """The threshold steer.py's pruning study chose on validation for this checkpoint and rule (its prune.json)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(ckpt))), 'prune.json')
    res = json.load(open(path)) if os.path.exists(path) else {}
    for r in res.get('rows', []):
        for run in r['runs'] if r.get('rule') == rule else []:
            if os.path.abspath(run.get('ckpt', '')) == os.path.abspath(ckpt):
                return run['threshold']
    raise SystemExit(f"no {rule}-rule threshold for {ckpt} in {path}; fix: python -m studies.steer <its config> "
                     f"--prune=True (chooses it on validation), or pass --prune_threshold=<x>")


def bench_online(ckpt=DEMO_CKPT, rule='relative', threshold=None, n_problems=16, n_samples=8, max_new_tokens=64):
    """SmolLM2 on the demo's evaluation problems (synthetic level 2, T=0.8, top-p 0.95), one thread: the
    sampler with online pruning by a trained HSRM (the demo's, threshold chosen on validation by
    steer.py's pruning study) vs without, same seed. Tokens, wall-clock and the verifier's share of the pruned run."""
    import capture as X
    from store import load_checkpoint
    from studies.policy import Steering, _Batch
    if not os.path.exists(ckpt):
        raise SystemExit(f"{ckpt} not found; fix: run the main job (README) first, or pass --prune_ckpt=<ckpt.pt>")
    threshold = demo_threshold(ckpt, rule) if threshold is None else float(threshold)
    torch.set_num_threads(1)
    model, tok = generator.load_generator('smollm2')
    verifier = load_checkpoint(ckpt)[0]
    probs = tasks.load_problems('synth', 1000, 1000 + n_problems - 1, synth_level=2)
    prompts = [tasks.build_prompt(tok, p, None, False) for p in probs]
    table_ = X.step_table(tok)
    spent = [0.0]
    step = _Batch.step

    def timed(self, *a):  # the verifier's scoring and the decisions, inside the pruned run
        t = time.perf_counter()
        out = step(self, *a)
        spent[0] += time.perf_counter() - t
        return out
    runs = {}
    for name, v in (('no pruning', None), (f'HSRM {rule} rule, threshold {threshold:.3g}', verifier)):
        _Batch.step = timed
        t = time.perf_counter()
        res = X.sample_with_capture(model, tok, prompts, n_samples, [-1], max_new_tokens, 0.8, 0.95, seed=0,
                                    table=table_, steer=Steering(v, rule, threshold) if v is not None else None)
        runs[name] = (res, time.perf_counter() - t)
        _Batch.step = step
    (full, t0), (cut, t1) = runs.values()
    same = sum(torch.equal(c['token_ids'], f['token_ids'][:len(c['token_ids'])]) for cs, fs in zip(cut, full)
               for c, f in zip(cs, fs))
    n_tok = [sum(len(c['token_ids']) for cs in r for c in cs) for r in (full, cut)]
    stopped = sum(c['finish'] == 'pruned' for cs in cut for c in cs)
    print(f"{n_problems} problems x {n_samples}, max_new {max_new_tokens}, checkpoint {os.path.relpath(ckpt, HERE)}; "
          f"{same} of {n_problems * n_samples} pruned-run candidates are prefixes of the unpruned run's (same seed)")
    table([['no pruning', n_tok[0], '1.00', f'{t0:.1f}', '1.00', '-', 0],
           [list(runs)[1], n_tok[1], f'{n_tok[1] / n_tok[0]:.2f}', f'{t1:.1f}', f'{t1 / t0:.2f}',
            f'{100 * spent[0] / t1:.1f}%', stopped]],
          ['sampling run', 'tokens', 'tokens / unpruned', 'seconds', 'seconds / unpruned', 'verifier share', 'stopped'])


if __name__ == '__main__':
    flag = read_flags(sys.argv[1:], {'only': True, 'prune_ckpt': True, 'prune_rule': True, 'prune_threshold': True},
                      'python -m studies.bench_lab').get  # an unknown flag: one line, no section
    only = flag('only')
    sections = {'label': bench_labeling, 'train': bench_training, 'cost': bench_cost, 'prune': bench_prune,
                'online': lambda: bench_online(**{k: v for k, v in (('ckpt', flag('prune_ckpt')),
                                                                    ('rule', flag('prune_rule')),
                                                                    ('threshold', flag('prune_threshold')))
                                                  if v is not None})}
    run_sections(sections, only)
