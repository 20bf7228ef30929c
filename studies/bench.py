"""
Speed and memory, measured side by side in one run and printed as tables (never asserted in tests).

    python -m studies.bench                 # every section
    python -m studies.bench --only=extract  # or: generate, dtype, alloc, int8, quality, train, procs, search, sample,
                                            # memory, tables, gpu, gpu_cell, gpu_refill
    python -m studies.bench --only=extract --before=96203bd --dtype=bfloat16,float32 --repeats=2  # the loop of a
                        # commit beside this tree's (default: where this branch left main), in each dtype, 2 turns
    python -m studies.bench --only=quality --dirs=out/dtype/float32/eval,out/demo/eval  # labelled extractions compared
    python -m studies.bench --only=train --train_dir=out/demo/train  # the verifiers' training on a labelled split
    python -m studies.bench --only=text_groups --train_dir=out/gsm8k_qwen05/train  # the text verifier's attention in
                        # length groups against the batch padded to its longest text, at a split's shapes
    python -m studies.bench --only=tables --dirs=out/demo/pools  # pools.py's table from pools (none: drawn ones)
    python -m studies.bench --only=chunks --dirs=out/gsm8k_qwen05/train,out/gsm8k_qwen05/eval  # real extractions'
                        # runs, as their split dirs recorded them: time per problem and tokens per second

Each section backs a number in README.md or RESULTS.md (its docstring or comment names it); the other measurements
moved to studies/bench_lab.py.
    python -m studies.bench --only=gpu      # the CUDA path (--device=cuda, the default where a GPU is visible;
                                            # --device=cpu: tiny shapes, a smoke run); --device=cuda alone runs it
    python -m studies.bench --only=gpu_cell # config/gsm8k_1p7b.py's decoding: float16, 256 rows, 1,024 tokens
    python -m studies.bench --only=gpu_refill  # continuous batching against fixed batches (a stand-in EOS)
"""
import copy
import difflib
import json
import os
import resource
import subprocess
import sys
import time
import weakref

import torch

import generator
import machine
import model as M
import tasks
import train as T
from model import Dropout, build_verifier, make_batch, verifier_flops
from store import generated_tokens, split_problems

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repo's root: this file is studies/bench.py
DATA = os.path.join(HERE, '..', 'shared', 'data')


def read_flags(argv, known, name):
    """{key: value} of a command line of --key=value flags and bare --key switches (the benches, which have no knobs):
    an unknown one is refused in one line naming the closest known one, before any work. known: {key: True where it
    takes a value, False for a switch}; name: the command, as a user types it."""
    out, every = {}, ', '.join(f'--{k}' + '=' * v for k, v in known.items())
    for arg in argv:
        key, eq, val = arg[2:].partition('=') if arg.startswith('--') else (arg, '', '')
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.5)
            fix = f"--{close[0]}{eq}{val} (its flags: {every})" if close else f'one of {every}'
            raise SystemExit(f"{name}: unknown flag {arg!r}; fix: {fix}")
        if known[key] != bool(eq):
            raise SystemExit(f"{name}: {arg!r} {'takes a value' if known[key] else 'is a switch'}; fix: "
                             f"--{key}{'=<value>' if known[key] else ''}")
        out[key] = val if eq else True
    return out


def table(rows, header):
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: '| ' + ' | '.join(str(x).ljust(n) for x, n in zip(r, w)) + ' |'
    print('\n'.join([line(header), '|' + '|'.join('-' * (n + 2) for n in w) + '|'] + [line(r) for r in rows]))


def run_sections(sections, only):
    """Run the section named by --only (every section when None), each under its banner (studies/bench_lab.py too)."""
    if only not in (None, *sections):
        raise SystemExit(f"--only={only!r} is unknown; fix: one of {', '.join(sections)}")
    for name, fn in sections.items():
        if only in (None, name):
            print(f'\n=== {name} ===')
            fn()


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
# the extraction loop, before and after (issues 67, 75, 77): the loop of a commit (--before; run from its `git
# archive`) beside this tree's, on the main job's workload and on GSM8K with the embedded Qwen, each against the
# floor its matmuls set at full rows, with the candidates' accuracy and length beside (the same sampling settings
# draw from the same distribution: a change to the loop's arithmetic moves them only within noise)

# The GSM8K workload runs 64 rows; the cell's extraction runs 128 (config/gsm8k_qwen05.py). A py-spy profile of one of
# its running shards (2026-11-29, AMD EPYC, bfloat16): of the decoding thread the model's matmuls 52%, attention 31%
# (its own-column QK and PV matmuls 17%: every row reads the batch's widest row, about twice its own width), rest 17%.
# Rows grouped by width, each group reading its widest row (44912cc, reverted): 0.93x / 0.94x here (RESULTS, Speed).
# The own columns' probabilities copied before their PV matmul (a strided bfloat16 operand's bmm is slower on CPU; the
# same bits): Qwen 1.99x -> 1.93x its floor, 1.03x, SmolLM2 unchanged (2026-11-29, idle AMD EPYC; RESULTS, Speed).
WORKLOADS = {  # name: (model, dataset, problems, samples, max_new_tokens, temperature, top_p, rows)
    'main job: SmolLM2, synth': ('smollm2', 'synth', 128, 8, 64, 0.8, 0.95, 512),
    'GSM8K: Qwen2.5 0.5B': ('qwen05', 'gsm8k', 24, 8, 512, 0.7, 0.9, 64)}
LOOP_DRIVER = """
import json, resource, sys, time, torch
import capture as X, generator as G, tasks
from grading import grade
folder, dtype, dataset, n_prob, n, T, temp, top_p, rows, data = json.loads(sys.argv[1])
torch.set_num_threads(1)
model, tok = G.load_generator(folder, dtype=dtype)
probs = tasks.load_problems(dataset, 0, n_prob - 1, data)
cfg = dict(layers=[-1], max_new_tokens=T, temperature=temp, top_p=top_p, seed=1337, max_steps=100, conf_topk=20,
           system_prompt=tasks.MATH_SYSTEM, enable_thinking=False, step_kinds=['boundary'], batch_size=rows)
counts = []  # the rows of every decoding forward
model.register_forward_pre_hook(lambda m, a, kw: counts.append(kw['input_ids'].shape[0])
                                if kw['input_ids'].shape[1] == 1 else None, with_kwargs=True)
table = X.step_table(tok)
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])  # user + system seconds
t, c = time.perf_counter(), cpu()
if hasattr(X, 'problem_batches'):  # a fixed-batch loop (96203bd): rows // n problems a batch, each to its longest row
    out = [(p, c) for b in X.problem_batches(probs, n, rows)
           for p, cs in zip(b, X.sample_problems(model, tok, b, n, cfg, table)[1]) for c in cs]
else:
    out = [(p, c) for p, _, cs in X.sample_problems(model, tok, probs, n, cfg, table) for c in cs]
t, c = time.perf_counter() - t, cpu() - c
print(json.dumps({'seconds': t, 'cpu': c, 'tokens': sum(len(c['token_ids']) for _, c in out), 'rows': counts,
                  'candidates': len(out),
                  'correct': sum(grade(c['text'], p['gold'], dataset, finish=c['finish'])['correct'] for p, c in out)}))
"""


def before_commit(before=None):
    """The commit whose loop --only=extract runs as 'before': `before` (any name git knows), else where this branch
    left main (git merge-base HEAD main), else HEAD (on main: the committed tree against the working tree). ->
    (its short hash, how it was chosen)."""
    git = lambda *a: subprocess.run(['git', *a], cwd=HERE, capture_output=True, text=True)  # noqa: E731
    if before:
        got = git('rev-parse', '--short', f'{before}^{{commit}}')
        if got.returncode:
            raise SystemExit(f"--before={before!r}: git knows no such commit here; fix: a commit hash, tag or branch "
                             f"(git log --oneline), or leave --before out (where this branch left main)")
        return got.stdout.strip(), f'--before={before}'
    base, head = git('merge-base', 'HEAD', 'main'), git('rev-parse', '--short', 'HEAD').stdout.strip()
    short = git('rev-parse', '--short', base.stdout.strip()).stdout.strip() if not base.returncode else head
    return short, ('HEAD (this branch is main, or no main here)' if short == head else "where this branch left main")


def step_floor(conf, rows, dtype, repeats=3):
    """{r: seconds} one decoding step's matmuls take at r rows (generator.step_seconds: each shape timed with its
    weight in cache), the fastest of `repeats` (others' work on these cores only slows a timing), for r = 1, 2, 4,
    ... and `rows`."""
    grid = sorted({1 << i for i in range(rows.bit_length())} | {rows})
    return {r: min(generator.step_seconds(generator.matmul_shapes(conf), r, dtype) for _ in range(repeats))
            for r in grid}


def floor_at(floor, counts):
    """Seconds the matmuls of decoding forwards of `counts` rows take at step_floor's rates, interpolated linearly
    between its row counts."""
    import bisect
    r = sorted(floor)

    def at(c):
        i = min(max(bisect.bisect_left(r, c), 1), len(r) - 1)
        a, b = r[i - 1], r[i]
        return floor[a] if a == b else floor[a] + (floor[b] - floor[a]) * (c - a) / (b - a)
    return sum(map(at, counts))


def bench_loop(before=None, dtypes=None, repeats=1, workloads=None):
    """python -m studies.bench --only=extract [--before=<commit>] [--dtype=bfloat16,float32] [--repeats=2]: each
    workload sampled by the `before` commit's loop (before_commit; a git archive of it, run as it was) and by this
    tree's, one thread each, in processes of their own, taking turns `repeats` times (the fastest counts), with the
    same model folder, dtype (each of `dtypes`; None: auto's, measured on this machine), prompts and sampling
    settings. Reports generated tokens per second, the ratio to the full-row floor (the tokens at the rate this
    model's matmuls reach at the workload's rows: step_floor) and to the floor at the rows each decoding forward ran
    (floor_at: a stream's last candidates run in few rows, where a token's matmuls cost more), CPU seconds beside the
    wall's (on shared cores the wall counts others' work too), this tree's speed over before's, per-sample accuracy
    (grading.grade) and mean length, and the share of decoding steps that ran below half the rows."""
    import tempfile
    commit, why = before_commit(before)
    old = tempfile.mkdtemp(prefix=f'hsrm_{commit}_')
    subprocess.run(f'git archive {commit} | tar -x -C {old}', shell=True, cwd=HERE, check=True)
    torch.set_num_threads(1)
    rows_out = []
    for name, (model, dataset, n_prob, n, new_tokens, temp, top_p, rows) in (workloads or WORKLOADS).items():
        folder = machine.local_model(model)
        conf = generator.from_pretrained(__import__('transformers').AutoConfig, 'model', folder)
        for dtype in [generator.resolve_dtype(model, d, 'cpu', rows=rows) for d in dtypes or ['auto']]:
            floor = step_floor(conf, rows, getattr(torch, dtype))
            arg = json.dumps([folder, dtype, dataset, n_prob, n, new_tokens, temp, top_p, rows, DATA])
            runs = {}
            for _ in range(repeats):
                for loop, tree in ((f'before ({commit})', old), ('this tree', HERE)):
                    out = subprocess.run([sys.executable, '-c', LOOP_DRIVER, arg], cwd=tree, capture_output=True,
                                         text=True, env={**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONPATH': tree})
                    if out.returncode:
                        raise RuntimeError(out.stderr[-3000:])
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    if loop not in runs or r['seconds'] < runs[loop]['seconds']:
                        runs[loop] = r
            first = None
            for loop, r in runs.items():
                first = first or r
                rows_out.append([name, dtype, f'{n_prob} x {n}', new_tokens, rows, loop, f"{r['tokens']:,}",
                                 f"{r['seconds']:.1f}", f"{r['cpu']:.1f}", f"{r['tokens'] / r['seconds']:.1f}",
                                 f"{r['seconds'] * rows / (r['tokens'] * floor[rows]):.2f}",
                                 f"{r['seconds'] / floor_at(floor, r['rows']):.2f}",
                                 f"{first['seconds'] / first['tokens'] / (r['seconds'] / r['tokens']):.2f}x",
                                 f"{100 * r['correct'] / r['candidates']:.1f}", f"{r['tokens'] / r['candidates']:.1f}",
                                 f"{100 * sum(x < rows / 2 for x in r['rows']) / len(r['rows']):.0f}%"])
    print(f"\nExtraction loops side by side: before = {commit} ({why}), this tree = {HERE}; {machine.cpu_name()[0]}, "
          f"one thread each, torch {torch.__version__}, fastest of {repeats}, load average {os.getloadavg()[0]:.1f} "
          "(others' work on these cores slows the wall, less the CPU seconds). x floor: over the generated tokens at "
          "this model's matmul rate at the workload's full rows (generator.step_seconds, fastest of 3); at its rows: "
          "over every decoding forward's matmuls at the rows it ran; speed: tokens per second over before's; "
          "accuracy: per-sample, grading.grade; rows < half: the share of decoding forwards that ran below half the "
          "rows.")
    table(rows_out, ['workload', 'dtype', 'problems x N', 'max_new', 'rows', 'loop', 'tokens', 's', 'CPU s',
                     'tokens/s', 'x floor', 'x floor at its rows', 'speed', 'accuracy %', 'mean length',
                     'rows < half'])


# -----------------------------------------------------------------------------
# extraction: extract's sampling loop with capture vs plain generate, against this machine's floor (RESULTS.md's
# Speed: 92-110 tok/s one thread, 1.4-1.7x the floor set by SmolLM2's own matmuls), one subprocess per variant so
# that peak memory (max RSS) is each variant's own. Same prompts, N, new tokens and sampling settings for every variant.

REPEATS = 3  # runs of the extract variant per case, the fastest counting: this VM's speed drifts 30% within minutes


def _extract_worker(variant, n_problems, n_samples, max_new_tokens, dataset, temperature=0.8, top_p=0.95, profile=None):
    import capture as X
    torch.set_num_threads(1)
    if variant.endswith(GLIBC_DEFAULT):  # the baseline of --only=alloc: freed memory goes back to the system
        variant = variant.removesuffix(GLIBC_DEFAULT)
        generator.keep_freed_memory = lambda: None  # what load_generator calls
    dtype = {'extract bf16': 'bfloat16', 'extract bfloat16': 'bfloat16',
             'extract float32': 'float32'}.get(variant, 'auto')
    model, tok = generator.load_generator('smollm2', dtype=dtype)
    probs = (tasks.load_problems('gsm8k', 0, n_problems - 1, DATA) if dataset == 'gsm8k'
             else tasks.load_problems('synth', 0, n_problems - 1, synth_level=2))
    prompts = [tasks.build_prompt(tok, p, 'Please reason step by step.' if dataset == 'gsm8k' else None, False)
               for p in probs]
    table = X.step_table(tok)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.manual_seed(0)
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if profile else None
    if prof:
        prof.__enter__()
    t = time.perf_counter()
    if variant.startswith('extract'):
        res = X.sample_with_capture(model, tok, prompts, n_samples, [-1], max_new_tokens, temperature, top_p, seed=0,
                                    table=table)
        n_tok = sum(len(c['token_ids']) for cs in res for c in cs)
        n_steps = sum(len(c['step_pos']) for cs in res for c in cs)
        floor_work = _floor_work(model, tok, prompts, res)
    else:
        enc = tok(prompts, return_tensors='pt', padding=True, padding_side='left', add_special_tokens=False)
        out = model.generate(**enc, do_sample=True, temperature=temperature, top_p=top_p, top_k=0,
                             max_new_tokens=max_new_tokens, num_return_sequences=n_samples,
                             pad_token_id=tok.pad_token_id, output_hidden_states=variant == 'generate+hidden',
                             return_dict_in_generate=True)
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
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    print(json.dumps({'tokens': n_tok, 'seconds': dt, 'peak_mb': peak / 1024, 'delta_mb': (peak - base) / 1024,
                      'faults': faults, 'steps': n_steps, 'floor_work': floor_work, 'prompt_tokens': prompt_tokens}))


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
              'aten::_scaled_dot_product_flash_attention_for_cpu': 'attention',
              'aten::cat': 'KV cache growth / concatenation', 'aten::sort': 'top-p sort',
              'aten::topk': 'top-p prefilter / confidence top-k', 'aten::_softmax': 'softmax',
              'aten::_log_softmax': 'log-softmax', 'aten::copy_': 'copies (cache writes, casts)',
              'aten::mul': 'elementwise', 'aten::multinomial': 'sampling', 'aten::cumsum': 'top-p cumsum',
              'aten::index_put_': 'state ring / cache writes', 'aten::index': 'row selection / table lookups',
              'aten::embedding': 'embedding'}


def _profile_table(prof, wall, top=12):
    """Self CPU time per op, as a share of the profiled wall time."""
    ev = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in ev)
    rows = [[e.key, e.count, f'{e.self_cpu_time_total / 1e6:.2f}', f'{100 * e.self_cpu_time_total / total:.1f}%',
             OP_SOURCES.get(e.key, '')] for e in ev[:top]]
    rows.append(['(all other ops)', sum(e.count for e in ev[top:]),
                 f'{sum(e.self_cpu_time_total for e in ev[top:]) / 1e6:.2f}',
                 f'{100 * sum(e.self_cpu_time_total for e in ev[top:]) / total:.1f}%', ''])
    print(f'profile: {total / 1e6:.2f} s of op self time in {wall:.2f} s wall ({100 * total / 1e6 / wall:.0f}%; the '
          f'rest is Python between ops)')
    table(rows, ['op', 'calls', 'self s', 'share of op time', 'where it comes from'])


def worker(variant, n_problems, n_samples, max_new_tokens, dataset, profile=False):
    """One _extract_worker run in a process of its own on one thread -> its result dict (profile: its op table printed
    first)."""
    out = subprocess.run([sys.executable, '-m', 'studies.bench', '--worker', variant, str(n_problems), str(n_samples),
                          str(max_new_tokens), dataset] + ['--profile'] * profile, capture_output=True, text=True,
                         cwd=HERE, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    lines = out.stdout.strip().splitlines()
    if profile:
        print('\n'.join(lines[:-1]))
    return json.loads(lines[-1])


def bench_extract(profile=False):
    """Embedded model on CPU, one thread: tokens/s and peak memory of the ways to sample, same work for all, against
    the machine's floor (RESULTS.md's Speed numbers). profile: also print a torch.profiler op table of the loop on
    the first case."""
    torch.set_num_threads(1)
    flops, bw = machine_floor()
    mm_streamed, mm_cached = model_matmul_rate()
    rows = []
    # several problems x N (finished rows leave the batch), N samples of one prompt, and a longer limit
    cases = [('synth', 4, 8, 64), ('gsm8k', 1, 32, 128), ('gsm8k', 1, 32, 256)]
    variants = ('generate', 'generate+hidden', 'extract')
    for i, (dataset, n_problems, n_samples, mnt) in enumerate(cases):
        res = {}
        for r in range(REPEATS):  # the fastest run counts: drift slows some runs
            for variant in variants + (('extract bf16',) if i == 0 else ()):  # bf16 weights: to pick the CPU default
                if r and variant != 'extract':
                    continue
                prof = profile and i == 0 and r == 0 and variant.startswith('extract')
                if prof:
                    print(f'\n{variant}, {dataset} {n_problems}x{n_samples}, max_new {mnt}:')
                run = worker(variant, n_problems, n_samples, mnt, dataset, prof)
                best = res.get(variant)
                if best is None or (run and run['seconds'] < best['seconds']):
                    res[variant] = run if best is None else {**run, 'delta_mb': max(run['delta_mb'], best['delta_mb'])}
        g, e, h = res['generate'], res['extract'], res.get('extract bf16')
        # floor of this work: one prefill per prompt, then per decoding step max(FLOPs / matmul rate, bytes /
        # bandwidth): each step reads every weight and the live rows' K/V cache once, and at few rows that
        # read, not the matmuls, bounds it
        prefill, steps = e['floor_work']
        floor_s = prefill / flops + sum(max(f / flops, b / bw) for f, b in steps)
        mm_s = prefill / flops + sum(f / mm_streamed for f, b in steps)  # the same FLOPs at the model's own matmul rate
        rate = lambda r: r['tokens'] / r['seconds']  # noqa: E731
        rows.append([f'{dataset} {n_problems}x{n_samples}', mnt, f"{rate(g):.0f}", f"{rate(e):.0f}",
                     f"{rate(h):.0f}" if h else '-', f"{rate(e) / rate(g):.2f}", f"{e['seconds'] / floor_s:.2f}",
                     f"{e['seconds'] / mm_s:.2f}", f"{g['delta_mb']:.0f}",
                     f"{res['generate+hidden']['delta_mb']:.0f}", f"{e['delta_mb']:.0f}",
                     f"{e['steps'] / max(1, n_problems * n_samples):.1f}"])
    print(f'\nExtraction (SmolLM2-135M, CPU, 1 thread; extract: fastest of {REPEATS} runs; '
          f'machine: {flops / 1e9:.0f} GFLOP/s fp32 matmul, {bw / 1e9:.1f} GB/s '
          'copy; T=0.8, top-p 0.95). tok/s = finished-candidate tokens (up to EOS) per second; floor = prefill FLOPs '
          f'/ matmul rate + per decoding step max(FLOPs / matmul rate, bytes / bandwidth), over the rows alive in the '
          f'extract run. FLOPs count all of them: 2 x matmul weights per token (prefill: lm_head at the last prompt '
          f'token only) + attention (QK^T, AV: 4 x layers x heads x head_dim x each row\'s real context, per token); '
          f'bytes = fp32 weights + the live rows\' K/V cache. MB = peak RSS growth.')
    print("Model-matmul floor: the same FLOPs at the rate SmolLM2's own matmuls reach at 32 rows, "
          f"{mm_streamed / 1e9:.0f} GFLOP/s with every layer's weights streamed from memory as in the loop "
          f"({mm_cached / 1e9:.0f} GFLOP/s when each layer shape's weight stays in cache): what the loop could reach "
          "with no work besides those matmuls.")
    print("bf16 extract tok/s: the same loop with bfloat16 weights (first case only); which one extract.py's "
          "dtype='auto' takes is measured per machine (python -m studies.bench --only=dtype).")
    table(rows, ['work (problems x N)', 'max_new', 'generate tok/s', 'extract tok/s', 'bf16 extract tok/s',
                 'extract/generate', 'extract / floor', 'extract / model-matmul floor', 'generate MB',
                 'generate+hidden MB', 'extract MB', 'steps/cand'])


# -----------------------------------------------------------------------------
# float32 vs bfloat16 weights (README: the dtype the main job ran in): extract.py's dtype='auto' on this CPU, at the
# main job's settings, each dtype against its own floor


def shape_rate(rows, dtype, secs=0.3):
    """FLOP/s of SmolLM2-135M's matmul shapes at `rows` rows and `dtype` (generator.step_seconds: each shape timed
    alone, its weight in cache, weighted by how often one decoding step runs it; the LM head on its first 4,096
    vocabulary rows, counted at full size: emulated bf16 runs the whole head at about 0.1 GFLOP/s)."""
    shapes = generator.matmul_shapes(generator.smollm2_config())
    return sum(2 * rows * o * i * c for o, i, c in shapes) / generator.step_seconds(shapes, rows, dtype, secs=secs)


def bench_dtype(n_problems=64, n_samples=8, max_new_tokens=64, give_up=1.0, repeats=2, profile=False):
    """One batch of the main job (config/demo.py: 64 synthetic level-2 problems x 8 samples, its 512 rows, 64 new
    tokens, T 0.8, top-p 0.95) through extract's loop in each dtype generator.CPU_KEPT holds, one process on one
    thread as each of extract.py's processes runs, the runs interleaved, the fastest of `repeats` counted (profile:
    first an op table of a run in auto's dtype, not counted: the profiler slows it). Each
    against its own floor: the batch's FLOPs (_floor_work) over SmolLM2's matmul shapes' rate at that dtype
    (shape_rate), and per decoding step the weights and K/V cache read at the copy bandwidth. A dtype whose floor
    alone is over `give_up` x float32's measured run is not run (it cannot beat float32; where the CPU emulates it,
    its runs would take many minutes), and its floor says why. Then what dtype='auto' picks on this machine (its
    cached measurement), against the fastest run here."""
    kinds = list(generator.CPU_KEPT)
    torch.set_num_threads(1)
    _, bw = machine_floor()
    auto = generator.measured_cpu_dtype(generator.smollm2_config(), log=lambda line: None)
    rates = {dt: shape_rate(n_problems * n_samples, getattr(torch, dt)) for dt in kinds}
    runs, skipped = {}, {}
    if profile:
        print(f'{auto}, {n_problems} x {n_samples}, profiled (a run of its own):')
        worker(f'extract {auto}', n_problems, n_samples, max_new_tokens, 'synth', profile=True)
    for r in range(repeats):
        for dt in kinds:
            if dt in skipped:
                continue
            if dt != 'float32' and r == 0:  # the same work as float32's run; its bytes shrink with the weights' size
                prefill, steps = runs['float32']['floor_work']
                shrink = getattr(torch, dt).itemsize / 4
                floor = prefill / rates[dt] + sum(max(f / rates[dt], b * shrink / bw) for f, b in steps)
                if floor > give_up * runs['float32']['seconds']:
                    skipped[dt] = floor
                    continue
            run = worker(f'extract {dt}', n_problems, n_samples, max_new_tokens, 'synth')
            if dt not in runs or run['seconds'] < runs[dt]['seconds']:
                runs[dt] = run
    rows = []
    for dt in kinds:
        if dt in skipped:
            rows.append([dt, f'{rates[dt] / 1e9:.1f}', 'not run', f'{skipped[dt]:.0f}', '-',
                         f"its floor alone is {skipped[dt] / runs['float32']['seconds']:.0f}x float32's run", '-'])
            continue
        run = runs[dt]
        prefill, steps = run['floor_work']  # bytes at this run's dtype already
        floor = prefill / rates[dt] + sum(max(f / rates[dt], b / bw) for f, b in steps)
        rows.append([dt + ' (auto)' * (dt == auto), f'{rates[dt] / 1e9:.1f}', f"{run['seconds']:.1f}", f'{floor:.1f}',
                     f"{n_problems * n_samples / run['seconds']:.1f}", f"{run['seconds'] / floor:.2f}x",
                     f"{runs['float32']['seconds'] / run['seconds']:.2f}x"])
    best = min(runs, key=lambda d: runs[d]['seconds'])
    print(f"Weights' dtype on the main job's batch ({n_problems} problems x {n_samples} samples, {max_new_tokens} new "
          f"tokens, T 0.8, top-p 0.95), one process on one thread, fastest of {repeats}; {machine.cpu_name()[0]}, "
          f"copy bandwidth {bw / 1e9:.1f} GB/s. int8 is not among them: no recipe kept the generator's quality "
          f"(RESULTS.md). dtype='auto' picks {auto} here; the fastest run here is {best}"
          + (f", {runs[auto]['seconds'] / runs[best]['seconds'] - 1:.0%} slower than it" if auto != best else '')
          + '.')
    table(rows, ['weights', 'matmul GFLOP/s', 'seconds', 'floor s', 'candidates/s', 'vs its floor', 'speed vs float32'])


GLIBC_DEFAULT = ' (glibc default)'


def bench_alloc(n_problems=64, n_samples=8, max_new_tokens=64, repeats=2):
    """machine.keep_freed_memory against glibc's default on one batch of the main job (bench_dtype's work, in the
    dtype auto picks here), one process on one thread each, the runs interleaved, the fastest of `repeats`: seconds,
    page faults (minor: a page first touched) and peak memory."""
    auto = generator.measured_cpu_dtype(generator.smollm2_config(), log=lambda line: None)
    runs = {}
    for r in range(repeats):
        for v in (GLIBC_DEFAULT, ''):
            run = worker(f'extract {auto}{v}', n_problems, n_samples, max_new_tokens, 'synth')
            if v not in runs or run['seconds'] < runs[v]['seconds']:
                runs[v] = run
    rows = [[name, f"{runs[v]['seconds']:.1f}", f"{runs[v]['faults'] / 1e6:.2f}M", f"{runs[v]['peak_mb']:,.0f}",
             f"{runs[GLIBC_DEFAULT]['seconds'] / runs[v]['seconds']:.2f}x"]
            for v, name in ((GLIBC_DEFAULT, "glibc's default (large blocks mmapped, unmapped when freed)"),
                            ('', 'machine.keep_freed_memory (freed blocks reused)'))]
    print(f"Freed memory on the main job's batch ({n_problems} problems x {n_samples} samples, {max_new_tokens} new "
          f"tokens, {auto}), one process on one thread, fastest of {repeats}; {machine.cpu_name()[0]}.")
    table(rows, ['malloc', 'seconds', 'page faults', 'peak MB', 'speed'])


def sample_quality(per_problem, ref, n_boot=2000, seed=0):
    """Per-sample accuracy and pass@N of each of per_problem {name: [[correct] per candidate] per problem} (the same
    problems in the same order), each against `ref`'s: (value, paired difference and its 95% interval over
    problems)."""
    import numpy as np
    from bestofn import boot_draws, ci
    rows = []
    for name, per in per_problem.items():
        out = [name]
        for f in (lambda c: float(np.mean(c)), lambda c: float(any(c))):
            v, r = np.array([f(c) for c in per]), np.array([f(c) for c in per_problem[ref]])
            idx = boot_draws(len(v), n_boot, seed)
            lo, hi = ci(v[idx].mean(1) - r[idx].mean(1))
            out += [f'{100 * v.mean():.1f}', '-' if name == ref else f'{100 * (v - r).mean():+.1f} '
                    f'[{100 * lo:+.1f}, {100 * hi:+.1f}]']
        rows.append(out)
    return rows


def bench_quality(dirs=None):
    """Does a faster dtype keep the generator? Labelled extractions of the same problems with the same sampling
    (extract.py + label.py, one per dtype; the first is the reference): per-sample accuracy and pass@N, each with
    its paired difference to the reference. RESULTS.md (Speed, "The dtype") has the commands."""
    from store import load_split
    dirs = dirs or ['out/dtype/float32/eval', 'out/demo/eval']
    if not all(os.path.isfile(os.path.join(d, 'labels.json')) for d in dirs):
        print(f"--dirs={','.join(dirs)}: not all extracted and labelled; fix: the commands in RESULTS.md")
        return
    splits = {d: load_split(d) for d in dirs}
    keys = [p['key'] for p in splits[dirs[0]]]
    for d, ps in splits.items():
        if [p['key'] for p in ps] != keys:
            raise SystemExit(f"{d} holds other problems than {dirs[0]}; fix: extract the same range into both")
    per = {f"{d} ({json.load(open(os.path.join(d, 'config.json')))['weights_dtype']})":
           [[c['correct'] for c in p['candidates']] for p in ps] for d, ps in splits.items()}
    print(f"{len(keys)} problems; per-sample accuracy and pass@N (%), paired difference to {dirs[0]} [95% interval "
          f"over problems]")
    table(sample_quality(per, next(iter(per))), ['extraction', 'per-sample accuracy', 'Δ', 'pass@N', 'Δ'])


def bench_int8(n_problems=64, n_samples=8, max_new_tokens=64):
    """int8 that keeps the generator? torch's dynamic int8 quantisation (quantize_dynamic: int8 weights per output
    channel, activations per tensor at run time) on every Linear but the LM head, against float32 and bfloat16 on
    the main job's first n_problems training problems x n_samples (its sampling, one thread, the same seeds): speed
    and per-sample accuracy / pass@N with paired intervals. torch.ao.quantization announces its own removal (for
    torchao); it is used here because it is in torch already, for a measurement, and kept out of dtype='auto'."""
    import warnings

    import capture as X
    import extract
    from grading import grade
    torch.set_num_threads(1)
    cfg = {**extract.DEFAULTS, 'max_new_tokens': max_new_tokens, 'temperature': 0.8, 'top_p': 0.95}
    probs = tasks.load_problems('synth', 0, n_problems - 1, synth_level=2)
    per, rows = {}, []
    for kind in ('float32', 'bfloat16', 'int8'):
        model, tok = generator.load_generator('smollm2', dtype='bfloat16' if kind == 'bfloat16' else 'float32')
        if kind == 'int8':
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                Q = torch.ao.quantization
                spec = {name: Q.per_channel_dynamic_qconfig for name, m in model.named_modules()
                        if isinstance(m, torch.nn.Linear) and m is not model.get_output_embeddings()}
                model = Q.quantize_dynamic(model, spec, dtype=torch.qint8)
        table_, t, per[kind], n_tok = X.step_table(tok), time.perf_counter(), [], 0
        got = {p['index']: (p, cs) for p, _, cs in X.sample_problems(model, tok, probs, n_samples, cfg, table_)}
        for i in sorted(got):
            p, cs = got[i]
            per[kind].append([grade(c['text'], p['gold'], 'synth', finish=c['finish'])['correct'] for c in cs])
            n_tok += sum(len(c['token_ids']) for c in cs)
        rows.append([kind, f'{n_tok / (time.perf_counter() - t):.0f}'])
    q = sample_quality(per, 'float32')
    print(f"int8 against float32 and bfloat16: the main job's training problems 0-{n_problems - 1} x {n_samples}, "
          f"T 0.8, top-p 0.95, {max_new_tokens} new tokens, one thread, {machine.cpu_name()[0]}; paired "
          f"differences to float32 [95% interval over problems]")
    table([r + x[1:] for r, x in zip(rows, q)], ['weights', 'tokens/s', 'per-sample accuracy (%)', 'Δ', 'pass@N (%)',
                                                  'Δ'])


# -----------------------------------------------------------------------------
# training (README: what one thread and the fused optimizer cost): the main job's verifiers' training step on one
# thread (as train.train runs it: reproducible) against torch's threads, and AdamW fused against foreach


def torch_dropout(module):
    """module with each model.Dropout swapped for torch's nn.Dropout (a float drawn per element by bernoulli_)."""
    for name, child in module.named_children():
        setattr(module, name, torch.nn.Dropout(child.p) if isinstance(child, Dropout) else torch_dropout(child))
    return module


def level2_problems(n_problems=96, n_cands=8, d_gen=576, seed=0):
    """Problems shaped as the main job's (synthetic level 2, SmolLM2): texts in its answers' form ('Step 1: 4 + 2 =
    6.' lines, 'The answer is 6.'), one step for 18%, two for 82%, 9% with a longer last line, 0.5% rambling on (15 /
    25 / 27 / 43 GPT-2 tokens: a fifth of a 64-candidate batch's positions padding, as in the main job's), a state per
    line, d_gen 576."""
    g = torch.Generator().manual_seed(seed)
    probs = []
    for i in range(n_problems):
        cands = []
        for j in range(n_cands):
            u, a = torch.rand(1, generator=g).item(), torch.randint(1, 9, (4,), generator=g).tolist()
            lines = [f'Step 1: {a[0]} + {a[1]} = {a[0] + a[1]}.'] + (
                [] if u < 0.18 else [f'Step 2: {a[0] + a[1]} - {a[2]} = {a[0] + a[1] - a[2]}.'])
            if u > 0.995:  # rambling on
                lines.append(f'To add {a[0]} + {a[3]}, you simply add them: {a[0]} + {a[3]} = {a[0] + a[3]}.')
            lines.append(f"{'So the answer is still' if u > 0.91 else 'The answer is'} {a[0] + a[1]}.")
            S, T_ = len(lines), 11 * len(lines) + 4  # generator tokens: ~11 a line
            cands.append({'states': torch.randn(S, d_gen, generator=g).half(),
                          'token_ids': torch.randint(10, 5000, (T_,), generator=g), 'text': '\n'.join(lines),
                          'step_pos': torch.arange(1, S + 1) * T_ // S - 1, 'logprobs': -torch.rand(T_, generator=g),
                          'entropies': torch.rand(T_, generator=g), 'finish': 'eos', 'correct': j % 2 == 0})
        probs.append({'key': f'{i:06d}', 'index': i, 'dataset': 'gsm8k', 'id': str(i), 'question': str(i),
                      'layers': [-1], 'candidates': cands})
    return probs


def bench_train(train_dir=None, steps=20, ab_steps=3, rounds=3):
    """HSRM and the small text verifier at the main job's shapes (level2_problems: 8 problems x 8 candidates a batch;
    train_dir: a labelled split of its own instead, e.g. out/demo/train, cut as train.py cuts it), steps per second
    through train.train on one thread and through its undecorated body on torch's threads; the text verifier's token
    table as its used rows (train.UsedRows) against the whole table in AdamW; one thread under bfloat16 autocast
    (issue 42: faster only where the CPU has bf16 matmuls, avx512_bf16 / AMX; measured, not assumed); and the AdamW
    step alone on each verifier's parameters. Then bench_train_changes: each change of issue 67 against the path
    before it, side by side."""
    if train_dir:
        tr, va = split_problems(T.load_train_data([train_dir])[0], T.DEFAULTS['val_frac'], T.DEFAULTS['val_seed'])
    else:
        probs = level2_problems()
        tr, va = probs[:72], probs[72:]
    n_cands, d_gen = len(tr[0]['candidates']), tr[0]['candidates'][0]['states'].shape[1]
    rows, n_threads = [], torch.get_num_threads()
    for verifier in ('hsrm', 'text'):
        cfg = dict(verifier=verifier, max_iters=steps, eval_interval=10 ** 9, seed=0, early_stop_metric='acc')
        rate = {}
        for how, fn in (('one thread', T.train), (f'{n_threads} threads', T.train.__wrapped__)):
            _, log = fn(tr, va, cfg)
            rate[how] = steps / log['step_time_s']
        if verifier == 'text':  # its token table stepped as the rows its texts use (train.UsedRows) against all of it
            rate['whole table'] = steps / T.train(tr, va, {**cfg, 'used_rows': False})[1]['step_time_s']
        model = T.build_model(tr, {**T.DEFAULTS, **cfg})
        # a training step's forward, backward and AdamW on one batch, float32 against bfloat16 autocast, one thread
        cands = [c for p in tr[:8] for c in p['candidates']]
        batch = make_batch(cands, model.spec)
        step_s = {}
        threads_before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for how in ('float32', 'bf16', 'torch dropout'):
                m = torch_dropout(copy.deepcopy(model)) if how == 'torch dropout' else model
                opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
                for i in range(ab_steps + 1):  # one warm-up step; emulated bf16 is slow: few steps
                    if i == 1:
                        t = time.perf_counter()
                    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=how == 'bf16'):
                        loss = m.train()(batch).float().square().mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                step_s[how] = (time.perf_counter() - t) / ab_steps
        finally:
            torch.set_num_threads(threads_before)
        opt_s = {}
        for fused in (False, True):
            ps = [p for p in model.parameters()]
            for p in ps:
                p.grad = torch.randn_like(p)
            opt = torch.optim.AdamW(ps, lr=1e-4, fused=fused)
            opt.step()
            t = time.perf_counter()
            for _ in range(10):
                opt.step()
            opt_s[fused] = (time.perf_counter() - t) / 10
        n_par = sum(p.numel() for p in model.parameters())
        rows.append([verifier, f'{n_par / 1e6:.2f}M', f"{rate['one thread']:.1f}",
                     f"{rate[f'{n_threads} threads']:.1f}", f"{rate[f'{n_threads} threads'] / rate['one thread']:.2f}x",
                     f"{rate['one thread'] / rate['whole table']:.2f}x" if 'whole table' in rate else '–',
                     f"{step_s['float32'] / step_s['bf16']:.2f}x",
                     f"{step_s['torch dropout'] / step_s['float32']:.2f}x", f'{1e3 * opt_s[False]:.1f}',
                     f'{1e3 * opt_s[True]:.1f}', f'{opt_s[False] / opt_s[True]:.1f}x'])
    print(f"training steps per second (8 problems x {n_cands} candidates, d_gen {d_gen}); bf16 autocast on this CPU "
          f"({machine.cpu_name()[0]}); load average "
          f"{os.getloadavg()[0]:.1f} (other work on these cores slows every number)")
    table(rows, ['verifier', 'params', 'steps/s, one thread (train.train)', f'steps/s, {n_threads} threads',
                 'threads / one', 'used rows / whole token table, one thread',
                 'one step: bf16 autocast speed / float32, one thread',
                 "one step: model.Dropout's speed / torch's nn.Dropout, one thread",
                 'AdamW foreach ms', 'AdamW fused ms', 'fused speed-up'])
    bench_train_changes(tr, va, rounds=rounds)


@machine.one_thread  # as train.py trains it
def bench_text_groups(train_dir=None, groups=(1, 2, 4, 8), batches=3, rounds=3):
    """The small text verifier's attention in length groups (model.ATTN_GROUPS: 8 its default; 1 the batch padded to
    its longest row, as before; rows of at most d positions are never grouped): a training step (forward, backward,
    AdamW) on one thread, as train.py runs it, on the same `batches` batches of 8 problems of a labelled split
    (train_dir, e.g. out/gsm8k_qwen05/train: the GSM8K cell's texts, 50-512 tokens; default level2_problems, the
    main job's shapes), each setting in turn `rounds` times (their sums compared: this shared CPU's speed drifts);
    floor: 3 x the forward matmul FLOPs at each row's own length (model.verifier_flops) over this machine's fp32
    matmul rate on one thread (machine_floor, now)."""
    probs = T.load_train_data([train_dir])[0] if train_dir else level2_problems()
    pool = [p for p in probs if T.is_mixed(p)]
    cfg = {**T.DEFAULTS, 'verifier': 'text', 'text_size': 'small'}
    torch.manual_seed(0)
    model = T.build_model(pool, cfg)
    bp = cfg['batch_problems']
    cands = [[c for p in pool[i * bp:(i + 1) * bp] for c in p['candidates']] for i in range(batches)]
    data = [make_batch(cs, model.spec) for cs in cands]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    default = M.ATTN_GROUPS
    try:
        rate = machine_floor()[0]
        spent = dict.fromkeys(groups, 0.0)
        for r in range(rounds + 1):  # round 0 warms up
            for g in groups:
                M.ATTN_GROUPS = g
                t = time.perf_counter()
                for b in data:
                    loss = model.train()(b).square().mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                spent[g] += (time.perf_counter() - t) * (r > 0)
    finally:
        M.ATTN_GROUPS = default
    floor = sum(3 * verifier_flops(model, *M.input_lengths(c, model.spec)) for cs in cands for c in cs) / rate
    lengths = [M.input_lengths(c, model.spec)[1] for cs in cands for c in cs]
    print(f"the small text verifier's training step in length groups, one thread, {batches} batches of {bp} problems "
          f"({len(lengths) // batches} texts a batch, {min(lengths)}-{max(lengths)} tokens, mean "
          f"{sum(lengths) / len(lengths):.0f}; {train_dir or 'level2_problems'}), {rounds} rounds in turn; floor: "
          f"{rate / 1e9:.1f} GFLOP/s (fp32, one thread, now); {machine.cpu_name()[0]}, load average "
          f"{os.getloadavg()[0]:.1f}")
    table([[g, f'{1e3 * spent[g] / rounds / batches:.0f}', f'{spent[groups[0]] / spent[g]:.2f}x',
            f'{spent[g] / rounds / floor:.2f}x'] for g in groups],
          ['length groups', 'step ms', f'speed-up over {groups[0]}', 'step / floor'])


# issue 67's changes to the verifiers' training and scoring, each as (what, {(owner, name): the value before it}):
# bench_train_changes runs the path before every change, then after each in turn (the values it names put back)


def torch_padded(encoder, z, mask):
    """The encoder before issue 67: torch's own layers (nn.TransformerEncoder, holding model.Encoder's Parameters: they
    train as one) over the padded batch z [B,S,d] (when scoring, through torch's nested-tensor fast path, as it was
    enabled then), then the masked mean."""
    if encoder not in TORCH_LAYERS:
        blk = encoder.layers[0]
        d, h, p = blk.linear1.in_features, blk.self_attn.n_head, blk.dropout.p
        layer = torch.nn.TransformerEncoderLayer(d, h, 4 * d, p, batch_first=True, norm_first=blk.norm_first)
        layer.dropout, layer.dropout1, layer.dropout2 = Dropout(p), Dropout(p), Dropout(p)
        ref = torch.nn.TransformerEncoder(layer, len(encoder.layers), enable_nested_tensor=False)
        ref.load_state_dict(encoder.state_dict(keep_vars=True), assign=True)  # the same names: the same Parameters
        ref.use_nested_tensor = h % 2 == 0
        TORCH_LAYERS[encoder] = ref
    ref = TORCH_LAYERS[encoder].train(encoder.training)
    return M._masked_mean(ref(z, src_key_padding_mask=~mask), mask)


TORCH_LAYERS = weakref.WeakKeyDictionary()  # model.Encoder -> torch's layers on its Parameters


CHANGES = [
    ('the encoders on the real positions only (model.Encoder)', {
        (M.HSRM, 'pooled'): lambda self, b: torch_padded(self.encoder, self.proj(b['states']), b['step_mask']),
        (M.TextVerifier, 'pooled'): lambda self, b: torch_padded(
            self.encoder, self.drop(self.tok(b['tokens']) + self.pos(torch.arange(b['tokens'].shape[1]))),
            b['token_mask'])}),
]


def bench_train_changes(tr, va, steps=20, rounds=3):
    """Each change of CHANGES against the path before it, side by side: a training step of train.train (one thread)
    and a validation (model.score_problems on va, as train.val_metrics scores it), each variant run in turn `rounds`
    times (their sums compared: this shared CPU's speed drifts), and each against its floor: the matmul FLOPs
    (model.verifier_flops of every candidate at its own length; a step's backward twice its forward, less the HSRM
    projection's input gradient) over this machine's fp32 matmul rate on one thread (machine_floor, measured now)."""
    import warnings
    warnings.filterwarnings('ignore', message='The PyTorch API of nested tensors')  # the path before: its fast path
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rate = machine_floor()[0]
    finally:
        torch.set_num_threads(threads_before)
    saved = {k: getattr(*k) for _, patch in CHANGES for k in patch}
    rows = []
    for verifier in ('hsrm', 'text'):
        cfg = dict(verifier=verifier, max_iters=steps, eval_interval=10 ** 9, seed=0, early_stop_metric='acc')
        spent = [[0.0, 0.0] for _ in range(len(CHANGES) + 1)]  # [step s, validation s] after the first i changes
        for _ in range(rounds):
            for i, sums in enumerate(spent):
                for k in saved:  # the values before the changes from the i-th on
                    setattr(*k, next((p[k] for _, p in CHANGES[i:] if k in p), saved[k]))
                try:
                    model, log = T.train(tr, va, cfg)
                    t = time.perf_counter()
                    M.score_problems(model, va, T.DEFAULTS['eval_batch_size'])
                    sums[0] += log['step_time_s'] / steps
                    sums[1] += time.perf_counter() - t
                finally:
                    for k, v in saved.items():
                        setattr(*k, v)
        pool = [c for p in tr if T.is_mixed(p) for c in p['candidates']]  # what the pairwise loss trains on
        fwd = lambda cs: sum(M.verifier_flops(model, *M.input_lengths(c, model.spec)) for c in cs)  # noqa: E731
        proj = sum(2 * M.input_lengths(c, model.spec)[0] * model.proj.weight.numel() for c in pool) \
            if verifier == 'hsrm' else 0
        batch = T.DEFAULTS['batch_problems'] * len(tr[0]['candidates'])
        floor = ((3 * fwd(pool) - proj) / len(pool) * batch / rate, fwd(c for p in va for c in p['candidates']) / rate)
        step0, val0 = spent[0]
        for i, (step, val) in enumerate(spent):
            step, val = step / rounds, val / rounds
            rows.append([verifier, 'before issue 67' if i == 0 else f'+ {CHANGES[i - 1][0]}', f'{1e3 * step:.1f}',
                         f'{step0 / rounds / step:.2f}x', f'{step / floor[0]:.2f}x', f'{1e3 * val:.0f}',
                         f'{val0 / rounds / val:.2f}x', f'{val / floor[1]:.2f}x'])
    n_val = sum(len(p['candidates']) for p in va)
    print(f"\nissue 67, each change against the path before it ({rounds} rounds in turn): a training step ({steps} "
          f"steps of train.train) and a validation ({n_val} candidates), one thread; floor: matmul FLOPs over "
          f"{rate / 1e9:.1f} GFLOP/s (fp32, one thread, measured now); {machine.cpu_name()[0]}, load average "
          f"{os.getloadavg()[0]:.1f}")
    table(rows, ['verifier', 'path', 'step ms', 'speed-up', 'step / floor', 'validation ms', 'speed-up',
                 'validation / floor'])


# -----------------------------------------------------------------------------
# search: the sampler steered by beam search / DVTS against plain sampling of the same N, on the same problems.
# Cost per generated token includes what search adds: idle rows (a row that closed a step waits for its group
# in the batch), the copies of KV-cache rows at each branch, and the verifier's scoring.

SHOP_CKPT = os.path.join(HERE, 'out', 'words_shop', 'verifiers', 'hsrm_seed42', 'ckpt.pt')


def bench_search(ckpt=SHOP_CKPT, n_problems=16, n_samples=8, width=4, max_new_tokens=128):
    """SmolLM2 on 16 'shop' word problems (config/search_shop.py's, T=0.8, top-p 0.95), one thread: plain sampling
    of N = 8 vs beam search and DVTS (M = 4) steered by a trained HSRM (the search result at c75fdeb's RESULTS.md: beam
    0.92x and DVTS 0.90x plain sampling's time per generated token). Seconds per generated token, the share of
    row-steps spent idle, the verifier's share of the time, and its FLOPs against the generator's."""
    import capture as X
    from store import load_checkpoint
    from studies.policy import Steering, _Batch
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
    score, spent, vflops, rowsteps = _Batch.score, [0.0], [0.0], [0]

    def timed(self, ring, count, b, width, fring=None):  # the verifier's scoring in the steered run; FLOPs per prefix
        t = time.perf_counter()
        out = score(self, ring, count, b, width, fring)
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
        _Batch.score, model.forward = timed, counted
        spent[0] = vflops[0] = rowsteps[0] = 0
        t = time.perf_counter()
        res = X.sample_with_capture(model, tok, prompts, n_samples, [-1], max_new_tokens, 0.8, 0.95, seed=0,
                                    table=table_, steer=Steering(verifier, how, width=width) if how else None)
        secs = time.perf_counter() - t
        _Batch.score, model.forward = score, forward
        gen = sum(generated_tokens(cs) for cs in res)
        gflops = 2 * n_params * gen  # the generator's weights, per generated token (attention not counted)
        rows.append([how or 'plain sampling', gen, f'{secs:.1f}', f'{1e3 * secs / gen:.2f}',
                     f'{gen / max(rowsteps[0], 1):.3f}', f'{100 * spent[0] / secs:.1f}%',
                     f'{100 * vflops[0] / gflops:.3f}%', sum(c.get('parent') is not None for cs in res for c in cs)])
    base = float(rows[0][3])
    for r in rows:
        r.insert(4, f'{float(r[3]) / base:.2f}')
    print(f"{n_problems} shop problems x N = {n_samples}, M = {width}, max_new {max_new_tokens}, one thread, "
          f"checkpoint {os.path.relpath(ckpt, HERE)}; generator {n_params / 1e6:.0f}M parameters")
    table(rows, ['run', 'generated tokens', 'seconds', 'ms / token', 'vs plain',
                 'generated tokens / decode forwards (1 = all counted)', 'verifier time', 'verifier / generator FLOPs',
                 'branches'])

# -----------------------------------------------------------------------------
# using a trained verifier (sample.py): what scoring a question's N candidates adds to generating them. The
# candidates' states are captured while they are sampled, so the verifier's cost is one small forward per candidate.


def bench_sample(ckpt=None, n_questions=16, n=8, alone=4):
    """SmolLM2 on the demo's evaluation questions (synthetic level 2 and the demo's sampling settings, from the
    checkpoint's training extraction), one thread: sample.py's best_of_n with the demo run's best HSRM seed. Seconds
    per question generating and verifying, questions asked one at a time (N rows per forward) and 16 per batch
    (sample.py's 128 rows), and the verifier's FLOPs against the generator's on the generated tokens."""
    import sample as SA
    try:
        path = SA.best_ckpt(ckpt or os.path.join(HERE, 'out', 'demo', 'verifiers', 'hsrm*_seed*', 'ckpt.pt'))
    except ValueError:
        raise SystemExit("no checkpoint of the demo run; fix: run the main job (README) first, or pass "
                         "--ckpt=<ckpt.pt>")
    torch.set_num_threads(1)
    verifier = SA.load_verifier(path)[0]
    s = SA.resolve({}, verifier.trained_on)
    model, tok = generator.load_generator(s['model'])
    n_params = sum(p.numel() for p in model.parameters())
    probs = tasks.load_problems(s['dataset'], 1000, 1000 + n_questions - 1, synth_level=s['synth_level'],
                                word_family=s['word_family'], word_split=s['word_split'])
    SA.best_of_n(model, tok, verifier, probs[:1], n, s)  # warm-up: first calls allocate
    rows = []
    for how, picks in ((f'one at a time ({n} rows per forward)', [p for q in probs[:alone] for p in
                                                                    SA.best_of_n(model, tok, verifier, [q], n, s)]),
                       (f'{128 // n} per batch (128 rows)',
                        SA.best_of_n(model, tok, verifier, probs, n, s, batch_size=128))):
        gen, ver = (sum(p['seconds'][k] for p in picks) / len(picks) for k in ('generate', 'verify'))
        cands = [c for p in picks for c in p['candidates']]
        vflops = sum(verifier_flops(verifier, len(c['states']), 0) for c in cands)
        gflops = 2 * n_params * sum(len(c['token_ids']) for c in cands)  # the generator's weights per generated token
        rows.append([how, len(picks), f'{gen:.2f}', f'{1e3 * ver:.1f}', f'{100 * ver / gen:.2f}%',
                     f'{100 * vflops / gflops:.3f}%'])
    print(f"sample.py's best_of_n, best of {n}, SmolLM2 ({n_params / 1e6:.0f}M) on {s['dataset']} questions, max_new "
          f"{s['max_new_tokens']}, one thread; verifier {os.path.relpath(path, HERE)}")
    table(rows, ['questions asked', 'questions', 'generate s / question', 'verify ms / question',
                 'verify / generate (time)', 'verifier / generator FLOPs'])

# -----------------------------------------------------------------------------
# extraction on every core: extract.py end to end (model load included, as a user waits for it) with today's
# path before `procs` (one process, torch's threads), one 1-thread process pinned to one core, and the default
# (one 1-thread process per core, each its own shard), at three batch sizes. Per-batch seeds: at one batch size
# every path writes the same candidates; another batch size draws other candidates (the same distribution).


def bench_procs(n_problems=64, n_samples=8, max_new_tokens=64, batches=(64, 128, 256)):
    """The 'Extraction on every core' table (RESULTS.md at 5472473): candidates per second of one process with
    torch's threads, one 1-thread process, and extract.py's default (a pinned 1-thread process per core) at each
    batch size."""
    import tempfile
    from machine import cpu_cores
    cores = cpu_cores()
    paths = {'one process, torch threads (before procs)': (['--procs=1', '--threads=0'], None),
             'one 1-thread process, pinned': (['--procs=1', '--threads=1'], {cores[0]}),
             f'default: {len(cores)} processes x 1 thread': (['--procs=0'], None)}
    rows, rate = [], {}
    for b in batches:
        for name, (flags, pin) in paths.items():
            out = tempfile.mkdtemp()
            cmd = [sys.executable, os.path.join(HERE, 'extract.py'), 'config/demo.py',
                   f'--train_range=(0,{n_problems - 1})', '--eval_range=None', f'--n_train_samples={n_samples}',
                   f'--max_new_tokens={max_new_tokens}', f'--batch_size={b}', f'--out_dir={out}', *flags]
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
    print(f"extract.py on config/demo.py's task (SmolLM2-135M, synthetic level 2), {n_problems} problems x "
          f"{n_samples}, max_new {max_new_tokens}, model load included; {len(cores)} cores. Ideal = {len(cores)} x one "
          f"1-thread process at that batch (linear scaling, the floor of splitting whole batches over the cores).")
    table(rows, ['rows per forward', 'path', 'candidates / s', 'vs before procs at 64 rows', 'vs one 1-thread process',
                 'vs ideal'])


# -----------------------------------------------------------------------------
# memory: the paper cells against one 80 GB GPU, from the memory model alone (machine.py; no GPU, no weights)


def bench_memory():
    """README's memory per cell on one 80 GB GPU. Per paper cell (and the thinking ablation on math500_1p7b): the rows
    each split runs per forward at the cell's batch_size, what the memory model says they allocate, and the budget of
    one 80 GB GPU after the float16 weights; prompts at tasks.PROMPT_TOKENS. The cells' batch_size is fit_batch_size's
    answer (a test keeps them equal)."""
    import glob
    import extract
    from configurator import apply_config
    cfgs = [[f] for f in sorted(glob.glob(os.path.join(HERE, 'config', '*.py')))
            if os.path.basename(f).split('_')[0] in tasks.PROMPT_TOKENS and 'smollm' not in f]
    cfgs.append([os.path.join(HERE, 'config', 'math500_1p7b.py'), os.path.join(HERE, 'config', 'think_full.py')])
    rows = []
    for files in cfgs:
        c = apply_config(dict(extract.DEFAULTS), files, extract.DEFAULTS)
        mc, dt = machine.paper_config(c['model']), torch.float16
        w = 2 * machine.n_params(mc)
        room = machine.budget(machine.CARD_80GB - w)
        p = tasks.PROMPT_TOKENS[c['dataset']]
        need = []
        for n in (c['n_train_samples'], c['n_eval_samples']):
            r = max(1, c['batch_size'] // n) * n
            need.append((r, machine.decode_bytes(mc, dt, r, p, c['max_new_tokens'], n, len(c['layers']),
                                                   c['max_steps'])))
        rows.append([' + '.join(os.path.basename(f)[:-3] for f in files), c['batch_size'],
                     f"{machine.kv_bytes_per_token(mc, dt) // 1024}", p + c['max_new_tokens'] + 1,
                     *[f'{r} / {b / 2 ** 30:.1f}' for r, b in need], f'{w / 2 ** 30:.1f}', f'{room / 2 ** 30:.1f}',
                     f'{max(b for _, b in need) / room:.2f}'])
    print(f"One 80 GB GPU: {machine.CARD_80GB / 2 ** 30:.0f} GiB free before the weights, {machine.HEADROOM:.0%} "
          f"of what is left kept back; float16; at most {machine.MAX_ROWS} rows per forward. Need = KV cache at "
          f"capacity + per-row buffers + logits temporaries + prefill (machine.decode_bytes).")
    table(rows, ['cell', 'batch_size', 'KV KiB / row / position', 'capacity (positions)', 'train rows / GiB',
                 'eval rows / GiB', 'weights GiB', 'budget GiB', 'largest need / budget'])

# -----------------------------------------------------------------------------
# the table from the pools (issue 76: `python pools.py <pools dir>`, then tables.py's, in seconds): TABLES_BEFORE's
# rules, a Python call per problem for every vote and best-of-N (a git archive of that commit, run as it was), against
# this tree's, batched over problems; the same pools folder, one process each, interleaved; the two must print the
# same cells where both print one (table_cells).

TABLES_BEFORE = '7a4c546'  # the last commit with a call per problem (bestofn.vote_sub) for every vote


def main_job_pools(out, seed=0):
    """A pools folder of the main job's shape (config/demo.py: 674 evaluation problems x 8 of synth level 2 in their
    operand-multiset groups, 251 validation problems x 8, the 12 free scores, HSRM and the small text verifier at 3
    seeds each), written by pools.pool_rows and write_pools as evaluate.py writes it, from candidates drawn here:
    answers among a few per problem (votes tie), some cut off without one, token and step counts that tie, per-token
    statistics and verifier scores a little higher where the answer is right. -> out"""
    import numpy as np
    import evaluate
    import pools
    import tables
    from bestofn import combo_fit
    from configurator import apply_config
    rng = np.random.default_rng(seed)
    cfg = apply_config(dict(evaluate.DEFAULTS), [os.path.join(HERE, 'config', 'demo.py')], evaluate.DEFAULTS)

    def drawn(index):
        p = tasks.synth_problem(index, 2, 1337)
        p.update(key=f'{index:06d}', candidates=[])
        gold, right = int(p['gold']), rng.random()
        for _ in range(8):
            ok, T = rng.random() < right, int(rng.integers(24, 65))
            answer = None if rng.random() < 0.05 else str(gold if ok else gold + int(rng.choice([-2, -1, 1, 10])))
            lp = torch.tensor(-np.abs(rng.normal(0.4 - 0.1 * ok, 0.3, T)), dtype=torch.float32)
            p['candidates'].append({
                'answer': answer, 'correct': answer == p['gold'], 'finish': 'eos' if answer else 'length',
                'token_ids': torch.zeros(T, dtype=torch.long), 'step_pos': torch.arange(int(rng.integers(2, 5))),
                'logprobs': lp, 'entropies': -2 * lp, 'confidences': 1.5 - lp + 0.01 * torch.arange(T),
                'text': f"{p['question']} = {answer}.\nThe answer is {answer}."})
        return p
    ev, val, tr = ([drawn(int(i)) for i in idx] for idx in (range(1225, 1899), rng.choice(1225, 251, replace=False),
                                                            range(200)))
    combo = combo_fit(tr)
    arms = [{'group': g, 'method': name, 'kind': g, 'params': size, 'n_train': 974,
             'runs': [{'column': f'{g}_seed{s}', 'ckpt': f'out/demo/verifiers/{g}_seed{s}/ckpt.pt', 'seed': s}
                      for s in (42, 123, 456)]}
            for g, name, size in (('text_small', 'EORM-style text (small)', 13.8e6), ('hsrm', 'HSRM', 1.74e6))]
    scores = {r['column']: {p['key']: np.float32(rng.normal(size=8) + 1.2 * np.array([c['correct'] for c in
                                                                                       p['candidates']]))
                            for p in ev + val} for a in arms for r in a['runs']}
    free = lambda ps: tables.free_scores(ps, cfg, combo)  # noqa: E731
    pools.write_pools(out, pools.pool_rows(ev, 'eval', free(ev), scores, text=True)
                      + pools.pool_rows(val, 'val', free(val), scores), {
        'config': cfg, 'dataset': 'synth', 'generator': 'smollm2', 'generator_name': 'SmolLM2-135M-Instruct',
        'dtype': 'bfloat16', 'eval_dir': 'out/demo/eval', 'transfer': False, 'trained_on': [],
        'combo_weights': dict(zip(combo['names'], combo['weight'])), 'prm': None, 'arms': arms})
    return out


def bench_chunks(dirs):
    """python -m studies.bench --only=chunks --dirs=<split dir>,...: each extract.py run a split dir recorded
    (extract.RUNS_FILE: its time, problems, commit, CPU, dtype) with its seconds per problem and its tokens per second:
    the decoded tokens (store.generated_tokens) of the problem files written while it ran (their mtime; a run that grew
    the split's problems to more samples counts only the candidates it added; '–' where a later run grew every file
    it wrote). A run that did not finish (its line says finished None: killed, or stopped by an error) counts the
    problem files written from its start until the next run's."""
    import calendar
    from extract import RUNS_FILE, STAMP
    from store import generated_tokens, load_problem, problem_files
    if not dirs:
        raise SystemExit("--only=chunks needs --dirs=<split dir>,... (e.g. out/gsm8k_qwen05/eval)")
    rows = []
    for d in dirs:
        path = os.path.join(d, RUNS_FILE)
        if not os.path.exists(path):
            raise SystemExit(f"{path} not found: {d} records no extract.py run (made before runs were recorded); fix: "
                             "a split dir extract.py has written to since")
        recs = [json.loads(x) for x in open(path)]
        files = [(os.path.getmtime(f), f) for f in problem_files(d, growing=True)]
        at = lambda t: calendar.timegm(time.strptime(t, STAMP))  # noqa: E731
        for i, r in enumerate(recs):
            # a run past the samples the split's earlier runs held grew them: its tokens are those of the samples it
            # added (a growth killed and resumed: both runs start past what the runs before the growth held)
            first = max((x['n_samples'] for x in recs[:i] if x['n_samples'] < r['n_samples']), default=0)
            t0 = at(r['started'])
            if r['finished'] is None:  # killed on the way: its problems, the files written before the next run began
                t1 = at(recs[i + 1]['started']) if i + 1 < len(recs) else time.time()
                mine = [m for m, _ in files if t0 - 1 <= m < t1]
                t1 = max(mine, default=t0) + 1
                r = {**r, 'seconds': t1 - t0, 'extracted': len(mine)}
            else:
                t1 = at(r['finished']) + 1
            kept = [f for m, f in files if t1 - r['seconds'] - 2 <= m <= t1]  # its files as it wrote them
            tok = sum(generated_tokens(load_problem(f, mmap=True)['candidates'][first:r['n_samples']]) for f in kept)
            rows.append([d, f"{r['range'][0]}-{r['range'][1]} x {r['n_samples']}", r['extracted'],
                         f"{r['seconds']:,.0f}", f"{r['seconds'] / r['extracted']:.2f}" if r['extracted'] else '–',
                         f"{tok / r['seconds']:.0f}" if r['seconds'] and kept else '–',
                         (r['commit'] or '?')[:7] + ('+' if r['uncommitted_changes'] else ''), r['cpu'],
                         f"{r['procs'] or r['cores']} x {r['threads'] or 1}", r['dtype'],
                         r['started'] + ('' if recs[i]['finished'] else ' (unfinished)')])
    table(rows, ['split dir', 'range x samples', 'problems extracted', 's', 's / problem', 'tokens / s', 'commit',
                 'CPU', 'processes x threads', 'dtype', 'started (UTC)'])


def table_cells(md):
    """{(section heading, row name, part's method or '', column header): cell} of every markdown table in md: the
    cells two versions of a table can be compared on where one gained columns or rows (the paper's reference column,
    answer agreement: added after TABLES_BEFORE). A by-part table's rows are named by their part and method."""
    out, section, head, lead = {}, '', None, ''
    for line in md.splitlines():
        if not line.startswith('|'):
            section, head = (line, None) if line.startswith('#') else (section, None)
            continue
        c = [x.strip() for x in line.strip().strip('|').split('|')]
        if head is None:
            head = c
        elif not set(''.join(c)) <= set('-:'):
            lead = c[0] or lead
            name = (section, lead, c[2] if section.startswith('### Bo') and len(c) > 2 else '')
            out.update({name + (h,): v for h, v in zip(head, c)})
    return out


def bench_tables(dirs=None, repeats=3):
    """python -m studies.bench --only=tables [--dirs=out/demo/pools,...]: `python pools.py <pools>` by TABLES_BEFORE's
    code and by this tree's, on each pools folder (none given: main_job_pools'), repeats times each, interleaved:
    seconds (wall, and the CPU the process used, steadier on a shared machine; the least of the repeats) and whether
    the two print the same cells where both print one (table_cells: the table gained columns and rows since)."""
    import shutil
    import tempfile
    from pools import read_pools
    work = tempfile.mkdtemp(prefix='hsrm_tables_')
    old = os.path.join(work, 'before')
    os.makedirs(old)
    subprocess.run(f'git archive {TABLES_BEFORE} | tar -x -C {old}', shell=True, cwd=HERE, check=True)
    drawn = not dirs
    dirs = dirs or [main_job_pools(os.path.join(work, 'pools'))]
    load = os.getloadavg()[0]
    rows = []
    for d in dirs:
        pools, meta = read_pools(d)
        shape = f"{len({r['problem'] for r in pools if r['split'] == 'eval'})} x {meta['config']['n_eval']}"
        took, printed = {}, {}
        for _ in range(repeats):
            for code, tree, script in ((f'per problem ({TABLES_BEFORE})', old, 'tables.py'),
                                       ('batched', HERE, 'pools.py')):  # the pools' table was tables.py's there
                t, c = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
                r = subprocess.run([sys.executable, script, os.path.abspath(d)], cwd=tree, capture_output=True,
                                   text=True)
                c2 = resource.getrusage(resource.RUSAGE_CHILDREN)
                if r.returncode:
                    raise RuntimeError(r.stderr[-3000:])
                took.setdefault(code, []).append((time.perf_counter() - t,
                                                  c2.ru_utime + c2.ru_stime - c.ru_utime - c.ru_stime))
                printed[code] = r.stdout
        first = min(w for w, _ in took[f'per problem ({TABLES_BEFORE})'])
        before, now = (table_cells(x) for x in printed.values())
        shared = before.keys() & now.keys()
        same = f"{'yes' if all(before[k] == now[k] for k in shared) else 'NO'} ({len(shared)} of {len(before)})"
        for code, ts in took.items():
            rows.append(["drawn at the main job's shape" if drawn else d, shape, code,
                         f'{min(w for w, _ in ts):.1f}', f'{min(c for _, c in ts):.1f}',
                         f'{first / min(w for w, _ in ts):.1f}x', same])
    shutil.rmtree(work)
    print(f"`python pools.py <pools>` in its own process ({machine.cpu_name()[0]}, load average {load:.1f} at the "
          f"start; least of {repeats}, interleaved): wall seconds, CPU seconds, and whether both print the same cells "
          f"where both print one (of the cells {TABLES_BEFORE}'s code prints).")
    table(rows, ['pools', 'problems x N', 'code', 's', 'CPU s', 'speed-up', 'same cells'])


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
    close often), as testkit.tiny_model does."""
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
    with torch.no_grad():
        head = model.get_output_embeddings().weight
        head.mul_(head_scale)
        if newline is not None:
            h = model.base_model(input_ids=torch.randint(1, config.vocab_size, (4, 32),
                                                         device=device)).last_hidden_state
            h = h.float().mean((0, 1))
            head[newline.to(device)] += (30 * h / h.square().sum()).to(head.dtype)
    return model


def _tiny_config(kind, V):
    from transformers import LlamaConfig, Qwen3Config
    args = dict(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=1024, eos_token_id=0, pad_token_id=0,
                tie_word_embeddings=False)
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
    """README's first check on a rented GPU: captured states against teacher forcing on the device in its dtypes, one
    beam and one pruning run, decoding speed and peak memory at Qwen3-1.7B's shapes (random weights)."""
    import capture as X
    from studies.policy import Steering
    device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
    cuda = device.startswith('cuda')
    if cuda and not torch.cuda.is_available():
        raise SystemExit(f"--device={device} but CUDA is not available; fix: --device=cpu (tiny shapes: a smoke run)")
    name = torch.cuda.get_device_name(device) if cuda else 'cpu (tiny shapes: a smoke run of the CUDA path)'
    print(f"device: {name}; "
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
          'error = max |captured - re-encoded| / (tol + tol |re-encoded|), tol = the tests\' (fp32 4e-3, fp16 1e-2, '
          'bf16 6e-2)')
    table(rows, ['model', 'dtype', 'case', 'candidates', 'steps', 'step positions equal', 'state error',
                 'log-prob error', 'within tol'])
    # 2. steering on the device: one beam search and one pruning run, every candidate against its re-encoding
    dt = torch.bfloat16 if cuda else torch.float32
    model = _random_model(_tiny_config('qwen3', len(tok)), dt, device, 1.0, newline)
    torch.manual_seed(1)
    v = build_verifier('hsrm', 64, layers=[-1], dropout=0.0).eval().to(device)
    rows = []
    for name, steer in (('beam, N = 4, M = 2', Steering(v, 'beam', width=2)),
                        ('pruning, relative 0.05', Steering(v, 'relative', 0.05))):
        res = X.sample_with_capture(model, tok, prompts, 4, [-1], 40, 0.9, 0.95, seed=5, table=table_, steer=steer)
        flat = [(p, c) for p, cs in zip(prompts, res) for c in cs]
        ref = [X.reencode(model, tok, [p], [c['token_ids'].tolist()], [-1], [c['finish']], table_)[0] for p, c in flat]
        es = _max_err([c['states'].float() for _, c in flat], [r['states'].float() for r in ref], tol[dt])
        rows.append([name, len(flat), sum(c['finish'] == 'pruned' for _, c in flat),
                     sum(c.get('parent') is not None for _, c in flat), sum(generated_tokens(cs) for cs in res),
                     f'{es:.2f}'])
    print(f'\nSteering on the device ({str(dt)[6:]}, a random HSRM steering): every candidate against its own '
          're-encoding')
    table(rows, ['run', 'candidates', 'stopped', 'branched', 'generated tokens', 'state error'])
    # 3. speed and memory at the paper's generator size (CUDA), or tiny shapes (CPU: inductor compiles for minutes there
    # and is slower than eager, so compile is measured on CUDA only)
    if cuda:
        bench_speed(device, machine.paper_config('Qwen/Qwen3-1.7B'), (64, 128, 256), 512, torch.bfloat16, 128, 8.0)
        gpu_extract(device, machine.paper_config('Qwen/Qwen3-1.7B'), 64, 256, 8.0, (False, True))
    else:
        bench_speed(device, _tiny_config('qwen3', 300), (8, 16, 32), 32, torch.float32, None, 1.0)
        gpu_extract(device, _tiny_config('qwen3', 300), 4, 32, 1.0)


def bench_gpu_cell(device=None):
    """Decoding speed and peak memory at the paper GSM8K cell's own settings (config/gsm8k_1p7b.py: Qwen3-1.7B's
    shapes, float16, 256 rows, 1,024 new tokens), eager and compiled: README's GPU cost figures."""
    device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
    if not device.startswith('cuda'):  # nothing to measure here (every section's run goes on)
        print(f"skipped: gpu_cell measures a CUDA device, not {device!r} (--only=gpu --device=cpu: the CUDA path's "
              "smoke run)")
        return
    print(f"device: {torch.cuda.get_device_name(device)}; torch {torch.__version__}")
    bench_speed(device, machine.paper_config('Qwen/Qwen3-1.7B'), (256,), 1024, torch.float16, 256, 8.0)


def bench_gpu_refill(device=None, rows=128, n_problems=48, T=256, every=200):
    """Continuous batching against fixed batches on the device, at Qwen3-1.7B's shapes (bfloat16, random weights).
    Random weights never end a row early, so a stand-in EOS ends it: every `every`-th token id (about a 1/every
    chance a token, lengths spread as a real generator's do, some at the cap T). Fixed batches: one call per rows / 8
    prompts, every row of a batch starting together and the batch running until its longest row ends (the loop
    before continuous batching); continuous: one call over all prompts, an ended row refilled at once. Counter-based
    draws: both make the same candidates."""
    import capture as X
    device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
    cuda = device.startswith('cuda')
    if cuda and not torch.cuda.is_available():
        raise SystemExit(f"--device={device} but CUDA is not available; fix: --device=cpu (tiny shapes: a smoke run)")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    cfg = machine.paper_config('Qwen/Qwen3-1.7B') if cuda else _tiny_config('qwen3', 300)
    if not cuda:  # a smoke run: tiny shapes, a short cap
        rows, n_problems, T, every = 16, 6, 32, 20
    tok = word_tokenizer(cfg.vocab_size)
    table_ = torch.zeros(cfg.vocab_size, dtype=torch.bool)
    table_[1::16] = True
    eos = list(range(7, cfg.vocab_size, every))
    model = _random_model(cfg, torch.bfloat16, device, 8.0 if cuda else 1.0)
    prompts = [_words(tok, [2 + (13 * i + j) % 500 for j in range(128)]) for i in range(n_problems)]  # 128 tokens
    per = rows // 8
    X.sample_with_capture(model, tok, prompts[:per], 8, [-1], 8, 0.7, 0.9, seed=0, table=table_, eos=eos)  # warm-up
    out, res, base = [], {}, None
    batches = [list(range(i, min(i + per, n_problems))) for i in range(0, n_problems, per)]
    for loop, calls in (('fixed batches', batches), ('continuous', [list(range(n_problems))])):
        sync()
        t, got = time.perf_counter(), []
        for idx in calls:
            got += X.sample_with_capture(model, tok, [prompts[i] for i in idx], 8, [-1], T, 0.7, 0.9, seed=0,
                                         table=table_, eos=eos, rows=rows, keys=idx)
        sync()
        secs = time.perf_counter() - t
        lens = [len(c['token_ids']) for cs in got for c in cs]
        res[loop] = [c['token_ids'].tolist() for cs in got for c in cs]
        rate = sum(lens) / secs
        base = base or rate  # fixed batches: the first loop
        out.append([loop, len(lens), sum(lens), f'{secs:.1f}', f'{rate:,.0f}', f'{rate / base:.2f}'])
    same = sum(a == b for a, b in zip(res['fixed batches'], res['continuous']))
    print(f"\nContinuous batching on {torch.cuda.get_device_name(device) if cuda else 'cpu (tiny shapes: a smoke run)'}"
          f": a random {cfg.model_type} at {'Qwen3-1.7B' if cuda else 'tiny'} shapes, bfloat16, {rows} rows, "
          f"{n_problems} prompts x 8 of 128 tokens, up to {T} new tokens, T=0.7, top-p 0.9; stand-in EOS: every "
          f"{every}th token id. Lengths: mean {sum(lens) / len(lens):.0f}, {sum(n == T for n in lens)} of {len(lens)} "
          f"at the cap; {same} of {len(lens)} candidates equal in both loops (counter-based draws; float rounding "
          "can part the rest).")
    table(out, ['loop', 'candidates', 'tokens', 'wall s', 'tokens / s', 'vs fixed'])


def gpu_extract(device, cfg, n_problems, max_new_tokens, head_scale, compiles=(False,)):
    """extract.py itself (the CLI, main job's synthetic problems x 8) on a random model of `cfg` saved as a folder:
    load, memory check, sampling, capture and the atomic writes, end to end; wall time and candidates per second."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        tok = word_tokenizer(cfg.vocab_size)
        model = _random_model(cfg, torch.bfloat16, device, head_scale, newline=torch.arange(1, cfg.vocab_size, 16))
        model.save_pretrained(f'{tmp}/gen')
        tok.save_pretrained(f'{tmp}/gen')
        del model
        if device.startswith('cuda'):
            torch.cuda.empty_cache()
        cmd = [sys.executable, os.path.join(HERE, 'extract.py'), os.path.join(HERE, 'config', 'demo.py'),
               f'--model={tmp}/gen', f'--device={device}', '--dtype=bfloat16', f'--train_range=(0, {n_problems - 1})',
               '--eval_range=None', '--n_train_samples=8', f'--max_new_tokens={max_new_tokens}', f'--out_dir={tmp}/out',
               '--procs=1']
        from store import load_split
        rows = []
        for comp in compiles:
            t = time.perf_counter()
            r = subprocess.run(cmd + [f'--torch_compile={comp}', f'--out_dir={tmp}/out{comp}'], capture_output=True,
                               text=True)
            secs = time.perf_counter() - t
            if r.returncode:
                print(r.stderr[-3000:])
                return
            cands = [c for p in load_split(f'{tmp}/out{comp}/train', labels=False) for c in p['candidates']]
            n_tok = sum(len(c['token_ids']) for c in cands)
            rows.append([comp, len(cands), n_tok, f'{secs:.1f}', f'{len(cands) / secs:.1f}', f'{n_tok / secs:,.0f}',
                         sum(len(c['step_pos']) for c in cands)])
        print(f"\nextract.py on a random {cfg.model_type} at {'Qwen3-1.7B' if cfg.hidden_size == 2048 else 'tiny'} "
              f"shapes (bfloat16, {n_problems} synthetic problems x 8, up to {max_new_tokens} new tokens, one process)")
        table(rows, ['torch_compile', 'candidates', 'tokens', 'wall s (load + sample + write)', 'candidates / s',
                     'tokens / s', 'steps kept'])


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
            pred = machine.decode_bytes(cfg, dt, r, 128, T, 8, 1, 100)
            peak = torch.cuda.max_memory_allocated(device) - weights if cuda else None
            base = base or n_tok / secs
            rows.append([r, f'compile (first call {t_compile:.0f} s)' if comp else 'eager',
                         n_tok, f'{1e3 * secs / len(steps):.1f}', f'{n_tok / secs:,.0f}', f'{n_tok / secs / base:.2f}',
                         f'{secs / floor:.1f}', f'{pred / 2 ** 30:.2f}', f'{peak / 2 ** 30:.2f}' if cuda else '-',
                         f'{peak / pred:.2f}' if cuda else '-'])
    print(f"\nDecoding speed: a random {cfg.model_type} at {'Qwen3-1.7B' if cfg.hidden_size == 2048 else 'tiny'} "
          f"shapes ({str(dt)[6:]}, {n_par / 1e6:,.1f}M parameters), 8 samples of a 128-token prompt per 8 rows, {T} "
          f"new tokens, T=0.7, top-p 0.9, the last 100 step states kept. Device floor measured now: {flops / 1e12:.1f} "
          f"TFLOP/s matmul, {bw / 1e9:.0f} GB/s copy; floor = prefill FLOPs / rate + per step max(FLOPs / rate, "
          "(weights + live KV cache) / bandwidth). Peak = max allocated beyond the weights, against the memory "
          "model's decode_bytes.")
    table(rows, ['rows', 'step', 'tokens', 'ms / step', 'tokens / s', 'vs first row', 'vs floor', 'model GiB',
                 'peak GiB', 'peak / model'])


if __name__ == '__main__':
    if len(sys.argv) > 1 and sys.argv[1] == '--worker':
        _extract_worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6],
                        profile=12 if '--profile' in sys.argv else None)
        sys.exit(0)
    known = {'only': True, 'device': True, 'profile': False, 'search_ckpt': True, 'ckpt': True, 'dirs': True,
             'train_dir': True, 'before': True, 'dtype': True, 'repeats': True}
    flag = read_flags(sys.argv[1:], known, 'python -m studies.bench').get  # an unknown flag: one line, no section
    only, device = flag('only'), flag('device')
    if device is not None:  # the other sections measure this CPU machine
        only = only or 'gpu'
        if only not in ('gpu', 'gpu_cell', 'gpu_refill'):
            raise SystemExit(f"--device={device!r} applies to --only=gpu; fix: --only=gpu --device={device}")
    prof = bool(flag('profile'))
    dtypes, repeats = (flag('dtype') or 'auto').split(','), flag('repeats') or '1'
    if not set(dtypes) <= {'auto', *generator.CPU_KEPT} or not repeats.isdigit() or int(repeats) < 1:
        raise SystemExit(f"python -m studies.bench: --dtype={flag('dtype')!r} --repeats={repeats!r}; fix: --dtype= one "
                         f"or more of auto,{','.join(generator.CPU_KEPT)} (comma-separated), --repeats= a whole number "
                         "of at least 1")
    sections = {'extract': lambda: bench_loop(flag('before'), dtypes, int(repeats)),
                'generate': lambda: bench_extract(profile=prof),
                'dtype': lambda: bench_dtype(profile=prof),
                'train': lambda: bench_train(flag('train_dir')), 'procs': bench_procs,
                'text_groups': lambda: bench_text_groups(flag('train_dir')),
                'search': lambda: bench_search(**({'ckpt': flag('search_ckpt')} if flag('search_ckpt') else {})),
                'sample': lambda: bench_sample(**({'ckpt': flag('ckpt')} if flag('ckpt') else {})),
                'memory': bench_memory, 'alloc': bench_alloc, 'gpu': lambda: bench_gpu(device),
                'gpu_cell': lambda: bench_gpu_cell(device), 'gpu_refill': lambda: bench_gpu_refill(device),
                'int8': bench_int8,
                'quality': lambda: bench_quality(flag('dirs') and flag('dirs').split(',')),
                'tables': lambda: bench_tables(flag('dirs') and flag('dirs').split(',')),
                'chunks': lambda: bench_chunks(flag('dirs') and flag('dirs').split(','))}
    run_sections(sections, only)
