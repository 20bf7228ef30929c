"""
Speed and memory, measured side by side in one run and printed as tables (never asserted in tests).

    python bench.py                  # every section
    python bench.py --only=extract   # one of: extract, procs, label, train, cost, prune, search, online, memory, gpu, sample
    python bench.py --only=gpu       # the CUDA path (--device=cuda, the default where a GPU is visible; --device=cpu:
                                     # tiny shapes, a smoke run); --device=cuda alone runs this section
"""
import json
import os
import random
import re
import resource
import subprocess
import sys
import time

import numpy as np
import torch

import generator
import grading
import tasks
import train as T
from model import build_verifier, count_params, score_problems, verifier_flops

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, '..', 'shared', 'data')


def table(rows, header):
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: '| ' + ' | '.join(str(x).ljust(n) for x, n in zip(r, w)) + ' |'
    print('\n'.join([line(header), '|' + '|'.join('-' * (n + 2) for n in w) + '|'] + [line(r) for r in rows]))


def machine_floor(n=1024, secs=1.0):
    """This machine's fp32 matmul rate (FLOP/s) and copy bandwidth (bytes/s), measured now."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t, k = time.perf_counter(), 0
    while time.perf_counter() - t < secs:
        a @ b
        k += 1
    flops = 2 * n ** 3 * k / (time.perf_counter() - t)
    x = torch.empty(32 * 2 ** 20 // 4)
    y = torch.empty_like(x)
    t, k = time.perf_counter(), 0
    while time.perf_counter() - t < secs:
        y.copy_(x)
        k += 1
    return flops, 2 * x.numel() * 4 * k / (time.perf_counter() - t)

def model_matmul_rate(rows=32, d=576, inter=1536, q=576, kv=192, layers=30, vocab=49152, secs=1.0):
    """FLOP/s of SmolLM2-135M's own matmuls at `rows` rows, one decoding step's worth: every layer's q, k, v,
    o, gate, up, down projections and the lm_head, each weight distinct (so streamed from memory, as in the
    loop: ~540 MB fp32), and the same shapes with one cache-resident weight per shape. -> (streamed, cached)."""
    shapes = [(q, d), (kv, d), (kv, d), (d, q), (inter, d), (inter, d), (d, inter)]
    ws = [torch.randn(o, i) for _ in range(layers) for o, i in shapes] + [torch.randn(vocab, d)]
    xs = {i: torch.randn(rows, i) for i in {d, q, inter}}
    flop = sum(2 * rows * w.numel() for w in ws)

    def rate(weights):
        for w in weights:
            torch.nn.functional.linear(xs[w.shape[1]], w)
        t, k = time.perf_counter(), 0
        while time.perf_counter() - t < secs:
            for w in weights:
                torch.nn.functional.linear(xs[w.shape[1]], w)
            k += 1
        return flop * k / (time.perf_counter() - t)
    one = {w.shape: w for w in ws[:len(shapes)]}
    cached = [one[w.shape] if w.shape in one else w for w in ws[:-1]]  # lm_head (113 MB) cannot sit in cache anyway
    return rate(ws), rate(cached + ws[-1:])

# -----------------------------------------------------------------------------
# extraction: extract's sampling loop with capture vs plain generate (and vs the loop as it was at
# OLD_LOOP_REV, read from git), one subprocess per variant so that peak memory (max RSS) is each
# variant's own. Same prompts, N, new tokens and sampling settings for every variant.

REPEATS = 3  # runs of the extract and old-loop variants per case, the fastest counting: this VM's speed drifts 30% within minutes
OLD_LOOP_REV = '9130663'  # extract.py before the static-cache loop (issue 12): DynamicCache, full-vocab top-p sort


def _old_extract_module():
    """extract.py as of OLD_LOOP_REV, imported from a temp file (None outside a git checkout with that commit)."""
    import importlib.util
    import tempfile
    src = subprocess.run(['git', 'show', f'{OLD_LOOP_REV}:extract.py'], cwd=HERE, capture_output=True, text=True)
    if src.returncode:
        return None
    path = os.path.join(tempfile.mkdtemp(), 'extract_old.py')
    open(path, 'w').write(src.stdout)
    spec = importlib.util.spec_from_file_location('extract_old', path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _extract_worker(variant, n_problems, n_samples, max_new_tokens, dataset, temperature=0.8, top_p=0.95, profile=None):
    import capture as X
    torch.set_num_threads(1)
    model, tok = generator.load_generator('smollm2', dtype='bfloat16' if variant == 'extract bf16' else 'auto')
    probs = (tasks.load_problems('gsm8k', 0, n_problems - 1, DATA) if dataset == 'gsm8k'
             else tasks.load_problems('synth', 0, n_problems - 1, synth_level=2))
    prompts = [tasks.build_prompt(tok, p, 'Please reason step by step.' if dataset == 'gsm8k' else None, False) for p in probs]
    old = _old_extract_module() if variant == 'extract (old loop)' else None
    if variant == 'extract (old loop)' and old is None:
        print(json.dumps(None))
        return
    table = X.step_table(tok)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    torch.manual_seed(0)
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if profile else None
    if prof:
        prof.__enter__()
    t = time.perf_counter()
    if variant.startswith('extract'):
        if old is not None:
            res = old.sample_with_capture(model, tok, prompts, n_samples, [-1], max_new_tokens, temperature, top_p, seed=0, nl=table)
        else:
            res = X.sample_with_capture(model, tok, prompts, n_samples, [-1], max_new_tokens, temperature, top_p, seed=0, table=table)
        n_tok = sum(len(c['token_ids']) for cs in res for c in cs)
        n_steps = sum(len(c['step_pos']) for cs in res for c in cs)
        floor_work = _floor_work(model, tok, prompts, res)
    else:
        enc = tok(prompts, return_tensors='pt', padding=True, padding_side='left', add_special_tokens=False)
        out = model.generate(**enc, do_sample=True, temperature=temperature, top_p=top_p, top_k=0, max_new_tokens=max_new_tokens,
                             num_return_sequences=n_samples, pad_token_id=tok.pad_token_id,
                             output_hidden_states=variant == 'generate+hidden', return_dict_in_generate=True)
        new = out.sequences[:, enc.input_ids.shape[1]:]
        eos = torch.tensor(sorted({tok.eos_token_id, model.generation_config.eos_token_id} - {None}))
        ended = torch.isin(new, eos)
        # finished-candidate tokens: up to (not counting) the first EOS
        n_tok = int(torch.where(ended.any(1), ended.float().argmax(1), torch.full((len(new),), new.shape[1])).sum())
        n_steps, floor_work = 0, None
    dt = time.perf_counter() - t
    prompt_tokens = sum(len(tok(p, add_special_tokens=False).input_ids) for p in prompts)
    if prof:
        prof.__exit__(None, None, None)
        _profile_table(prof, dt, profile)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({'tokens': n_tok, 'seconds': dt, 'peak_mb': peak / 1024, 'delta_mb': (peak - base) / 1024, 'steps': n_steps,
                      'floor_work': floor_work, 'prompt_tokens': prompt_tokens}))


def _floor_work(model, tok, prompts, res):
    """The least work of an extract run, for its floor: (prefill FLOPs, [(FLOPs, bytes) per decoding step]).
    FLOPs: 2 x matmul weights per token (the prefill's lm_head only at each prompt's last token) plus attention,
    4 x layers x heads x head_dim per token and context token (QK^T and AV), over each row's own context (its
    prompt without padding, then its tokens so far). Bytes per step: the weights read once, plus the K/V cache of
    the rows alive (at the weights' dtype). A row forwards each of its tokens (an EOS is sampled, never forwarded)."""
    cfg = model.config
    hd = getattr(cfg, 'head_dim', None) or cfg.hidden_size // cfg.num_attention_heads
    mm = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))  # lm_head included
    head = model.get_output_embeddings().weight.numel()
    att = 4 * cfg.num_hidden_layers * cfg.num_attention_heads * hd
    b = next(model.parameters()).dtype.itemsize
    kv = b * 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * hd
    weights = b * sum(p.numel() for p in model.parameters())
    lp = [len(tok(p, add_special_tokens=False).input_ids) for p in prompts]
    prefill = sum(2 * (mm - head) * L + 2 * head + att * L * (L + 1) // 2 for L in lp)
    rows = [(L, len(c['token_ids'])) for L, cs in zip(lp, res) for c in cs]
    steps = []
    for t in range(max(n for _, n in rows)):
        ctx = [L + t + 1 for L, n in rows if n > t]
        steps.append((2 * mm * len(ctx) + att * sum(ctx), weights + kv * sum(ctx)))
    return prefill, steps


# where the profiled ops come from, for the profile table
OP_SOURCES = {'aten::mm': 'the model\'s matmuls', 'aten::addmm': 'the model\'s matmuls', 'aten::bmm': 'attention',
              'aten::_scaled_dot_product_flash_attention_for_cpu': 'attention', 'aten::cat': 'KV cache growth / concatenation',
              'aten::sort': 'top-p sort', 'aten::topk': 'top-p prefilter / confidence top-k', 'aten::_softmax': 'softmax',
              'aten::_log_softmax': 'log-softmax', 'aten::copy_': 'copies (cache writes, casts)', 'aten::mul': 'elementwise',
              'aten::multinomial': 'sampling', 'aten::cumsum': 'top-p cumsum', 'aten::index_put_': 'state ring / cache writes',
              'aten::index': 'row selection / table lookups', 'aten::embedding': 'embedding'}


def _profile_table(prof, wall, top=12):
    """Self CPU time per op, as a share of the profiled wall time."""
    ev = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in ev)
    rows = [[e.key, e.count, f'{e.self_cpu_time_total / 1e6:.2f}', f'{100 * e.self_cpu_time_total / total:.1f}%',
             OP_SOURCES.get(e.key, '')] for e in ev[:top]]
    rows.append(['(all other ops)', sum(e.count for e in ev[top:]), f'{sum(e.self_cpu_time_total for e in ev[top:]) / 1e6:.2f}',
                 f'{100 * sum(e.self_cpu_time_total for e in ev[top:]) / total:.1f}%', ''])
    print(f'profile: {total / 1e6:.2f} s of op self time in {wall:.2f} s wall ({100 * total / 1e6 / wall:.0f}%; the rest is Python '
          f'between ops)')
    table(rows, ['op', 'calls', 'self s', 'share of op time', 'where it comes from'])


def bench_extract(profile=False):
    """Embedded model on CPU, one thread: tokens/s and peak memory of the ways to sample, same work for all.
    profile: also print a torch.profiler op table for the old and new loop on the first case."""
    torch.set_num_threads(1)
    flops, bw = machine_floor()
    mm_streamed, mm_cached = model_matmul_rate()
    rows = []
    # several problems x N (finished rows leave the batch), N samples of one prompt, and a longer limit
    cases = [('synth', 4, 8, 64), ('gsm8k', 1, 32, 128), ('gsm8k', 1, 32, 256)]
    variants = ('generate', 'generate+hidden', 'extract (old loop)', 'extract')
    for i, (dataset, n_problems, n_samples, mnt) in enumerate(cases):
        res = {}
        for r in range(REPEATS):  # interleaved, so drift hits old and new alike; the fastest run of each counts
            for variant in variants + (('extract bf16',) if i == 0 else ()):  # bf16 weights: to pick the CPU default
                if r and variant not in ('extract', 'extract (old loop)'):
                    continue
                args = [sys.executable, __file__, '--worker', variant, str(n_problems), str(n_samples), str(mnt), dataset]
                if profile and i == 0 and r == 0 and variant.startswith('extract'):
                    args.append('--profile')
                out = subprocess.run(args, capture_output=True, text=True, cwd=HERE, env={**os.environ, 'OMP_NUM_THREADS': '1'})
                if out.returncode:
                    raise RuntimeError(out.stderr[-2000:])
                if '--profile' in args:
                    print(f'\n{variant}, {dataset} {n_problems}x{n_samples}, max_new {mnt}:')
                    print('\n'.join(out.stdout.strip().splitlines()[:-1]))
                run = json.loads(out.stdout.strip().splitlines()[-1])
                best = res.get(variant)
                if best is None or (run and run['seconds'] < best['seconds']):
                    res[variant] = run if best is None else {**run, 'delta_mb': max(run['delta_mb'], best['delta_mb'])}
        g, o, e, h = res['generate'], res['extract (old loop)'], res['extract'], res.get('extract bf16')
        # floor of this work: one prefill per prompt, then per decoding step max(FLOPs / matmul rate, bytes /
        # bandwidth): each step reads every weight and the live rows' K/V cache once, and at few rows that
        # read, not the matmuls, bounds it
        prefill, steps = e['floor_work']
        floor_s = prefill / flops + sum(max(f / flops, b / bw) for f, b in steps)
        mm_s = prefill / flops + sum(f / mm_streamed for f, b in steps)  # the same FLOPs at the model's own matmul rate
        rate = lambda r: r['tokens'] / r['seconds']  # noqa: E731
        rows.append([f'{dataset} {n_problems}x{n_samples}', mnt, f"{rate(g):.0f}",
                     f"{rate(o):.0f}" if o else '-', f"{rate(e):.0f}", f"{rate(h):.0f}" if h else '-',
                     f"{rate(e) / rate(o):.2f}" if o else '-',
                     f"{rate(e) / rate(g):.2f}", f"{e['seconds'] / floor_s:.2f}", f"{e['seconds'] / mm_s:.2f}",
                     f"{g['delta_mb']:.0f}",
                     f"{res['generate+hidden']['delta_mb']:.0f}", f"{o['delta_mb']:.0f}" if o else '-', f"{e['delta_mb']:.0f}",
                     f"{e['steps'] / max(1, n_problems * n_samples):.1f}"])
    print(f'\nExtraction (SmolLM2-135M, CPU, 1 thread; extract and old loop: fastest of {REPEATS} interleaved runs; '
          f'machine: {flops / 1e9:.0f} GFLOP/s fp32 matmul, {bw / 1e9:.1f} GB/s '
          f'copy; T=0.8, top-p 0.95). tok/s = finished-candidate tokens (up to EOS) per second; floor = prefill FLOPs / '
          f'matmul rate + per decoding step max(FLOPs / matmul rate, bytes / bandwidth), over the rows alive in the '
          f'extract run. FLOPs count all of them: 2 x matmul weights per token (prefill: lm_head at the last prompt '
          f'token only) + attention (QK^T, AV: 4 x layers x heads x head_dim x each row\'s real context, per token); '
          f'bytes = fp32 weights + the live rows\' K/V cache. MB = peak RSS growth.')
    print(f"Model-matmul floor: the same FLOPs at the rate SmolLM2's own matmuls reach at 32 rows, {mm_streamed / 1e9:.0f} "
          f"GFLOP/s with every layer's weights streamed from memory as in the loop ({mm_cached / 1e9:.0f} GFLOP/s when each "
          f"layer shape's weight stays in cache): what the loop could reach with no work besides those matmuls.")
    flags = open('/proc/cpuinfo').read() if os.path.exists('/proc/cpuinfo') else ''
    print(f"bf16 extract tok/s: the same loop with bfloat16 weights (first case only); this CPU "
          f"{'has' if 'avx512_bf16' in flags or 'amx_bf16' in flags else 'has no'} avx512_bf16 / amx_bf16. extract.py's "
          f"dtype='auto' keeps float32 on CPU: the faster one where bf16 has no hardware path.")
    table(rows, ['work (problems x N)', 'max_new', 'generate tok/s', 'old loop tok/s', 'extract tok/s', 'bf16 extract tok/s',
                 'extract/old', 'extract/generate', 'extract / floor', 'extract / model-matmul floor', 'generate MB',
                 'generate+hidden MB', 'old loop MB', 'extract MB', 'steps/cand'])


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
                                                  f'\n\\boxed{{{ans}}}', f'\n#### {ans}', f' {ans}']), r['answer'], 'gsm8k'))
    else:
        rs = _rows('math500/test.jsonl')
        for i, r in enumerate(rs[:n_problems]):
            body = r['solution'].rsplit('\\boxed', 1)[0]
            g = r['answer']
            forms = [g, g.replace('\\frac', '\\dfrac'), g.replace(' ', ''), f'\\left({g}\\right)' if ',' not in g else g]
            wrong = [rs[(i + k) % len(rs)]['answer'] for k in (7, 13, 101)]
            for _ in range(n_cands):
                ans = rng.choice(forms) if rng.random() < 0.6 else rng.choice(wrong)
                cands.append((body + rng.choice([f'\\boxed{{{ans}}}.', f' The final answer is ${ans}$. I hope it is correct.',
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
          f"attention included): HSRM at {n_tok / len(cands):.1f} steps mean needs {per / 1e6:.0f} MFLOP per candidate, "
          f"so 10,000 cand/s needs {per * 1e4 / 1e9:.0f} GFLOP/s")
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
        rows.append({'verifier': name, 'params': n, 'fp16_mb': 2 * n / 1e6, 'flops': verifier_flops(model, n_steps, n_tokens),
                     'ms_per_candidate': 1e3 * float(np.median(times)) / (n_problems * n_cands),
                     'device': f'{device} ({torch.get_num_threads()} threads)' if device == 'cpu' else device})
    return rows


def bench_cost(n_steps=20, n_tokens=300):
    rows = bench_eval(n_steps=n_steps, n_tokens=n_tokens)
    table([(r['verifier'], f"{r['params'] / 1e6:.2f}M", f"{r['fp16_mb']:.1f}", f"{r['flops']:.3g}",
            f"{r['ms_per_candidate']:.3f} ({r['device']})") for r in rows],
          [f'Verifier (S={n_steps} steps, T={n_tokens} tokens)', 'Params', 'fp16 MB', 'FLOPs / candidate', 'ms / candidate'])


# ====================================================================================================
# pruning: scoring every prefix next to scoring finished candidates, and the offline replay's speed
# ====================================================================================================


def bench_prune(n_problems=8, n_cands=8, n_steps=20, n_tokens=300, d_gen=2048, repeats=3, window=64, gen_params=1.7e9,
                seed=0):
    """HSRM scoring of finished candidates (score_problems) vs of every step prefix (score_prefixes,
    what online pruning needs) at the paper's shapes, each against its floor; the prefix scores'
    cost next to the generator's own (gen_params: 2 FLOPs per parameter per token, Qwen3-1.7B by
    default); and how many pools per second the offline replays simulate."""
    import steer as ST
    from model import score_prefixes
    from scorers import group_confidences
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
        rows.append((name, f'{fl / n / 1e6:.0f}', f'{dt / n * 1e3:.2f}', f'{floor / n * 1e3:.2f}', f'{dt / floor:.1f}x'))
    table(rows, [f'HSRM, d_gen {d_gen}, S={n_steps} steps', 'MFLOP / candidate', 'ms / candidate', 'floor ms', 'slower by'])
    gen = 2 * gen_params * n_tokens
    print(f"prefix scores cost {f_pre / f_full:.1f}x the final score's FLOPs; per candidate that is "
          f"{f_pre / n / gen:.2e} of the generator's {gen / 1e9:.0f} GFLOP for {n_tokens} tokens at {gen_params / 1e9:.1f}B "
          f"parameters: scoring every prefix is free next to generating")
    # replays: random prefix scores / confidences on pools of n_cands rows with n_steps steps and n_tokens tokens
    rng = np.random.default_rng(seed)
    pre = [rng.standard_normal(n_steps) for _ in range(n_cands)]
    sp = [np.sort(rng.choice(n_tokens - 1, n_steps - 1, replace=False)).tolist() + [n_tokens - 1] for _ in range(n_cands)]
    gc = [group_confidences(rng.random(n_tokens), window) for _ in range(n_cands)]
    lows = np.array([g.min() for g in gc])
    rows = []
    for name, fn in (('verifier rule (capture.prune_now at each step boundary)',
                      lambda: ST.replay_prune(pre, sp, [n_tokens] * n_cands, 0.0, 'global')),
                     (f'DeepConf online (window {window})',
                      lambda: ST.replay_deepconf(gc, lows, [n_tokens] * n_cands, window, float(np.median(lows)), 2))):
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
    raise SystemExit(f"no {rule}-rule threshold for {ckpt} in {path}; fix: python steer.py <its config> --prune=True "
                     f"(chooses it on validation), or pass --prune_threshold=<x>")


def bench_online(ckpt=DEMO_CKPT, rule='relative', threshold=None, n_problems=16, n_samples=8, max_new_tokens=64):
    """SmolLM2 on the demo's evaluation problems (synthetic level 2, T=0.8, top-p 0.95), one thread: the
    sampler with online pruning by a trained HSRM (the demo's, threshold chosen on validation by
    steer.py's pruning study) vs without, same seed. Tokens, wall-clock and the verifier's share of the pruned run."""
    import capture as X
    from store import load_checkpoint
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
    step = X._Steer.step

    def timed(self, *a):  # the verifier's scoring and the decisions, inside the pruned run
        t = time.perf_counter()
        out = step(self, *a)
        spent[0] += time.perf_counter() - t
        return out
    runs = {}
    for name, v in (('no pruning', None), (f'HSRM {rule} rule, threshold {threshold:.3g}', verifier)):
        X._Steer.step = timed
        t = time.perf_counter()
        res = X.sample_with_capture(model, tok, prompts, n_samples, [-1], max_new_tokens, 0.8, 0.95, seed=0, table=table_,
                                    verifier=v, prune_rule=rule, prune_threshold=threshold)
        runs[name] = (res, time.perf_counter() - t)
        X._Steer.step = step
    (full, t0), (cut, t1) = runs.values()
    same = sum(torch.equal(c['token_ids'], f['token_ids'][:len(c['token_ids'])]) for cs, fs in zip(cut, full) for c, f in zip(cs, fs))
    n_tok = [sum(len(c['token_ids']) for cs in r for c in cs) for r in (full, cut)]
    stopped = sum(c['finish'] == 'pruned' for cs in cut for c in cs)
    print(f"{n_problems} problems x {n_samples}, max_new {max_new_tokens}, checkpoint {os.path.relpath(ckpt, HERE)}; "
          f"{same} of {n_problems * n_samples} pruned-run candidates are prefixes of the unpruned run's (same seed)")
    table([['no pruning', n_tok[0], '1.00', f'{t0:.1f}', '1.00', '-', 0],
           [list(runs)[1], n_tok[1], f'{n_tok[1] / n_tok[0]:.2f}', f'{t1:.1f}', f'{t1 / t0:.2f}',
            f'{100 * spent[0] / t1:.1f}%', stopped]],
          ['sampling run', 'tokens', 'tokens / unpruned', 'seconds', 'seconds / unpruned', 'verifier share', 'stopped'])



# -----------------------------------------------------------------------------
# search: the sampler steered by beam search / DVTS against plain sampling of the same N, on the same problems.
# Cost per generated token includes what search adds: idle rows (a row that closed a step waits for its group
# in the batch), the copies of KV-cache rows at each branch, and the verifier's scoring.

SHOP_CKPT = os.path.join(HERE, 'out', 'words_shop', 'verifiers', 'hsrm_seed42', 'ckpt.pt')


def bench_search(ckpt=SHOP_CKPT, n_problems=16, n_samples=8, width=4, max_new_tokens=128):
    """SmolLM2 on 16 'shop' word problems (config/search_shop.py's, T=0.8, top-p 0.95), one thread: plain sampling
    of N = 8 vs beam search and DVTS (M = 4) steered by a trained HSRM. Seconds per generated token, the share of
    row-steps spent idle, the verifier's share of the time, and its FLOPs against the generator's."""
    import capture as X
    from store import load_checkpoint
    if not os.path.exists(ckpt):
        raise SystemExit(f"{ckpt} not found; fix: python train.py config/words.py --out_dir=out/words_shop (after its "
                         f"extraction, see config/search_shop.py), or pass --search_ckpt=<ckpt.pt>")
    torch.set_num_threads(1)
    model, tok = generator.load_generator('smollm2')
    verifier = load_checkpoint(ckpt)[0]
    probs = tasks.load_problems('words', 1000, 1000 + n_problems - 1, word_family='shop')
    prompts = [tasks.build_prompt(tok, p, None, False) for p in probs]
    table_ = X.step_table(tok)
    n_params = sum(p.numel() for p in model.parameters())
    score, spent, vflops, rowsteps = X._Steer.score, [0.0], [0.0], [0]

    def timed(self, ring, count, b, width):  # the verifier's scoring, inside the steered run; FLOPs per prefix read
        t = time.perf_counter()
        out = score(self, ring, count, b, width)
        spent[0] += time.perf_counter() - t
        vflops[0] += sum(verifier_flops(self.v, int(min(c, width)), 0) for c in count[b].tolist())
        return out
    forward = model.forward

    def counted(*a, **k):  # rows through the generator at the decoding steps (one token each; the prefill is not one)
        out = forward(*a, **k)
        ids = k.get('input_ids')
        rowsteps[0] += ids.shape[0] if ids.shape[1] == 1 else 0
        return out
    rows = []
    for how in (None, 'beam', 'dvts'):
        X._Steer.score, model.forward = timed, counted
        spent[0] = vflops[0] = rowsteps[0] = 0
        t = time.perf_counter()
        res = X.sample_with_capture(model, tok, prompts, n_samples, [-1], max_new_tokens, 0.8, 0.95, seed=0, table=table_,
                                    verifier=verifier if how else None, search=how, search_width=width)
        secs = time.perf_counter() - t
        X._Steer.score, model.forward = score, forward
        gen = sum(X.generated_tokens(cs) for cs in res)
        gflops = 2 * n_params * gen  # the generator's weights, per generated token (attention not counted)
        rows.append([how or 'plain sampling', gen, f'{secs:.1f}', f'{1e3 * secs / gen:.2f}',
                     f'{gen / max(rowsteps[0], 1):.3f}', f'{100 * spent[0] / secs:.1f}%',
                     f'{100 * vflops[0] / gflops:.3f}%', sum(c.get('parent') is not None for cs in res for c in cs)])
    base = float(rows[0][3])
    for r in rows:
        r.insert(4, f'{float(r[3]) / base:.2f}')
    print(f"{n_problems} shop problems x N = {n_samples}, M = {width}, max_new {max_new_tokens}, one thread, checkpoint "
          f"{os.path.relpath(ckpt, HERE)}; generator {n_params / 1e6:.0f}M parameters")
    table(rows, ['run', 'generated tokens', 'seconds', 'ms / token', 'vs plain', 'generated tokens / decode forwards (1 = all counted)', 'verifier time',
                 'verifier / generator FLOPs', 'branches'])

# -----------------------------------------------------------------------------
# using a trained verifier (sample.py): what scoring a question's N candidates adds to generating them. The
# candidates' states are captured while they are sampled, so the verifier's cost is one small forward per candidate.


def bench_sample(ckpt=None, n_questions=16, n=8, alone=4):
    """SmolLM2 on the demo's evaluation questions (synthetic level 2 and the demo's sampling settings, from the
    checkpoint's training extraction), one thread: sample.py's best_of_n with the demo run's best HSRM seed. Seconds
    per question generating and verifying, questions asked one at a time (N rows per forward) and 16 per batch (the
    demo's 128 rows), and the verifier's FLOPs against the generator's on the generated tokens."""
    import sample as SA
    try:
        path = SA.best_ckpt(ckpt or os.path.join(HERE, 'out', 'demo', 'verifiers', 'hsrm*_seed*', 'ckpt.pt'))
    except ValueError:
        raise SystemExit("no checkpoint of the demo run; fix: run the main job (README) first, or pass --ckpt=<ckpt.pt>")
    torch.set_num_threads(1)
    verifier = SA.load_verifier(path)[0]
    s = SA.resolve({}, verifier.trained_on)
    model, tok = generator.load_generator(s['model'])
    n_params = sum(p.numel() for p in model.parameters())
    probs = tasks.load_problems(s['dataset'], 1000, 1000 + n_questions - 1, synth_level=s['synth_level'],
                                word_family=s['word_family'])
    SA.best_of_n(model, tok, verifier, probs[:1], n, s)  # warm-up: first calls allocate
    rows = []
    for how, picks in ((f'one at a time ({n} rows per forward)', [p for q in probs[:alone] for p in
                                                                    SA.best_of_n(model, tok, verifier, [q], n, s)]),
                       (f'{128 // n} per batch (128 rows)', SA.best_of_n(model, tok, verifier, probs, n, s, batch_size=128))):
        gen, ver = (sum(p['seconds'][k] for p in picks) / len(picks) for k in ('generate', 'verify'))
        cands = [c for p in picks for c in p['candidates']]
        vflops = sum(verifier_flops(verifier, len(c['states']), 0) for c in cands)
        gflops = 2 * n_params * sum(len(c['token_ids']) for c in cands)  # the generator's weights per generated token
        rows.append([how, len(picks), f'{gen:.2f}', f'{1e3 * ver:.1f}', f'{100 * ver / gen:.2f}%', f'{100 * vflops / gflops:.3f}%'])
    print(f"sample.py's best_of_n, best of {n}, SmolLM2 ({n_params / 1e6:.0f}M) on {s['dataset']} questions, max_new "
          f"{s['max_new_tokens']}, one thread; verifier {os.path.relpath(path, HERE)}")
    table(rows, ['questions asked', 'questions', 'generate s / question', 'verify ms / question', 'verify / generate (time)',
                 'verifier / generator FLOPs'])

# -----------------------------------------------------------------------------
# extraction on every core: extract.py end to end (model load included, as a user waits for it) with today's
# path before `procs` (one process, torch's threads), one 1-thread process pinned to one core, and the default
# (one 1-thread process per core, each its own shard), at three batch sizes. Per-batch seeds: at one batch size
# every path writes the same candidates; another batch size draws other candidates (the same distribution).


def bench_procs(n_problems=64, n_samples=8, max_new_tokens=64, batches=(64, 128, 256)):
    import tempfile
    from extract import cpu_cores
    cores = cpu_cores()
    paths = {'one process, torch threads (before procs)': (['--procs=1', '--threads=0'], None),
             'one 1-thread process, pinned': (['--procs=1', '--threads=1'], {cores[0]}),
             f'default: {len(cores)} processes x 1 thread': (['--procs=0'], None)}
    rows, rate = [], {}
    for b in batches:
        for name, (flags, pin) in paths.items():
            out = tempfile.mkdtemp()
            cmd = [sys.executable, os.path.join(HERE, 'extract.py'), 'config/demo.py', f'--train_range=(0,{n_problems - 1})',
                   '--eval_range=None', f'--n_train_samples={n_samples}', f'--max_new_tokens={max_new_tokens}',
                   f'--batch_size={b}', f'--out_dir={out}', *flags]
            t = time.perf_counter()
            r = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True,
                               preexec_fn=(lambda c=pin: os.sched_setaffinity(0, c)) if pin else None)
            secs = time.perf_counter() - t
            if r.returncode:
                raise RuntimeError(r.stderr[-2000:])
            rate[b, name] = n_problems * n_samples / secs
    one = {b: rate[b, 'one 1-thread process, pinned'] for b in batches}
    for b in batches:
        for name in paths:
            rows.append([b, name, f'{rate[b, name]:.2f}', f'{rate[b, name] / rate[batches[0], list(paths)[0]]:.2f}',
                         f'{rate[b, name] / one[b]:.2f}', f'{rate[b, name] / (len(cores) * one[b]):.2f}'])
    print(f"extract.py on config/demo.py's task (SmolLM2-135M, synthetic level 2), {n_problems} problems x {n_samples}, "
          f"max_new {max_new_tokens}, model load included; {len(cores)} cores. Ideal = {len(cores)} x one 1-thread "
          f"process at that batch (linear scaling, the floor of splitting whole batches over the cores).")
    table(rows, ['rows per forward', 'path', 'candidates / s', 'vs before procs at 64 rows', 'vs one 1-thread process',
                 'vs ideal'])


# -----------------------------------------------------------------------------
# memory: the paper cells against one 80 GB GPU, from the memory model alone (generator.py; no GPU, no weights)


def bench_memory():
    """Per paper cell (and the thinking ablation on math500_1p7b): the rows each split runs per forward at the cell's
    batch_size, what the memory model says they allocate, and the budget of one 80 GB GPU after the float16 weights;
    prompts at tasks.PROMPT_TOKENS. The cells' batch_size is fit_batch_size's answer (a test keeps them equal)."""
    import glob
    import extract
    from configurator import apply_config
    cfgs = [[f] for f in sorted(glob.glob(os.path.join(HERE, 'config', '*.py')))
            if os.path.basename(f).split('_')[0] in tasks.PROMPT_TOKENS and 'smollm' not in f]
    cfgs.append([os.path.join(HERE, 'config', 'math500_1p7b.py'), os.path.join(HERE, 'config', 'think_full.py')])
    rows = []
    for files in cfgs:
        c = apply_config(dict(extract.DEFAULTS), files, extract.DEFAULTS)
        mc, dt = generator.paper_config(c['model']), torch.float16
        w = 2 * generator.n_params(mc)
        room = generator.budget(generator.CARD_80GB - w)
        p = tasks.PROMPT_TOKENS[c['dataset']]
        need = []
        for n in (c['n_train_samples'], c['n_eval_samples']):
            r = max(1, c['batch_size'] // n) * n
            need.append((r, generator.decode_bytes(mc, dt, r, p, c['max_new_tokens'], n, len(c['layers']), c['max_steps'])))
        rows.append([' + '.join(os.path.basename(f)[:-3] for f in files), c['batch_size'],
                     f"{generator.kv_bytes_per_token(mc, dt) // 1024}", p + c['max_new_tokens'] + 1,
                     *[f'{r} / {b / 2 ** 30:.1f}' for r, b in need], f'{w / 2 ** 30:.1f}', f'{room / 2 ** 30:.1f}',
                     f'{max(b for _, b in need) / room:.2f}'])
    print(f"One 80 GB GPU: {generator.CARD_80GB / 2 ** 30:.0f} GiB free before the weights, {generator.HEADROOM:.0%} of "
          f"what is left kept back; float16; at most {generator.MAX_ROWS} rows per forward. Need = KV cache at capacity + "
          f"per-row buffers + logits temporaries + prefill (generator.decode_bytes).")
    table(rows, ['cell', 'batch_size', 'KV KiB / row / position', 'capacity (positions)', 'train rows / GiB',
                 'eval rows / GiB', 'weights GiB', 'budget GiB', 'largest need / budget'])

# -----------------------------------------------------------------------------
# the GPU path, ready for the day a GPU is lent: teacher-forced equality on the device in its dtypes, one beam and one
# pruning run, and decoding speed and peak memory of a randomly initialised Qwen3-1.7B at its exact shapes (real
# weights cannot reach a lent machine: no hub there; random weights at the real shapes cost what the real ones do,
# the lm_head scaled so that the nucleus is as narrow as a trained model's). --device=cpu runs it all at tiny shapes.


def word_tokenizer(V, every=16):
    """A word-level tokenizer of V tokens 'w<i>' (id 0 '<eos>'), every `every`-th ending in a newline (a step
    delimiter): a real fast tokenizer of any vocabulary size, built here (no hub)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {'<eos>': 0, **{f'w{i}' + '\n' * (i % every == 1): i for i in range(1, V)}}
    t = Tokenizer(models.WordLevel(vocab, unk_token='<eos>'))
    t.pre_tokenizer = pre_tokenizers.Split(' ', 'removed')
    return PreTrainedTokenizerFast(tokenizer_object=t, eos_token='<eos>', pad_token='<eos>')


def _words(tok, ids):
    return ' '.join(tok.convert_ids_to_tokens(ids))


def _random_model(config, dtype, device, head_scale=1.0, newline=None):
    """A randomly initialised causal LM of `config` on `device` (initialised there: no host copy of 3 GB); the
    lm_head scaled (a peaked next-token distribution), newline tokens raised along the mean final state (steps
    close often), as test_all's tiny_model does."""
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
    with torch.no_grad():
        head = model.get_output_embeddings().weight
        head.mul_(head_scale)
        if newline is not None:
            h = model.base_model(input_ids=torch.randint(1, config.vocab_size, (4, 32), device=device)).last_hidden_state
            h = h.float().mean((0, 1))
            head[newline.to(device)] += (30 * h / h.square().sum()).to(head.dtype)
    return model


def _tiny_config(kind, V):
    from transformers import LlamaConfig, Qwen3Config
    args = dict(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=1024, eos_token_id=0, pad_token_id=0, tie_word_embeddings=False)
    return Qwen3Config(head_dim=16, **args) if kind == 'qwen3' else LlamaConfig(**args)


def _max_err(res, ref, tol):
    """max |a - b| / (tol + tol |b|) over the states and the log-probs (<= 1: within assert_close(rtol=atol=tol))."""
    e = [((a - b).abs() / (tol + tol * b.abs())).max().item() for a, b in zip(res, ref) if a.numel()]
    return max(e, default=0.0)


def device_floor(device, dtype, n=4096, secs=1.0):
    """This device's matmul rate (FLOP/s, at dtype) and copy bandwidth (bytes/s), measured now."""
    sync = torch.cuda.synchronize if str(device).startswith('cuda') else (lambda: None)
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    x = torch.empty(256 * 2 ** 20 // dtype.itemsize, device=device, dtype=dtype)
    y = torch.empty_like(x)
    out = []
    for work, amount in ((lambda: a @ b, 2 * n ** 3), (lambda: y.copy_(x), 2 * x.numel() * dtype.itemsize)):
        work()
        sync()
        t, k = time.perf_counter(), 0
        while time.perf_counter() - t < secs:
            work()
            k += 1
        sync()
        out.append(amount * k / (time.perf_counter() - t))
    return out


def bench_gpu(device=None):
    import capture as X
    from model import build_verifier
    device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
    cuda = device.startswith('cuda')
    if cuda and not torch.cuda.is_available():
        raise SystemExit(f"--device={device} but CUDA is not available; fix: --device=cpu (tiny shapes: a smoke run)")
    print(f"device: {torch.cuda.get_device_name(device) if cuda else 'cpu (tiny shapes: a smoke run of the CUDA path)'}; "
          f"torch {torch.__version__}, transformers {__import__('transformers').__version__}")
    # 1. teacher-forced equality on the device: captured states and statistics against one re-encoding pass
    tok = word_tokenizer(300)
    table_ = X.step_table(tok)
    newline = table_.nonzero()[:, 0]
    prompts = [_words(tok, [5, 17, 40, 33]), _words(tok, list(range(60, 80)))]  # two lengths: left padding
    tol = {torch.float32: 4e-3, torch.float16: 1e-2, torch.bfloat16: 6e-2}  # test_all's, fp16 between
    rows = []
    for kind in ('qwen3', 'llama'):
        for dt in ((torch.float16, torch.bfloat16) if cuda else (torch.float32, torch.bfloat16)):
            model = _random_model(_tiny_config(kind, len(tok)), dt, device, 1.0, newline)
            generator.check_layers(model, [-1, 1])
            for case, ps, n in (('padded, 2 prompts x 3', prompts, 3), ('single row', prompts[1:], 1)):
                res = X.sample_with_capture(model, tok, ps, n, [-1, 1], 32, 0.7, 0.9, seed=0, table=table_)
                flat = [(p, c) for p, cs in zip(ps, res) for c in cs]
                ref = X.reencode(model, tok, [p for p, _ in flat], [c['token_ids'].tolist() for _, c in flat], [-1, 1],
                                 [c['finish'] for _, c in flat], table_)
                same = all(c['step_pos'].tolist() == r['step_pos'].tolist() for (_, c), r in zip(flat, ref))
                es = _max_err([c['states'].float() for _, c in flat], [r['states'].float() for r in ref], tol[dt])
                el = _max_err([c['logprobs'] for _, c in flat], [r['logprobs'] for r in ref], tol[dt])
                rows.append([kind, str(dt)[6:], case, len(flat), sum(len(c['step_pos']) for _, c in flat), same,
                             f'{es:.2f}', f'{el:.2f}', 'yes' if same and max(es, el) <= 1 else 'NO'])
    print('\nTeacher-forced equality on the device (random tiny models, T=0.7, top-p 0.9, 32 tokens, layers [-1, 1]); '
          'error = max |captured - re-encoded| / (tol + tol |re-encoded|), tol = the tests\' (fp32 4e-3, fp16 1e-2, bf16 6e-2)')
    table(rows, ['model', 'dtype', 'case', 'candidates', 'steps', 'step positions equal', 'state error', 'log-prob error', 'within tol'])
    # 2. steering on the device: one beam search and one pruning run, every candidate against its re-encoding
    dt = torch.bfloat16 if cuda else torch.float32
    model = _random_model(_tiny_config('qwen3', len(tok)), dt, device, 1.0, newline)
    torch.manual_seed(1)
    v = build_verifier('hsrm', 64, layers=[-1], dropout=0.0).eval().to(device)
    rows = []
    for name, kw in (('beam, N = 4, M = 2', dict(search='beam', search_width=2)),
                     ('pruning, relative 0.05', dict(prune_rule='relative', prune_threshold=0.05))):
        res = X.sample_with_capture(model, tok, prompts, 4, [-1], 40, 0.9, 0.95, seed=5, table=table_, verifier=v, **kw)
        flat = [(p, c) for p, cs in zip(prompts, res) for c in cs]
        ref = [X.reencode(model, tok, [p], [c['token_ids'].tolist()], [-1], [c['finish']], table_)[0] for p, c in flat]
        es = _max_err([c['states'].float() for _, c in flat], [r['states'].float() for r in ref], tol[dt])
        rows.append([name, len(flat), sum(c['finish'] == 'pruned' for _, c in flat),
                     sum(c.get('parent') is not None for _, c in flat), sum(X.generated_tokens(cs) for cs in res), f'{es:.2f}'])
    print(f'\nSteering on the device ({str(dt)[6:]}, a random HSRM steering): every candidate against its own re-encoding')
    table(rows, ['run', 'candidates', 'stopped', 'branched', 'generated tokens', 'state error'])
    # 3. speed and memory at the paper's generator size (CUDA), or tiny shapes (CPU: inductor compiles for minutes there
    # and is slower than eager, so compile is measured on CUDA only)
    if cuda:
        bench_speed(device, generator.paper_config('Qwen/Qwen3-1.7B'), (64, 128, 256), 512, torch.bfloat16, 128, 8.0)
    else:
        bench_speed(device, _tiny_config('qwen3', 300), (8, 16, 32), 32, torch.float32, None, 1.0)


def bench_speed(device, cfg, grid, T, dt, compile_at, head_scale):
    """Decoding speed and peak memory of a random model of `cfg` at each row count in `grid` (8 samples of one
    128-token prompt per 8 rows, T new tokens), eager, and compiled at compile_at rows."""
    import capture as X
    cuda = device.startswith('cuda')
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    big = word_tokenizer(cfg.vocab_size)
    table_ = torch.zeros(cfg.vocab_size, dtype=torch.bool)
    table_[1::16] = True  # a step every ~16 tokens
    model = _random_model(cfg, dt, device, head_scale)
    n_par = sum(p.numel() for p in model.parameters())
    weights = torch.cuda.memory_allocated(device) if cuda else 0
    flops, bw = device_floor(device, dt, 4096 if cuda else 1024)
    prompt = _words(big, list(range(2, 130)))  # 128 prompt tokens
    rows, base = [], None
    for r in grid:
        for comp in ((False, True) if r == compile_at else (False,)):
            ps = [prompt] * (r // 8)
            if comp:  # the first call compiles (and records CUDA graphs): timed apart
                t = time.perf_counter()
                X.sample_with_capture(model, big, ps, 8, [-1], T, 0.7, 0.9, seed=0, table=table_, torch_compile=True)
                sync()
                t_compile = time.perf_counter() - t
            if cuda:
                torch.cuda.reset_peak_memory_stats(device)
            sync()
            t = time.perf_counter()
            res = X.sample_with_capture(model, big, ps, 8, [-1], T, 0.7, 0.9, seed=0, table=table_, torch_compile=comp)
            sync()
            secs = time.perf_counter() - t
            n_tok = sum(len(c['token_ids']) for cs in res for c in cs)
            prefill, steps = _floor_work(model, big, ps, res)
            floor = prefill / flops + sum(max(f / flops, b / bw) for f, b in steps)
            pred = generator.decode_bytes(cfg, dt, r, 128, T, 8, 1, 100)
            peak = torch.cuda.max_memory_allocated(device) - weights if cuda else None
            base = base or n_tok / secs
            rows.append([r, f'compile (first call {t_compile:.0f} s)' if comp else 'eager',
                         n_tok, f'{1e3 * secs / len(steps):.1f}', f'{n_tok / secs:,.0f}', f'{n_tok / secs / base:.2f}',
                         f'{secs / floor:.1f}', f'{pred / 2 ** 30:.2f}', f'{peak / 2 ** 30:.2f}' if cuda else '-',
                         f'{peak / pred:.2f}' if cuda else '-'])
    print(f"\nDecoding speed: a random {cfg.model_type} at {'Qwen3-1.7B' if cfg.hidden_size == 2048 else 'tiny'} shapes "
          f"({str(dt)[6:]}, {n_par / 1e6:,.1f}M parameters), 8 samples of a 128-token prompt per 8 rows, {T} new tokens, T=0.7, top-p 0.9, "
          f"the last 100 step states kept. Device floor measured now: {flops / 1e12:.1f} TFLOP/s matmul, {bw / 1e9:.0f} GB/s "
          f"copy; floor = prefill FLOPs / rate + per step max(FLOPs / rate, (weights + live KV cache) / bandwidth). Peak = "
          f"max allocated beyond the weights, against the memory model's decode_bytes.")
    table(rows, ['rows', 'step', 'tokens', 'ms / step', 'tokens / s', 'vs first row', 'vs floor', 'model GiB', 'peak GiB',
                 'peak / model'])


if __name__ == '__main__':
    if len(sys.argv) > 1 and sys.argv[1] == '--worker':
        _extract_worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6],
                        profile=12 if '--profile' in sys.argv else None)
        sys.exit(0)
    flag = lambda k: next((a.split('=', 1)[1] for a in sys.argv[1:] if a.startswith(f'--{k}=')), None)  # noqa: E731
    only, device = flag('only'), flag('device')
    if device is not None:  # the other sections measure this CPU machine
        only = only or 'gpu'
        if only != 'gpu':
            raise SystemExit(f"--device={device!r} applies to --only=gpu; fix: --only=gpu --device={device}")
    sections = {'extract': lambda: bench_extract(profile='--profile' in sys.argv), 'procs': bench_procs, 'label': bench_labeling,
                'train': bench_training, 'cost': bench_cost, 'prune': bench_prune,
                'search': lambda: bench_search(**({'ckpt': flag('search_ckpt')} if flag('search_ckpt') else {})),
                'sample': lambda: bench_sample(**({'ckpt': flag('ckpt')} if flag('ckpt') else {})),
                'online': lambda: bench_online(**{k: v for k, v in (('ckpt', flag('prune_ckpt')), ('rule', flag('prune_rule')),
                                                                    ('threshold', flag('prune_threshold'))) if v is not None}),
                'memory': bench_memory, 'gpu': lambda: bench_gpu(device)}
    if only not in (None, *sections):
        raise SystemExit(f"--only={only!r} is unknown; fix: one of {', '.join(sections)}")
    for name, fn in sections.items():
        if only in (None, name):
            print(f'\n=== {name} ===')
            fn()
