"""
Stage 1: sample N solutions per problem with a frozen causal LM and keep, while it decodes, the
hidden state at every reasoning-step boundary (no extra forward pass), plus per-token log-probs
and entropies for the cheap scorers. Writes one .pt file per problem (format: README). The problems and
their prompts come from tasks.py; the step rule, the decoding loop (continuous batching: a row that ends takes the
next candidate) and re-encoding from capture.py; the model, its sampler and its decoding cache from generator.py.

`mode='reencode'` gives pools sampled elsewhere (`candidates_file`, e.g. by vLLM: README "On a GPU") the same states
in one batched teacher-forced pass. Before a split starts, a batch that will not fit the device's free memory is
refused with the batch_size that fits (machine.py's memory model), and the layer selection is checked against this
transformers release at load. Writes are atomic per problem; a re-run resumes (a file that does not load is
extracted again); `shard`/`num_shards` split the problems (under torchrun each rank is a shard on its LOCAL_RANK
GPU); mixing another generator, layers, step rule, sampler, mode, sampling settings or data into a split dir is
refused.

    python extract.py config/demo.py
    python extract.py config/gsm8k_1p7b.py --shard=0 --num_shards=4
    python extract.py config/demo.py --mode=reencode --candidates_file=pool.jsonl
"""
import glob
import json
import os
import sys
import time

import torch
from tqdm import tqdm

from capture import (SAMPLER, STEP_RULE, batch_prompts, generated_tokens, reencode, sample_problems, step_table,
                     stored_kinds)
from configurator import check_between, check_positive, check_writable, cli, configure, knobs
from generator import (check_layers, check_positions, check_weight_dtype, eos_ids, load_generator, positions,
                       resolve_dtype)
from machine import (HEADROOM, budget, cpu_cores, decode_bytes, fit_batch_size, fit_rows, free_bytes,
                     kv_bytes_per_token, launch_procs, reencode_bytes, resolve_device)
from store import STEERING, atomic_save, atomic_write_json, done_problems, extracted, lock, steering
from tasks import (GENERATED, MATH_SYSTEM, SYNTH_SPLIT, build_prompt, check_disjoint, check_synth_ranges,
                   check_word_ranges, load_problems)

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
out_dir = 'out/demo'
model = 'smollm2'  # 'smollm2' (embedded SmolLM2-135M-Instruct) | hub id (Qwen/Qwen3-1.7B) | local folder | x.gguf
dataset = 'synth'  # 'synth' | 'words' | 'gsm8k' | 'math500' | 'aime' | 'olympiadbench'
data_dir: str = None  # folder with <dataset>/<file>.jsonl (e.g. '../shared/data'); None -> the Hugging Face hub
                      # via `datasets`
data_path: str = None  # a JSONL file for `dataset` (overrides data_dir)
exclude_ids = []  # dataset ids left out of the index ranges (the other rows keep their file index), e.g.
                  # OlympiadBench's two
synth_level = 2  # synthetic task: 1 | 2 | 3 | 4 operations (+ or -) on one-digit numbers
word_family = 'shop'  # dataset='words': GSM8K-style word problems generated in tasks.py: 'shop' | 'travel' | 'bake' |
                      # 'share' (WORD_FAMILIES)
word_split = 'arithmetic'  # dataset='words': what disjoint ranges keep apart (tasks.word_space): 'arithmetic' (any
                           # disjoint ranges; a question's numbers may recur in another arrangement) | 'numbers'
                           # (grouped by the numbers alone, as the synthetic levels: train ranges below
                           # tasks.word_boundary, eval ranges at or above it; other questions per index)
synth_seed = 1337  # the order of the generated questions (synth and words): index i is always the same question
train_range: tuple | None = (0, 7)  # inclusive dataset indices of the verifier-training problems; None skips the split
eval_range: tuple | None = (1225, 1232)  # inclusive dataset indices of the held-out evaluation problems; None skips
                                         # the split (synthetic levels: train ranges below tasks.synth_boundary, 1225
                                         # at level 2, eval above it)
n_train_samples = 64  # candidates per training problem (paper: 64)
n_eval_samples = 8  # candidates per evaluation problem (paper: 8)
mode = 'sample'  # 'sample' | 'reencode' (teacher-forced pass over candidates_file)
candidates_file: str = None  # reencode: JSONL, one candidate a line: {index|id, text[, token_ids, finish]}
                             # (read_candidates_file)
layers = [-1]  # HF hidden_states indices (0 = embeddings, -1 = final layer after norm); [-1,-2,-3,-4] = top-4
max_steps: int | None = 100  # step states stored per candidate: the last max_steps (paper: S <= 100) | None = every
                             # step (thinking traces: train.py's input_steps / max_steps then choose which to read,
                             # from one extraction)
step_kinds = ['boundary']  # what is stored per step (model.STEP_KINDS): 'boundary' (always; the paper's state at the
                           # step's last token) plus 'mean' (the mean of the step's token states) and / or 'least' (the
                           # state at its least likely token); each kind adds S x len(layers) x d_gen x 2 bytes per
                           # candidate; train.py's step_read picks
enable_thinking = False  # Qwen3 chat template thinking mode
system_prompt = MATH_SYSTEM  # for the benchmark datasets; the synthetic task uses a worked example instead
max_new_tokens = 256
temperature = 0.7
top_p = 0.9
conf_topk = 20  # DeepConf token confidence: minus the mean log-prob of the top conf_topk tokens (untempered)
batch_size = 128  # rows decoding at once (continuous batching: a row that ends takes the next candidate); the
                 # paper cells: the most that fit one 80 GB GPU (machine.fit_batch_size); reencode: at most this many
device = 'auto'  # 'auto' | 'cpu' | 'cuda'
dtype = 'auto'  # 'auto' (float16 on CUDA; on CPU the faster of float32 and bfloat16 for this model, measured once per
                # machine: generator.measured_cpu_dtype) | 'float16' | 'bfloat16' | 'float32'. The weights' dtype used
                # is recorded with each split (weights_dtype): a resume in another is refused
torch_compile = False  # True: torch.compile the decoding step over fixed shapes (CUDA graphs): every row runs every
                       # step over the whole cache capacity (RESULTS: speed on a GPU); slower on CPU
shard = 0  # this job's shard: every num_shards-th problem of each split, from the shard-th
num_shards = 1  # with torchrun, RANK / WORLD_SIZE set these when num_shards is 1
procs = 0  # processes that split the problems on this machine, each pinned to its own cores: 0 = one per core on CPU
           # (never slower here: bench.py --only=procs), 1 on CUDA | n. Candidates do not depend on it; on CPU each
           # counts on 1 / procs of the available RAM
seed = 1337
threads = 0  # CPU threads for torch in each process; 0 = torch's default (with procs > 1: the cores split among them)
DEFAULTS = knobs(globals())  # the knobs above as a dict
# the sampling settings' intervals (configurator.check_between), sample.py's too
SAMPLING = {'temperature': (0, None, 'at 0 or below it samples greedily: N identical candidates, nothing for '
                                     'best-of-N to choose'),
            'top_p': (0, 1, None)}

# -----------------------------------------------------------------------------
# the run


FINISHES = ('eos', 'length', 'pruned')


def read_candidates_file(path):
    """The two-pass path's input (README "On a GPU"): candidates sampled by any engine, one JSON object a line,
    one line per candidate, keyed to its problem:
      "index": int          the problem's dataset index (tasks.load_problems; the run's train_range / eval_range), or
      "id": str             the dataset's own id of the problem (index wins when both are given)
      "text": str           the completion alone (no prompt), decoded
      "token_ids": [int]    optional, recommended: the completion's ids exactly as sampled, by --model's tokenizer;
                            without them `text` is tokenized again, which can split otherwise than the sampler did.
                            Trailing EOS ids (vLLM and HF generate keep the stop token) are dropped: a candidate
                            ends before its EOS, as extract.py's own do
      "finish": str         optional, default "eos": "eos" (stopped) | "length" (cut at the token limit) | "pruned"
    Other keys are ignored. The prompt is not read: the problem's prompt is built again (tasks.build_prompt with the
    run's system_prompt and enable_thinking), so the sampler must have been given exactly that text. The order of a
    problem's lines is its candidates' order. Returns {index or id: [rows]}.

    Writing one with vLLM (not run here: no GPU, no vLLM in this workplace), for config/gsm8k_1p7b.py:

        import json
        from transformers import AutoTokenizer
        from vllm import LLM, SamplingParams
        from tasks import MATH_SYSTEM, build_prompt, load_problems
        name = 'Qwen/Qwen3-1.7B'  # config/gsm8k_1p7b.py: its splits, samples and max_new_tokens below
        tok, llm = AutoTokenizer.from_pretrained(name), LLM(name, dtype='bfloat16')
        with open('pool.jsonl', 'w') as f:
            for lo, hi, n in ((0, 499, 64), (500, 1318, 8)):
                problems = load_problems('gsm8k', lo, hi)
                prompts = [{'prompt_token_ids': tok(build_prompt(tok, p, MATH_SYSTEM, False),
                                                    add_special_tokens=False).input_ids} for p in problems]
                params = SamplingParams(n=n, temperature=0.7, top_p=0.9, max_tokens=1024, seed=1337)
                outs = llm.generate(prompts, params)
                for p, o in zip(problems, outs):
                    for c in o.outputs:
                        f.write(json.dumps({'index': p['index'], 'text': c.text, 'token_ids': list(c.token_ids),
                                            'finish': 'length' if c.finish_reason == 'length' else 'eos'}) + '\\n')
        # then: python extract.py config/gsm8k_1p7b.py --mode=reencode --candidates_file=pool.jsonl
    """
    if not os.path.isfile(path):
        raise SystemExit(f"candidates_file={path!r} not found; fix: a JSONL of {{index|id, text}} rows")
    pool = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"candidates_file={path!r} line {n} is not JSON ({e}); fix: one JSON object per line")
            if not isinstance(row, dict) or 'text' not in row or ('index' not in row and 'id' not in row):
                raise SystemExit(f"candidates_file={path!r} line {n} needs 'text' and 'index' or 'id' (has "
                                 f"{sorted(row) if isinstance(row, dict) else type(row).__name__}); fix: one candidate "
                                 f"a line, {{\"index\": <its problem's dataset index>, \"text\": <the completion>}}")
            ids = row.get('token_ids')
            if ids is not None and not (isinstance(ids, list) and all(isinstance(t, int) and t >= 0 for t in ids)):
                raise SystemExit(f"candidates_file={path!r} line {n}: token_ids must be a list of non-negative ints; "
                                 "fix: write the sampler's ids as they are, or leave token_ids out (text is "
                                 "tokenized)")
            if row.get('finish', 'eos') not in FINISHES:
                raise SystemExit(f"candidates_file={path!r} line {n}: finish={row['finish']!r}; fix: one of {FINISHES} "
                                 f"(vLLM's finish_reason 'stop' is 'eos')")
            row['line'] = n
            pool.setdefault(row.get('index', row.get('id')), []).append(row)
    return pool


def pool_ids(pool, tok, model, path):
    """Each candidate row's completion ids, as row['ids']: its token_ids, else its text tokenized; trailing EOS ids
    dropped. An id outside the model's vocabulary (another tokenizer's) is refused."""
    eos, V = set(eos_ids(model, tok)), model.get_output_embeddings().weight.shape[0]
    for rows in pool.values():
        for r in rows:
            ids = list(r['token_ids']) if r.get('token_ids') is not None \
                else tok(r['text'], add_special_tokens=False).input_ids
            while ids and ids[-1] in eos:
                ids.pop()
            if any(t >= V for t in ids):
                raise SystemExit(f"candidates_file={path!r} line {r['line']}: token id {max(ids)} is outside the "
                                 f"model's vocabulary ({V}); fix: token_ids from the same tokenizer as --model, or "
                                 "leave them out")
            r['ids'] = ids
    return pool


def _gib(n):
    return f'{n / 2 ** 30:,.1f} GiB'


def check_memory(cfg, splits, problems, prompts, model, pool=None, free=None):
    """Refuse, before any split starts, a split whose batches will not fit the free memory of cfg['device']:
    the memory model (machine.py: decode_bytes while sampling, reencode_bytes for one row of the longest candidate while
    re-encoding) against free_bytes less HEADROOM, in one line naming the split, the bytes, what is free and the
    batch_size that fits every split. On CPU each of the `procs` processes counts on an equal share of the RAM.
    splits: [(split, range, n_samples)]; prompts: {split: [prompt token count per problem]}. -> the bytes a batch may
    plan for (re-encoding sizes its row chunks by it), or None where the free memory is unknown."""
    free = free_bytes(cfg['device']) if free is None else free
    if free is None:
        return None
    room = budget(free // (cfg['procs'] if cfg['device'] == 'cpu' and cfg['procs'] > 1 else 1))
    conf, dtype, n_layers = model.config, next(model.parameters()).dtype, len(cfg['layers']) * len(cfg['step_kinds'])
    where = f"{_gib(room)} is free to plan for on {cfg['device']} ({HEADROOM:.0%} kept back)"
    if pool is not None:
        for split, _, _ in splits:
            L = max((lp + max((len(r['ids']) for r in pool.get(p['index'], pool.get(p['id'], []))), default=0)
                     for p, lp in zip(problems[split], prompts[split])), default=0)
            if reencode_bytes(conf, dtype, 1, L, n_layers) > room:
                raise SystemExit(f"{split} split: re-encoding its longest candidate ({L:,} positions with its prompt) "
                                 f"needs {_gib(reencode_bytes(conf, dtype, 1, L, n_layers))} on one row, {where}; fix: "
                                 f"a device with more memory, or leave the longest candidates out of candidates_file")
        return room
    for split, _, n in splits:
        rows, lp = min(cfg['batch_size'], len(problems[split]) * n), max(prompts[split], default=0)
        need = decode_bytes(conf, dtype, rows, lp, cfg['max_new_tokens'], n, n_layers, cfg['max_steps'])
        if need <= room:
            continue
        bs = fit_batch_size(conf, dtype, [(m, max(prompts[s], default=0)) for s, _, m in splits], cfg['max_new_tokens'],
                            room, n_layers, cfg['max_steps'], cap=cfg['batch_size'])
        cap = lp + cfg['max_new_tokens']
        fix = f"--batch_size={bs} (fits every split)" if bs else "a shorter --max_new_tokens, or a device with more memory"
        raise SystemExit(f"{split} split: {rows} rows x {cap:,} positions need {_gib(need)} (their KV cache "
                         f"{_gib(rows * cap * kv_bytes_per_token(conf, dtype))}), {where}; fix: {fix}")
    return room


def run_split(split, problems, n, cfg, model, tok, table, pool=None, steer=None, room=None):
    """Extract this shard's `problems` of one split (every num_shards-th, from the shard-th) into
    {out_dir}/{split}/problems/, skipping finished problems (store.done_problems), each file written as its problem's last
    candidate ends. Sampling runs every problem through one
    continuous batch of batch_size rows (capture.sample_problems); a candidate's draws depend on the seed, its
    problem's index and its sample number alone, so a resumed, sharded or grown run samples what one run over the
    range would. Re-encoding (pool: read_candidates_file, then pool_ids) runs a problem's candidates in chunks of at
    most batch_size rows, fewer where `room` bytes (check_memory) hold fewer."""
    split_dir = os.path.join(cfg['out_dir'], split)
    path = lambda p: os.path.join(split_dir, 'problems', f"{p['index']:06d}.pt")  # noqa: E731
    mine = problems[cfg['shard']::cfg['num_shards']]
    done, damaged = done_problems(mine, path)
    todo = [p for p in mine if path(p) not in done]
    print(f"{split}: {len(problems)} problems, shard {cfg['shard']}/{cfg['num_shards']} has {len(mine)}, {len(done)} "
          f"done already, {len(todo)} to go{f' ({damaged} of them damaged files that do not load)' if damaged else ''}"
          f", {n} samples each")
    if not todo:
        return
    bar, n_tok, t0 = tqdm(total=len(todo), desc=f'extract {split}', unit='problem'), 0, time.time()
    got = sample_problems(model, tok, todo, n, cfg, table, steer) if pool is None else \
        reencoded(todo, n, cfg, model, tok, table, pool, room)
    for p, prompt, cands in got:
        atomic_save({**p, 'key': f"{p['index']:06d}", 'prompt': prompt, 'layers': list(cfg['layers']),
                     'candidates': cands, 'generated_tokens': generated_tokens(cands)}, path(p))
        n_tok += generated_tokens(cands)
        bar.update(1)
        bar.set_postfix(tok_s=f'{n_tok / (time.time() - t0):.0f}')
    bar.close()


def reencoded(problems, n, cfg, model, tok, table, pool, room):
    """Yield (problem, prompt, candidates) of each problem's pool rows re-encoded (capture.reencode) in row chunks that
    `room` bytes hold (at most batch_size)."""
    for p, prompt in zip(problems, batch_prompts(tok, problems, cfg)):
        rows = pool.get(p['index'], pool.get(p['id'], []))
        if not rows:
            raise SystemExit(f"candidates_file has no rows for problem index {p['index']} / id {p['id']!r}; "
                             f"fix: restrict the range or add its candidates")
        ids = [r['ids'] for r in rows]
        L = len(tok(prompt, add_special_tokens=False).input_ids) + max(map(len, ids))
        k = cfg['batch_size'] if room is None else max(1, fit_rows(
            lambda r: reencode_bytes(model.config, next(model.parameters()).dtype, r, L, len(cfg['layers'])),
            room, cfg['batch_size']))
        cands = []
        for j in range(0, len(rows), k):
            cands += reencode(model, tok, [prompt] * len(ids[j:j + k]), ids[j:j + k], cfg['layers'],
                              [r.get('finish', 'eos') for r in rows[j:j + k]], table, cfg['max_steps'],
                              cfg['conf_topk'], step_kinds=cfg['step_kinds'])
        yield p, prompt, cands


def check_resume(split_dir, cfg):
    """Refuse to mix, in one split dir, outputs of different generators, layers, step rules, steering policies
    (store.STEERING), sampling settings or data selection (store.done_problems compares the data itself: a moved data_dir is
    fine). A key its config.json lacks (written by an older version) is unknown and not compared."""
    path = os.path.join(split_dir, 'config.json')
    if os.path.exists(path) and glob.glob(os.path.join(split_dir, 'problems', '*.pt')):
        old = json.load(open(path))
        if old.get('enable_thinking') and 'think_extract' in old:  # written before </think> positions were stored
            raise SystemExit(f"{split_dir} holds a thinking-mode extraction (think_extract={old['think_extract']!r}) "
                             "made before the </think> position was stored; fix: a new --out_dir, or delete "
                             f"{split_dir}")
        keys = ['model', 'weights_dtype', 'layers', 'step_kinds', 'dataset', 'mode', 'enable_thinking', 'step_rule',
                *(['sampler'] if cfg['mode'] == 'sample' else []),
                'max_steps', 'conf_topk', *(STEERING if steering(old) or steering(cfg) else ()), 'exclude_ids']
        keys += {'synth': ['synth_level', 'synth_seed', 'synth_split'],
                 'words': ['word_family', 'word_split', 'synth_seed']}.get(
            cfg['dataset'], ['system_prompt'])  # the generated tasks have no system prompt
        if cfg['mode'] == 'sample':  # re-encoding samples nothing
            keys += ['temperature', 'top_p', 'max_new_tokens', 'seed', 'n_samples']
        norm = lambda k, v: (sorted(map(str, v)) if k == 'exclude_ids'  # noqa: E731
                             else json.loads(json.dumps(v, default=str)))
        old.setdefault('step_kinds', ['boundary'])  # made before other kinds could be stored
        old.setdefault('sampler', 'per-batch generator (before continuous batching)')
        if cfg['dataset'] == 'synth':  # made before the space was split by operand multiset: other questions per index
            old.setdefault('synth_split', 'by question string (before operand-multiset splits)')
        if cfg['dataset'] == 'words':  # made before word_split existed: the arithmetic order
            old.setdefault('word_split', 'arithmetic')
        for k in keys:
            if k in old and norm(k, old[k]) != norm(k, cfg.get(k)):
                name = {'n_samples': f"n_{cfg.get('split', 'train')}_samples", 'weights_dtype': 'dtype'}.get(k, k)
                raise SystemExit(f"{split_dir} holds an extraction with {name}={old[k]!r}, this run has {name}="
                                 f"{cfg.get(k)!r}; "
                                 f"fix: a new --out_dir (or {name}={old[k]!r} to resume this one), or delete "
                                 f"{split_dir}")


def run(config, steer=None, command=None):
    """The CLI (config: the knobs above, as set): every split extracted into {out_dir}/{split}/, each check before any
    work. steer: a steering policy for the eval split's sampling (studies/policy.py's command calls this; its record
    goes into the split's config.json), never the training split's: its candidates need their final labels. command:
    what runs this extraction again in each process of launch_procs (None: this file)."""
    c = dict(config)
    if c['num_shards'] == 1 and 'WORLD_SIZE' in os.environ:  # under torchrun each rank is a shard
        c.update(shard=int(os.environ.get('RANK', 0)), num_shards=int(os.environ['WORLD_SIZE']))
    if not 0 <= c['shard'] < c['num_shards']:
        raise SystemExit(f"shard={c['shard']} must be in [0, num_shards={c['num_shards']}); fix: "
                         f"--shard=0..{c['num_shards'] - 1}")
    if c['mode'] not in ('sample', 'reencode'):
        raise SystemExit(f"mode={c['mode']!r} is unknown; fix: one of sample, reencode")
    if c['max_steps'] is not None and (not isinstance(c['max_steps'], int) or c['max_steps'] < 1):
        raise SystemExit(f"max_steps={c['max_steps']!r} must be a positive int or None (every step); fix: "
                         "--max_steps=100")
    if c['mode'] == 'reencode' and not c['candidates_file']:
        raise SystemExit("mode='reencode' needs candidates_file; fix: --candidates_file=pool.jsonl")
    try:
        c['step_kinds'] = stored_kinds(c['step_kinds'])
    except ValueError as e:
        raise SystemExit(str(e))
    cli(lambda x: check_positive(x, DEFAULTS, ('batch_size', 'n_train_samples', 'n_eval_samples', 'max_new_tokens',
                                               'conf_topk')), c, 'extract.py')
    cli(lambda x: check_between(x, DEFAULTS, SAMPLING), c, 'extract.py')
    if not isinstance(c['procs'], int) or c['procs'] < 0:
        raise SystemExit(f"procs={c['procs']!r} must be 0 (one per core) or a positive int; fix: --procs=0")
    out_dir = c['out_dir']
    check_writable('out_dir', out_dir)  # before any work: the splits, their config.json and the process logs go there
    device = c['device'] = resolve_device(c['device'])  # under torchrun: cuda:LOCAL_RANK
    cli(lambda x: check_weight_dtype(x['dtype'], device), c, 'extract.py')
    if device.startswith('cuda:'):
        torch.cuda.set_device(device)  # what allocates without naming a device (CUDA graphs, streams) goes there too
    if c['threads']:
        torch.set_num_threads(c['threads'])
    torch.manual_seed(c['seed'])
    splits = [(s, r, n) for s, r, n in (('train', c['train_range'], c['n_train_samples']),
                                        ('eval', c['eval_range'], c['n_eval_samples'])) if r]
    if c['dataset'] == 'synth':  # splits by operand multiset: train below the level's boundary, eval above it
        check_synth_ranges(c['synth_level'], c['synth_seed'], c['train_range'], c['eval_range'])
        c['synth_split'] = SYNTH_SPLIT
    if c['dataset'] == 'words':  # under word_split='numbers': train below the family's boundary, eval at or above it
        check_word_ranges(c['word_family'], c['synth_seed'], c['word_split'], c['train_range'], c['eval_range'])
    problems = {s: load_problems(c['dataset'], r[0], r[1], c['data_dir'], c['data_path'], c['synth_level'],
                                 c['synth_seed'], c['exclude_ids'], c['word_family'], c['word_split'])
                for s, r, _ in splits}
    if len(problems) == 2:
        check_disjoint(problems['train'], problems['eval'])
    # every core: a process per core (bench.py --only=procs); never more processes than batch_size rows fill, one on
    # CUDA (one GPU)
    n_procs = c['procs'] or (1 if device.startswith('cuda') else len(cpu_cores()))
    n_procs = min(n_procs, max(-(-len(problems[s]) * n // c['batch_size']) for s, _, n in splits)) if splits else 1
    weights = resolve_dtype(c['model'], c['dtype'], device, rows=c['batch_size'])  # 'auto' on a CPU: measured once
                                                                                      # here, the processes take it
    if c['mode'] == 'sample':  # before any process starts, whatever the prompt (exactly once the prompts are tokenized)
        cli(lambda x: check_positions(positions(x['model']), x['max_new_tokens']), c, 'extract.py')
    part = '' if c['num_shards'] == 1 else f"shard{c['shard']}of{c['num_shards']}"  # one run a folder (a shard) at once
    if c['num_shards'] == 1 and n_procs > 1:
        lock(out_dir, 'out_dir', part)
        per_split = {s: problems[s] for s, _, _ in splits}
        launch_procs(n_procs, extracted(per_split, out_dir), sum(map(len, per_split.values())), out_dir, c['threads'],
                     sys.argv[1:] + [f'--dtype={weights}'], command)
        print(f'done: {out_dir}')
        return
    gen_model, tok = load_generator(c['model'], device, weights)
    check_layers(gen_model, c['layers'])
    c.update(d_gen=gen_model.config.hidden_size, num_hidden_layers=gen_model.config.num_hidden_layers,
             weights_dtype=str(next(gen_model.parameters()).dtype).removeprefix('torch.'),
             has_chat_template=bool(getattr(tok, 'chat_template', None)), step_rule=STEP_RULE, sampler=SAMPLER)
    table = step_table(tok)
    pool = pool_ids(read_candidates_file(c['candidates_file']), tok, gen_model, c['candidates_file']) \
        if c['mode'] == 'reencode' else None
    prompt_lens = {s: [len(tok(build_prompt(tok, p, c['system_prompt'] if p['dataset'] not in GENERATED else None,
                                            c['enable_thinking']), add_special_tokens=False).input_ids)
                       for p in problems[s]] for s, _, _ in splits}
    if pool is None:
        cli(lambda x: check_positions(getattr(gen_model.config, 'max_position_embeddings', None), x['max_new_tokens'],
                                      max((n for ns in prompt_lens.values() for n in ns), default=0)), c, 'extract.py')
    room = check_memory(c, splits, problems, prompt_lens, gen_model, pool)  # every split, before the first starts
    lock(out_dir, 'out_dir', part)
    for split, _, n in splits:
        split_dir = os.path.join(out_dir, split)
        steered = steer if split == 'eval' else None
        cfg = {**c, 'split': split, 'n_samples': n, **(steered.record if steered else {})}
        check_resume(split_dir, cfg)
        atomic_write_json(cfg, os.path.join(split_dir, 'config.json'))
        try:
            run_split(split, problems[split], n, cfg, gen_model, tok, table, pool, steered, room)
        except ValueError as e:  # a steering setting the sampler refuses, or an overflow (each names the fix)
            raise SystemExit(str(e))
    print(f'done: {out_dir}')


if __name__ == '__main__':
    cli(run, configure(globals()), 'extract.py')  # config files, then --key=value, override the knobs above
