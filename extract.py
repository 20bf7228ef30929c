"""
Stage 1: sample N solutions per problem with a frozen causal LM and keep, while it decodes, the
hidden state at every reasoning-step boundary (no extra forward pass), plus per-token log-probs
and entropies for the cheap scorers. Writes one .pt file per problem (format: README). The problems and
their prompts come from tasks.py; the model, its sampler and its decoding cache from generator.py.

A step ends at the token just before a step delimiter (the first of a run of newline tokens); the last
token closes the final step; `max_steps` keeps the last 100 boundaries (None: all, for thinking traces,
with the </think> position stored so train.py chooses the steps). `layers` follows HF `hidden_states`
(-1 = final layer after the norm). The loop preallocates its KV cache, samples top-p from a top-64
prefilter with an exact fall back to the full sort (one uniform per row and step, so a row's tokens never
depend on which other rows still run), syncs with the host once per step and drops finished rows; the
tests prove the captured states equal a teacher-forced re-encoding. `torch_compile=True` compiles the step
over a static cache (a GPU option: slower than eager on CPU). `mode='reencode'` gives pools sampled
elsewhere (`candidates_file`) the same states. Writes are atomic per problem; a re-run resumes (a file
that does not load is extracted again); `shard`/`num_shards` split whole batches; mixing another
generator, layers, step rule, mode, sampling settings or data into a split dir is refused.

    python extract.py config/demo.py
    python extract.py config/gsm8k_1p7b.py --shard=0 --num_shards=4
    python extract.py config/demo.py --mode=reencode --candidates_file=pool.jsonl
"""
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch
from tqdm import tqdm

from configurator import configure, knobs
from generator import (PreallocLayer, check_layers, copy_rows, decode_cache, draw, eos_ids, full_nucleus,
                       hidden_selection, load_generator, nucleus)
from model import (DAMAGED, PRUNE_RULES, SEARCH_RULES, atomic_save, atomic_write_json, layer_columns, load_checkpoint,
                   policy, reads, resolve_device)
from tasks import GENERATED, MATH_SYSTEM, build_prompt, load_problems

HERE = os.path.dirname(os.path.abspath(__file__))

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
out_dir = 'out/demo'
model = 'smollm2'  # 'smollm2' (embedded SmolLM2-135M-Instruct) | hub id (Qwen/Qwen3-1.7B) | local folder | x.gguf
dataset = 'synth'  # 'synth' | 'words' | 'gsm8k' | 'math500' | 'aime' | 'olympiadbench'
data_dir = None  # folder with <dataset>/<file>.jsonl (e.g. '../shared/data'); None -> the Hugging Face hub via `datasets`
data_path = None  # a JSONL file for `dataset` (overrides data_dir)
exclude_ids = []  # dataset ids left out of the index ranges (the other rows keep their file index), e.g. OlympiadBench's two
synth_level = 2  # synthetic task: 1 | 2 | 3 | 4 operations (+ or -) on one-digit numbers
word_family = 'shop'  # dataset='words': GSM8K-style word problems generated in tasks.py: 'shop' | 'travel' | 'bake' | 'share' (WORD_FAMILIES)
synth_seed = 1337  # the order of the generated questions (synth and words): index i is always the same question
train_range = (0, 7)  # inclusive dataset indices of the verifier-training problems; None skips the split
eval_range = (8, 15)  # inclusive dataset indices of the held-out evaluation problems; None skips the split
n_train_samples = 64  # candidates per training problem (paper: 64)
n_eval_samples = 8  # candidates per evaluation problem (paper: 8)
mode = 'sample'  # 'sample' | 'reencode' (teacher-forced pass over candidates_file)
candidates_file = None  # reencode: JSONL of {index|id, text[, token_ids, finish]}
layers = [-1]  # HF hidden_states indices (0 = embeddings, -1 = final layer after norm); [-1,-2,-3,-4] = top-4
max_steps = 100  # step states stored per candidate: the last max_steps (paper: S <= 100) | None = every step (thinking
                 # traces: train.py's input_steps / max_steps then choose which to read, from one extraction)
enable_thinking = False  # Qwen3 chat template thinking mode
system_prompt = MATH_SYSTEM  # for the benchmark datasets; the synthetic task uses a worked example instead
max_new_tokens = 256
temperature = 0.7
top_p = 0.9
conf_topk = 20  # DeepConf token confidence: minus the mean log-prob of the top conf_topk tokens (untempered)
batch_size = 128  # sequences per forward pass (bench.py --only=procs: 128 fastest on 2 CPU cores); problems per batch = batch_size // n_samples
device = 'auto'  # 'auto' | 'cpu' | 'cuda'
dtype = 'auto'  # 'auto' (float16 on CUDA, float32 on CPU: faster than bfloat16 on CPUs without AMX/avx512_bf16) | 'float16' | 'bfloat16' | 'float32'
torch_compile = False  # True: torch.compile the decoding step over a static KV cache (CUDA graphs on GPU); rows stay in the batch until all finish
prune_ckpt = None  # online pruning of the eval split: a hidden-state verifier checkpoint, e.g. 'out/demo/verifiers/hsrm_seed42/ckpt.pt'; None = off
prune_rule = 'relative'  # 'relative' (stop a row scoring more than prune_threshold behind its pool's best) | 'global' (stop below prune_threshold)
prune_threshold = None  # the rule's threshold; steer.py's pruning table prints the one chosen on validation for each checkpoint
search = None  # verifier-steered search on the eval split: None | 'beam' (N rows, the best N / search_width kept at each
               # step, each continued search_width ways) | 'dvts' (N / search_width independent subtrees, each greedy)
search_ckpt = None  # the hidden-state verifier that steers it, e.g. 'out/words_shop/verifiers/hsrm_seed42/ckpt.pt'
search_width = 4  # M: rows each survivor continues as (divides n_eval_samples); M = 1 samples exactly as search=None
shard = 0  # this job's shard: whole batches of batch_size // n_samples problems, batch b to shard b % num_shards
num_shards = 1  # with torchrun, RANK / WORLD_SIZE set these when num_shards is 1
procs = 0  # processes that split the batches on this machine, each pinned to its own cores: 0 = one per core on CPU (never
           # slower here: bench.py --only=procs), 1 on CUDA | n. Candidates do not depend on it (batches are seeded alone)
seed = 1337
threads = 0  # CPU threads for torch in each process; 0 = torch's default (with procs > 1: the cores split among them)
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------
# what a step is: change it here. Sampling and re-encoding both decide boundaries with step_ends (on
# the table step_table builds), so the two paths can never disagree. STEP_RULE names the rule in the
# split's config.json: check_resume refuses to mix extractions made under different rules, so give a
# changed rule a new name.
STEP_RULE = 'newline'


def step_table(tok):
    """bool [vocab]: does the token's decoded text contain a newline. Built from decoded text, never a
    fixed id list: tokenizers merge newlines with other characters by context."""
    n = max(len(tok), max(tok.get_vocab().values()) + 1)
    return torch.tensor(['\n' in tok.decode([i]) for i in range(n)], dtype=torch.bool)


def step_ends(prev, cur, table):
    """bool, shaped like cur: does token `cur`, coming right after token `prev`, end a step? Newline rule:
    cur is the first newline token of a run (a run of newlines is one boundary). The state kept for the
    step is prev's: the one whose next-token prediction emitted the delimiter."""
    return table[cur] & ~table[prev]

# -----------------------------------------------------------------------------
# which boundaries are kept (the same for every rule)


def step_positions(ids, table):
    """Completion positions whose states are kept, for token ids [T], before the max_steps cut: t-1 for every
    t >= 1 where step_ends(ids[t-1], ids[t]) (a leading delimiter closes nothing), then T-1: the last
    token (before EOS, or at the length limit) always closes the final step."""
    ids = torch.as_tensor(ids, dtype=torch.long)
    if len(ids) == 0:
        return []
    return step_ends(ids[:-1], ids[1:], table).nonzero().squeeze(1).tolist() + [len(ids) - 1]


def think_end_index(tok, ids):
    """Index of the completion token that completes '</think>' (however the tokenizer splits it), or None.
    Binary search over decoded prefixes: once a prefix's text holds '</think>', every longer one does."""
    def has(i):
        return '</think>' in tok.decode(ids[:i + 1])
    if not len(ids) or not has(len(ids) - 1):
        return None
    lo, hi = 0, len(ids) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if has(mid) else (mid + 1, hi)
    return lo

# -----------------------------------------------------------------------------
# per-token statistics (shared by sampling and re-encoding)


def token_stats(logits, tokens, conf_topk=20):
    """Of the untempered distribution at each position (logits [..., V], tokens [...]): the chosen token's
    log-prob, the entropy, and the DeepConf token confidence = minus the mean log-prob of the conf_topk
    most likely tokens. All float32 [...]."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    ent = -(logp.exp() * logp).sum(-1)
    conf = -logp.topk(min(conf_topk, logp.shape[-1]), dim=-1).values.mean(-1)
    return logp.gather(-1, tokens[..., None]).squeeze(-1), ent, conf


def _fit(table, V):
    # the model's vocabulary may be padded past the tokenizer's: those ids are no delimiters
    return torch.cat([table, table.new_zeros((max(0, V - len(table)),) + table.shape[1:])])

# -----------------------------------------------------------------------------
# sampling with capture


@torch.no_grad()
def sample_with_capture(model, tok, prompts, n_samples, layers=(-1,), max_new_tokens=512, temperature=0.7,
                        top_p=0.9, seed=0, table=None, eos=None, max_steps=100, conf_topk=20,
                        torch_compile=False, verifier=None, prune_rule='relative', prune_threshold=0.0,
                        search=None, search_width=4):
    """Sample n_samples completions for each prompt in one left-padded batch. Returns a list (per prompt)
    of lists of candidate dicts (README format).

    The step costs what the model costs: a KV cache preallocated once (no per-step copies), top-p on the
    top-64 tokens (full sort only when their mass is short of top_p: same distribution), boundaries and
    statistics computed for all rows at once into device buffers (states in a ring of the last max_steps
    per row; max_steps=None: every state, in a buffer that doubles when a row fills it), one host sync per
    step (has a row finished? did a row need the full sort? did a row close a step?), finished rows leave
    the batch and the cache at once. Token i of row r draws the uniform draws[i, r] (seeded), whatever the
    other rows do. torch_compile: the decoding forward is compiled with a static cache (CUDA graphs on
    GPU); rows then stay in the batch until all finish.

    verifier (a hidden-state verifier, model.load_checkpoint) steers: at each decoding step where rows close a
    step it scores their prefixes (the states kept so far) and model.policy decides per row stop / continue /
    branch. search=None: online pruning with prune_rule / prune_threshold; a stopped row leaves the batch with
    finish='pruned' and its tokens up to that step boundary: what the offline replay of the same rule would
    cut. search='beam' | 'dvts' (width M = search_width): a row that closes a step waits (its slot idles,
    masked out of attention) until every row of its group has closed that step or finished; then the best
    ceil(rows / M) go on, each as M rows: the copies take the stopped rows' slots and copy their source's KV
    cache rows (no new prefill). Search candidates carry row, parent and inherited (the leading tokens shared
    with the parent), stopped ones included (finish='pruned'), and decoded: the tokens the row itself ran through the
    model, which generated_tokens() sums (a stopped row's step-closing token, and a copy re-running its source's,
    ran but are not among its token_ids)."""
    device = next(model.parameters()).device
    V = model.get_output_embeddings().weight.shape[0]
    table = _fit(step_table(tok) if table is None else table, V).to(device)
    eos = torch.tensor(eos_ids(model, tok) if eos is None else eos, device=device)
    gen = torch.Generator(device=device).manual_seed(seed)
    T, D = max_new_tokens, len(layers) * model.config.hidden_size
    steer = _Steer(verifier, layers, D, len(prompts), n_samples, search or prune_rule, prune_threshold,
                   search_width) if verifier else None
    if search and not steer:
        raise ValueError(f"search={search!r} needs a verifier to steer it; fix: --search_ckpt=<a hidden-state verifier ckpt.pt>")
    searching = bool(steer and steer.sync)
    if searching and torch_compile:
        raise ValueError(f"search={search!r} with torch_compile=True: search copies and idles rows, which the static "
                         f"compiled cache cannot; fix: torch_compile=False")
    s, Lp = _prefill(model, tok, prompts, n_samples, T, max_steps, D, torch_compile)
    if searching and not all(isinstance(l, PreallocLayer) for l in s.cache.layers):
        raise ValueError(f"search={search!r}: this model's cache has layers of another kind (e.g. sliding-window "
                         f"attention) than the preallocated ones search idles and copies rows in; fix: search=None")
    draws = torch.rand(T, len(s.rows), generator=gen, device=device)  # [token index, row id]; search's new rows add columns
    step = _decode_step(model, s.cache, layers, torch_compile)
    attn = model.config._attn_implementation
    if attn == 'sdpa' and device.type == 'cpu' and not torch_compile:
        model.config._attn_implementation = 'decode_sdpa'  # SDPA's arithmetic, faster at one query on CPU; restored below
    done_all, t = {}, 0
    while True:
        done, keep, at_max, col, any_done, any_keep, n_kept = _next_tokens(
            s, draws, temperature, top_p, eos, table, bool(steer or not max_steps))
        _capture(s, col, keep, n_kept, not max_steps, conf_topk)
        stop, plan = None, []
        if steer and any_keep:  # rows closed a step: the verifier scores them, policy stops / continues / branches
            stop, plan, release = steer.step(s.ring, s.count, keep, done, s.rows, min(n_kept, s.ring.shape[1] - 1))
            if searching:
                s.wait = (s.wait | (keep & ~done)) & ~release
        ended = done | stop if stop is not None else done
        if any_done or stop is not None:  # finished and stopped rows become candidates
            _collect(s, ended, stop, at_max, done_all)
        if plan:
            _branch(s, plan, steer, ended)
        s.fed = s.samp & ~ended  # rows whose new token goes through the model now
        if (any_done or stop is not None) and not _drop(s, ended, torch_compile):
            break
        b = len(s.rows)
        if searching:
            b = _front(s)
            if draws.shape[1] < steer.n_rows:
                draws = torch.cat([draws, torch.rand(T, steer.n_rows - draws.shape[1], generator=gen, device=device)], 1)
            if b == 0:  # every row waits for a group decided at its next boundary: nothing to run now
                continue
        _feed(s, step, b, Lp + t, T, searching, torch_compile)
        t += 1
    model.config._attn_implementation = attn
    return _results(tok, done_all, len(prompts), n_samples, steer.lineage if searching else None, max_steps, D)


class _Rows:
    """The decoding batch: every tensor below holds one entry per batch row (stats: along dim 1), and the KV cache
    one row per batch row, so dropping, copying or reordering rows moves them all together."""
    PER_ROW = ('rows', 'toks', 'ring', 'ring_pos', 'count', 'ln', 'bnd', 'ran', 'wait', 'live', 'mask', 'pos', 'nxt',
               'prev', 'logits', 'h_prev', 'samp', 'fed')

    def __init__(self, **tensors):
        self.__dict__.update(tensors)

    def take(self, i):  # keep batch rows i only
        self.cache.batch_select_indices(i)
        for k in self.PER_ROW:
            setattr(self, k, getattr(self, k)[i])
        self.stats = self.stats[:, i]

    def move(self, src, dst):  # batch rows dst become copies of rows src (src = dst reordered: a swap)
        for k in self.PER_ROW:
            getattr(self, k)[dst] = getattr(self, k)[src]
        self.stats[:, dst] = self.stats[:, src]
        copy_rows(self.cache, src, dst)


def _prefill(model, tok, prompts, n_samples, T, max_steps, D, static):
    """One forward over the left-padded prompts, then n_samples copies of each prompt's cache as the decoding
    cache (rows prompt-major), and the batch's row tensors. -> (_Rows, padded prompt length)"""
    from transformers import DynamicCache
    device = next(model.parameters()).device
    enc = tok(prompts, return_tensors='pt', padding=True, padding_side='left', add_special_tokens=False).to(device)
    P, Lp = enc.input_ids.shape
    B, cap, S = P * n_samples, Lp + T + 1, max_steps or 64
    cache = DynamicCache()
    out = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask, past_key_values=cache, use_cache=True,
                position_ids=(enc.attention_mask.cumsum(-1) - 1).clamp(min=0), logits_to_keep=1)
    cache = decode_cache(model, cache, n_samples, cap, static)
    mask = torch.zeros(B, cap, dtype=torch.long, device=device)
    mask[:, :Lp] = enc.attention_mask.repeat_interleave(n_samples, 0)
    z = lambda *shape, dtype=torch.long: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
    return _Rows(
        cache=cache, mask=mask,
        pos=mask.sum(-1) - 1,  # position id of each row's last token
        logits=out.logits[:, -1].float().repeat_interleave(n_samples, 0),
        rows=torch.arange(B, device=device),  # the row id of each batch row (search: copies get new ids)
        toks=z(B, T + 1),  # column T: scratch for rows that draw nothing
        stats=torch.zeros(3, B, T + 1, device=device),  # log-prob, entropy, confidence
        ring=z(B, S + 1, D, dtype=torch.float16),  # the last S kept states (S doubles when every state is kept); slot S: discard
        ring_pos=z(B, S + 1),
        count=z(B),  # kept states so far
        ln=z(B),  # tokens drawn so far
        bnd=z(B),  # tokens before the latest boundary: what an end keeps
        ran=z(B),  # tokens the row itself fed through the model (a copy: since it was made); a boundary token the cut drops still ran
        wait=z(B, dtype=torch.bool),  # search: closed a step, waits for its group
        live=torch.ones(B, dtype=torch.bool, device=device),  # rows still decoding (torch_compile keeps finished rows)
        samp=z(B, dtype=torch.bool),  # rows that draw a token this step
        fed=z(B, dtype=torch.bool),  # rows whose token goes through the model this step
        nxt=z(B), prev=z(B),  # this step's token and the one before it
        h_prev=torch.zeros(B, D, device=device)), Lp  # the state before nxt: kept if nxt closes a step


def _decode_step(model, cache, layers, static):
    """The decoding forward, one token per row: (logits [rows, V], the layers' states [rows, D]); compiled with
    static=True (CUDA graphs on GPU)."""
    sel = hidden_selection(model, layers)

    def forward(ids, mask, pos):
        o = model(input_ids=ids[:, None], attention_mask=mask, position_ids=pos[:, None], past_key_values=cache,
                  use_cache=True, output_hidden_states=sel)
        return o.logits[:, -1].float(), torch.cat([o.hidden_states[l][:, -1] for l in layers], dim=-1)
    if not static:
        return forward
    return torch.compile(forward, mode='reduce-overhead' if next(model.parameters()).device.type == 'cuda' else 'default')


def _sample(logits, u, temperature, top_p):
    """-> (next tokens [rows], (rows whose nucleus is wider than the prefilter, probs) or None)"""
    if temperature <= 0:
        return logits.argmax(-1), None
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p >= 1.0:
        return draw(probs, None, u), None
    w, ids, short = nucleus(probs, top_p)
    return draw(w, ids, u), (short, probs)


def _outcome(s, at_max, eos, table):
    """(rows that end now, rows whose state before token nxt is kept: nxt ends a step or the candidate)"""
    done = (torch.isin(s.nxt, eos) & s.samp) | at_max
    return done, done | (step_ends(s.prev, s.nxt, table) & s.samp & (s.ln > 0))


def _next_tokens(s, draws, temperature, top_p, eos, table, count_kept):
    """Draw this step's token for every running row (a row at max_new_tokens ends, 'length', and draws nothing),
    with the step's one host sync (has a row finished? did a row need the full sort? did a row close a step? the
    most states a row keeps, if count_kept). -> (done, keep, at_max, col, any_done, any_keep, n_kept)"""
    T, zero = draws.shape[0], s.ln.new_zeros(())
    go = s.live & ~s.wait
    at_max, s.samp = go & (s.ln >= T), go & (s.ln < T)
    col = torch.where(s.samp, s.ln, T)
    u = draws[col.clamp(max=T - 1), s.rows]
    new, short = _sample(s.logits, u, temperature, top_p)
    s.nxt = torch.where(s.samp, new, s.nxt)
    done, keep = _outcome(s, at_max, eos, table)
    flags = [done.any(), (short[0] & s.samp).any() if short is not None else zero, keep.any(),
             (s.count + keep).max() if count_kept else zero]
    any_done, any_short, any_keep, n_kept = torch.stack([f.long() for f in flags]).tolist()
    if any_short:  # rare: a nucleus wider than the prefilter; those rows draw from the full sort
        r = (short[0] & s.samp).nonzero().squeeze(1)
        s.nxt[r] = draw(*full_nucleus(short[1][r], top_p), u[r])
        done, keep = _outcome(s, at_max, eos, table)
        any_done, any_keep, n_kept = torch.stack([done.any().long(), keep.any().long(), (s.count + keep).max()]).tolist()
    return done, keep, at_max, col, any_done, any_keep, n_kept


def _capture(s, col, keep, n_kept, every, conf_topk):
    """Write the drawn tokens and their statistics, and the state before each token that closes a step or the
    candidate into the ring (every state kept: the ring doubles when a row fills it)."""
    ar = torch.arange(len(s.rows), device=s.rows.device)
    s.toks[ar, col] = s.nxt
    s.stats[:, ar, col] = torch.stack(token_stats(s.logits, s.nxt, conf_topk))
    S = s.ring.shape[1] - 1
    if every and n_kept > S:
        s.ring, s.ring_pos = (torch.cat([x[:, :S], x.new_zeros(x.shape[0], S + 1, *x.shape[2:])], 1)
                              for x in (s.ring, s.ring_pos))
        S *= 2
    kept_now = keep & (s.ln > 0)  # the first token has no state before it
    slot = torch.where(kept_now, s.count % S, S)
    s.ring[ar, slot] = s.h_prev.to(torch.float16)
    s.ring_pos[ar, slot] = s.ln - 1
    s.count += kept_now
    s.bnd = torch.where(keep, s.ln, s.bnd)
    s.ln = s.ln + s.samp


def _collect(s, ended, stop, at_max, done_all):
    """Rows that end now (finished, or stopped by the verifier: 'pruned') into done_all: row id -> (token ids,
    statistics, state positions, states, finish, tokens it ran), the states in step order."""
    S = s.ring.shape[1] - 1
    fin = ended.nonzero().squeeze(1)
    cut = stop[fin].tolist() if stop is not None else [False] * len(fin)
    rows, toks, stats, ring, ring_pos, count, bnd, length, ran = (x.cpu() for x in (
        s.rows[fin], s.toks[fin], s.stats[:, fin], s.ring[fin], s.ring_pos[fin], s.count[fin], s.bnd[fin], at_max[fin],
        s.ran[fin]))
    for j, r in enumerate(rows.tolist()):
        m, L = min(int(count[j]), S), int(bnd[j])
        slots = [(int(count[j]) - m + i) % S for i in range(m)]
        done_all[r] = (toks[j, :L].tolist(), stats[:, j, :L], ring_pos[j, slots].tolist(), ring[j, slots],
                       'pruned' if cut[j] else 'length' if length[j] else 'eos', int(ran[j]))


def _branch(s, plan, steer, ended):
    """Search: copies take the stopped rows' slots, with their source's cache rows and state (no prefill)."""
    src, dst = (torch.tensor(x, device=s.rows.device) for x in zip(*plan))
    s.move(src, dst)
    s.rows[dst] = torch.tensor(steer.branched(s.rows[src].tolist(), s.ln[src].tolist()), device=s.rows.device)
    s.ran[dst] = 0  # what the source ran is counted with the source
    ended[dst] = False


def _drop(s, ended, static):
    """Ended rows leave the batch and the cache (static: they stay, not live). -> whether any row is left."""
    if static:
        s.live &= ~ended
        return bool(s.live.any())
    kept = (~ended).nonzero().squeeze(1)
    if 0 < len(kept) < len(ended):
        s.take(kept)
    return len(kept) > 0


def _front(s):
    """Search: idle rows skip the forward. The fed rows move to the front (swapping rows); -> how many."""
    b = int(s.fed.sum())
    i, j = (~s.fed[:b]).nonzero().squeeze(1), s.fed[b:].nonzero().squeeze(1) + b
    if len(i):
        s.move(torch.cat([j, i]), torch.cat([i, j]))
    return b


def _feed(s, step, b, col, T, searching, static):
    """Run the first b rows' new tokens through the model at cache column col; an idle row keeps its logits and
    state, its (unwritten) column masked out."""
    if col + 1 > s.mask.shape[1]:  # search: idle steps used up the columns; grow the cache and the mask
        for layer in s.cache.layers:
            if hasattr(layer, 'grow'):  # a DynamicLayer concatenates anyway
                layer.grow(T)
        s.mask = torch.cat([s.mask, s.mask.new_zeros(len(s.mask), T)], 1)
    s.mask[:, col] = s.fed if searching else 1
    s.pos = s.pos + s.fed
    s.ran = s.ran + s.fed
    logits, h = step(s.nxt[:b], s.mask[:b] if static else s.mask[:b, :col + 1], s.pos[:b])
    if b < len(s.rows):
        s.logits[:b], s.h_prev[:b], s.prev[:b] = logits, h, s.nxt[:b]
    else:
        s.logits, s.h_prev, s.prev = logits, h, s.nxt


def _results(tok, done_all, n_prompts, n_samples, lineage, max_steps, D):
    """Per prompt, its candidates in row order (search: with row, parent, inherited and decoded)."""
    results = [[] for _ in range(n_prompts)]
    where = lineage if lineage is not None else {r: (r // n_samples, r % n_samples) for r in done_all}
    for r in sorted(done_all, key=lambda r: where[r][:2]):
        ids, st, spos, states, finish, n_ran = done_all[r]
        c = _candidate(tok, ids, st[0], st[1], st[2], spos, states, finish, max_steps, D)
        if lineage is not None:
            c['row'], c['parent'], c['inherited'] = where[r][1:]
            c['decoded'] = n_ran
        results[where[r][0]].append(c)
    return results


def generated_tokens(cands):
    """Tokens one problem's sampling ran through the generator: each search row's own decode forwards (decoded),
    else each candidate's tokens (plain sampling runs each once)."""
    return sum(c['decoded'] if 'decoded' in c else len(c['token_ids']) for c in cands)


class _Steer:
    """The verifier steering one sampling batch: per row id its latest prefix score (NaN before its first step),
    whether it still counts (not stopped, not finished: `active`), and for search whether it waits for its
    group, its group and its lineage; model.policy decides. Row ids p*N..p*N+N-1 start as prompt p's rows."""

    def __init__(self, verifier, layers, D, P, n_samples, rule, threshold, width):
        kind = verifier.spec['kind']
        if reads(kind, 'tokens') or not reads(kind, 'states'):
            raise ValueError(f"prune_ckpt / search_ckpt: a {kind!r} verifier reads text; steering scores hidden states "
                             f"as they arrive; fix: a hidden-state verifier (e.g. hsrm)")
        self.sync = rule in SEARCH_RULES
        if rule not in PRUNE_RULES + SEARCH_RULES or (threshold is None and not self.sync):
            raise ValueError(f"prune_rule={rule!r}, prune_threshold={threshold!r}; fix: a rule of {PRUNE_RULES} and a "
                             f"threshold (steer.py's pruning table prints the one chosen on validation)")
        if self.sync and not (isinstance(width, int) and 1 <= width <= n_samples and n_samples % width == 0):
            raise ValueError(f"search_width={width!r} with {n_samples} samples per problem; fix: a width M that divides N "
                             f"(beam keeps N / M rows at each step, DVTS runs N / M subtrees), e.g. --search_width=4")
        if verifier.spec.get('step_features') or verifier.spec.get('residual'):
            raise ValueError(f"the steering checkpoint reads step_features={verifier.spec.get('step_features')} / residual="
                             f"{verifier.spec.get('residual')!r} (token statistics), which online steering does not feed; "
                             f"fix: steer with a checkpoint trained on states alone (train.py defaults)")
        if verifier.spec['input_steps'] == 'answer':
            raise ValueError("the steering checkpoint reads input_steps='answer' (the steps after </think>), which online "
                             "steering does not track; fix: a checkpoint trained with input_steps='all' or 'last'")
        self.v, self.rule, self.th, self.n, self.width = verifier, rule, threshold, n_samples, width
        self.cols = layer_columns(layers, verifier.spec['layers'], D // len(layers), D, 'prune_ckpt / search_ckpt')
        B = P * n_samples
        self.latest, self.active, self.waiting = np.full(B, np.nan), np.ones(B, dtype=bool), np.zeros(B, dtype=bool)
        self.group = np.arange(B) // n_samples * n_samples + (np.arange(B) % n_samples // width if rule == 'dvts' else 0)
        self.lineage = {r: (r // n_samples, r % n_samples, None, 0) for r in range(B)}  # id -> (prompt, row, parent, inherited)
        self.next_row = [n_samples] * P

    @property
    def n_rows(self):
        return len(self.latest)

    def score(self, ring, count, b, width):
        """Prefix scores of batch rows b: their last `width` or fewer states, in step order, at most the
        verifier's max_steps (what model.first_step reads of the prefix)."""
        S, dev = ring.shape[1] - 1, next(self.v.parameters()).device
        width = min(width, self.v.spec.get('max_steps') or width)
        m = count[b].clamp(max=width)
        i = torch.arange(width, device=ring.device)
        valid = i[None] < m[:, None]
        if self.v.spec['input_steps'] == 'last':
            st, valid = ring[b, (count[b] - 1) % S][:, None], valid[:, :1]
        else:
            st = ring[b[:, None], (count[b, None] - m[:, None] + i) % S] * valid[..., None]  # [nb, width, D], padding 0
        if self.cols is not None:
            st = st[..., self.cols.to(st.device)]
        return self.v({'states': st.float().to(dev), 'step_mask': valid.to(dev)}).float().cpu().numpy()

    def step(self, ring, count, keep, done, rows, width):
        """Rows that closed a step or ended now: score, then decide with model.policy. -> (stop: bool [batch rows]
        or None, plan: [(source batch row, copy's batch row)], release: bool [batch rows] that stop waiting)."""
        b = (keep & (count > 0)).nonzero().squeeze(1)
        ids, kb, db = rows.cpu().numpy(), keep.cpu().numpy(), done.cpu().numpy()
        if len(b):
            self.latest[ids[b.cpu().numpy()]] = self.score(ring, count, b, width)
        release = np.zeros(len(ids), dtype=bool)
        if not self.sync:  # pruning: each prompt's rows are one pool, decided as rows arrive
            new = np.zeros(self.n_rows, dtype=bool)
            new[ids[kb]] = True
            stop = np.zeros_like(new)
            for p in np.unique(ids[kb] // self.n):
                sl = slice(p * self.n, (p + 1) * self.n)
                stop[sl] = self.active[sl] & (policy(self.rule, self.latest[sl], self.active[sl], new[sl], self.th) == 0)
            self.active &= ~stop
            return (torch.from_numpy(stop[ids]).to(rows.device) if stop.any() else None), [], None
        # search: finished rows leave their group, the others wait; a group whose active rows all wait is decided
        self.active[ids[db]] = False
        self.waiting[ids[kb & ~db]] = True
        where = {r: i for i, r in enumerate(ids.tolist())}
        stop, plan = np.zeros(len(ids), dtype=bool), []
        for g in np.unique(self.group[ids[kb]]):
            members = np.flatnonzero((self.group == g) & self.active)
            if not len(members) or not self.waiting[members].all():
                continue
            copies = policy(self.rule, self.latest[members], np.ones(len(members), bool), np.ones(len(members), bool),
                            width=self.width)
            free = [where[r] for r, k in zip(members, copies) if k == 0]
            for r, k in zip(members, copies):
                plan += [(where[r], free.pop()) for _ in range(k - 1)]
            self.active[members[copies == 0]] = False
            self.waiting[members] = False
            stop[[where[r] for r in members[copies == 0]]] = True
            release[[where[r] for r in members]] = True
        dev = rows.device
        return (torch.from_numpy(stop).to(dev) if stop.any() else None), plan, torch.from_numpy(release).to(dev)

    def branched(self, sources, inherited):
        """New row ids for copies of rows `sources` (ids) that share their first `inherited` tokens."""
        out = []
        for r, k in zip(sources, inherited):
            p, row = self.lineage[r][:2]
            self.lineage[self.n_rows] = (p, self.next_row[p], row, int(k))
            self.next_row[p] += 1
            out.append(self.n_rows)
            self.latest, self.active = np.append(self.latest, self.latest[r]), np.append(self.active, True)
            self.waiting, self.group = np.append(self.waiting, False), np.append(self.group, self.group[r])
        return out


def _candidate(tok, ids, lps, ents, confs, spos, states, finish, max_steps, d):
    """The candidate dict from captured positions [k] and states [k, d], of which it stores the last
    max_steps (None: all), and think_end: the token index completing '</think>' (None: no </think>),
    from which train.py's input_steps='answer' reads the steps after it."""
    keep = list(range(len(spos)))[-max_steps:] if max_steps else list(range(len(spos)))
    return {'text': tok.decode(ids, skip_special_tokens=True), 'token_ids': torch.tensor(ids, dtype=torch.long),
            'logprobs': torch.as_tensor(lps, dtype=torch.float32), 'entropies': torch.as_tensor(ents, dtype=torch.float32),
            'confidences': torch.as_tensor(confs, dtype=torch.float32),
            'step_pos': torch.tensor([spos[k] for k in keep], dtype=torch.long),
            'states': states[keep].to(torch.float16) if keep else torch.zeros(0, d, dtype=torch.float16),
            'finish': finish, 'think_end': think_end_index(tok, ids)}

# -----------------------------------------------------------------------------
# re-encoding existing candidates with one teacher-forced pass


@torch.no_grad()
def reencode(model, tok, prompts, completions, layers=(-1,), finishes=None, table=None, max_steps=100, conf_topk=20):
    """Same outputs as sampling for given completions (list of token-id lists, one per prompt in
    `prompts`): one left-padded forward pass over prompt + completion, computing only the selected
    layers' states and the completions' logits."""
    device = next(model.parameters()).device
    table = _fit(step_table(tok) if table is None else table, model.get_output_embeddings().weight.shape[0])
    finishes = finishes or ['eos'] * len(prompts)
    p_ids = [tok(p, add_special_tokens=False).input_ids for p in prompts]
    seqs = [p + list(c) for p, c in zip(p_ids, completions)]
    L, T_max = max(len(s) for s in seqs), max(len(c) for c in completions)
    ids = torch.full((len(seqs), L), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), L), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, L - len(s):], mask[i, L - len(s):] = torch.tensor(s), 1
    ids, mask = ids.to(device), mask.to(device)
    # sequences are right-aligned: completion i fills the last T_i positions; its logits are the T_i before
    out = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                output_hidden_states=hidden_selection(model, layers), logits_to_keep=T_max + 1)
    D = len(layers) * model.config.hidden_size
    cands = []
    for i, c in enumerate(completions):
        T = len(c)
        if T == 0:
            cands.append(_candidate(tok, [], [], [], [], [], None, finishes[i], max_steps, D))
            continue
        lp, en, cf = token_stats(out.logits[i, T_max - T:T_max], torch.tensor(c, device=device), conf_topk)
        spos = step_positions(c, table)
        at = L - T + torch.tensor(spos, device=device)
        st = torch.cat([out.hidden_states[l][i, at] for l in layers], dim=-1).cpu()
        cands.append(_candidate(tok, list(c), lp.cpu(), en.cpu(), cf.cpu(), spos, st, finishes[i], max_steps, D))
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


def run_split(split, problems, n, cfg, model, tok, table, pool=None, verifier=None):
    """Extract one split into {out_dir}/{split}/problems/, skipping finished problems (finished()). Problems go
    in fixed batches of batch_size // n, each seeded by the run seed and its first problem, and a batch with
    any file missing or damaged is redone whole (only those files are written): a resumed or sharded run
    samples exactly what one uninterrupted run would."""
    split_dir = os.path.join(cfg['out_dir'], split)
    path = lambda p: os.path.join(split_dir, 'problems', f"{p['index']:06d}.pt")  # noqa: E731
    per_batch = max(1, cfg['batch_size'] // n)
    batches = [problems[i:i + per_batch] for i in range(0, len(problems), per_batch)][cfg['shard']::cfg['num_shards']]
    mine = sum(len(b) for b in batches)
    done, damaged = finished([p for b in batches for p in b], path)
    todo = [b for b in batches if not all(path(p) in done for p in b)]
    n_todo = mine - len(done)
    print(f"{split}: {len(problems)} problems, shard {cfg['shard']}/{cfg['num_shards']} has {mine}, "
          f"{len(done)} done already, {n_todo} to go{f' ({damaged} of them damaged files that do not load)' if damaged else ''}, "
          f"{n} samples each")
    bar, n_tok, t0 = tqdm(total=n_todo, desc=f'extract {split}', unit='problem'), 0, time.time()
    for batch in todo:
        prompts = [build_prompt(tok, p, cfg['system_prompt'] if p['dataset'] not in GENERATED else None,
                                cfg['enable_thinking']) for p in batch]
        if pool is None:
            res = sample_with_capture(model, tok, prompts, n, cfg['layers'], cfg['max_new_tokens'], cfg['temperature'],
                                      cfg['top_p'], seed=cfg['seed'] * 1_000_003 + batch[0]['index'], table=table,
                                      max_steps=cfg['max_steps'],
                                      conf_topk=cfg['conf_topk'], torch_compile=cfg['torch_compile'], verifier=verifier,
                                      prune_rule=cfg['prune_rule'], prune_threshold=cfg['prune_threshold'],
                                      search=cfg['search'], search_width=cfg['search_width'])
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
                                        table, cfg['max_steps'], cfg['conf_topk'])
        for p, prompt, cands in zip(batch, prompts, res):
            if path(p) in done:
                continue
            key = f"{p['index']:06d}"
            extra = {'generated_tokens': generated_tokens(cands)} if cfg['search'] else {}
            atomic_save({**p, 'key': key, 'prompt': prompt, 'layers': list(cfg['layers']), 'candidates': cands, **extra},
                        path(p))
            n_tok += sum(len(c['token_ids']) for c in cands)
            bar.update(1)
        bar.set_postfix(tok_s=f'{n_tok / (time.time() - t0):.0f}')
    bar.close()


def finished(problems, path):
    """(paths of `problems` already extracted, how many files did not load). A file that does not load (an
    interrupted copy, a full disk) is extracted again; one holding another question or gold than the
    problem at its index means the data source changed (dataset file, exclude_ids, synthetic level or
    seed): an error, since the split would mix two data sets. Files are memory-mapped: their states are
    never read."""
    done, damaged = set(), 0
    for p in problems:
        if not os.path.exists(path(p)):
            continue
        try:
            old = torch.load(path(p), weights_only=True, mmap=True)
        except DAMAGED:
            damaged += 1
            continue
        if (old['question'], old['gold']) != (p['question'], p['gold']):
            raise SystemExit(f"{path(p)} holds {old['dataset']} problem {old['id']!r} ({old['question'][:60]!r}, gold "
                             f"{old['gold']!r}), this run's index {p['index']} is {p['dataset']} problem {p['id']!r} "
                             f"({p['question'][:60]!r}, gold {p['gold']!r}): the data changed (dataset, its file, "
                             f"exclude_ids, synth_level, word_family, synth_seed); fix: a new --out_dir, or the data it was extracted from")
        done.add(path(p))
    return done, damaged


def check_resume(split_dir, cfg):
    """Refuse to mix, in one split dir, outputs of different generators, layers, step rules, pruning, sampling
    settings or data selection (finished() compares the data itself: a moved data_dir is fine). A key its
    config.json lacks (written by an older version) is unknown and not compared."""
    path = os.path.join(split_dir, 'config.json')
    if os.path.exists(path) and glob.glob(os.path.join(split_dir, 'problems', '*.pt')):
        old = json.load(open(path))
        if old.get('enable_thinking') and 'think_extract' in old:  # written before </think> positions were stored
            raise SystemExit(f"{split_dir} holds a thinking-mode extraction (think_extract={old['think_extract']!r}) made "
                             f"before the </think> position was stored; fix: a new --out_dir, or delete {split_dir}")
        keys = ['model', 'layers', 'dataset', 'mode', 'enable_thinking', 'step_rule', 'max_steps', 'conf_topk',
                'prune_ckpt', 'prune_rule', 'prune_threshold', 'search', 'search_ckpt', 'search_width', 'exclude_ids']
        keys += {'synth': ['synth_level', 'synth_seed'], 'words': ['word_family', 'synth_seed']}.get(
            cfg['dataset'], ['system_prompt'])  # the generated tasks have no system prompt
        if cfg['mode'] == 'sample':  # re-encoding samples nothing
            keys += ['temperature', 'top_p', 'max_new_tokens', 'seed', 'n_samples']
        norm = lambda k, v: sorted(map(str, v)) if k == 'exclude_ids' else json.loads(json.dumps(v, default=str))  # noqa: E731
        for k in keys:
            if k in old and norm(k, old[k]) != norm(k, cfg[k]):
                name = f"n_{cfg['split']}_samples" if k == 'n_samples' else k
                raise SystemExit(f"{split_dir} holds an extraction with {name}={old[k]!r}, this run has {name}={cfg[k]!r}; "
                                 f"fix: a new --out_dir (or {name}={old[k]!r} to resume this one), or delete {split_dir}")


def cpu_cores():
    """The cores this process may run on (its affinity where the OS tells it)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else list(range(os.cpu_count() or 1))


def launch_procs(n, per_split, out_dir, threads=0, argv=None):
    """Run this extraction as n processes on this machine: process i is shard i of n (`--shard=i --num_shards=n`),
    pinned to its share of the cores with `threads` threads (0: that share), its log in {out_dir}/procs/.
    One bar counts the files the processes write. `per_split`: {split: problems}. Returns when all are done;
    a failed process stops the others and its log's tail is the error."""
    argv = sys.argv[1:] if argv is None else argv
    cores = cpu_cores()
    share = [cores[i * len(cores) // n:(i + 1) * len(cores) // n] or [cores[i % len(cores)]] for i in range(n)]
    os.makedirs(os.path.join(out_dir, 'procs'), exist_ok=True)
    logs, jobs = [os.path.join(out_dir, 'procs', f'shard{i}.log') for i in range(n)], []
    for i in range(n):
        t = str(threads or len(share[i]))
        cmd = [sys.executable, os.path.join(HERE, 'extract.py'), *argv, f'--shard={i}', f'--num_shards={n}', '--procs=1',
               f'--threads={t}']
        pin = (lambda c=share[i]: os.sched_setaffinity(0, c)) if hasattr(os, 'sched_setaffinity') else None
        with open(logs[i], 'w') as log:  # the child keeps its own copy of the handle
            jobs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=pin,
                                         env={**os.environ, 'OMP_NUM_THREADS': t}))
    files = lambda: sum(len(glob.glob(os.path.join(out_dir, s, 'problems', '*.pt'))) for s in per_split)  # noqa: E731
    total = sum(per_split.values())
    bar = tqdm(total=total, initial=min(total, files()), desc=f'extract ({n} processes, logs in {out_dir}/procs)', unit='problem')
    try:  # until all are done or one has failed
        while any(j.poll() is None for j in jobs) and all(j.returncode in (None, 0) for j in jobs):
            time.sleep(1)
            bar.update(min(total, files()) - bar.n)
    finally:
        for j in jobs:
            if j.poll() is None:
                j.terminate()
                j.wait()
        bar.close()
    failed = [i for i, j in enumerate(jobs) if j.returncode != 0]
    if failed:
        tail = open(logs[failed[0]]).read()[-3000:]
        raise SystemExit(f"extraction process {failed[0]} of {n} failed (log {logs[failed[0]]}); its last lines:\n{tail}")

if __name__ == '__main__':
    config = configure(globals())  # config files, then --key=value, override the knobs above
    if num_shards == 1 and 'WORLD_SIZE' in os.environ:
        shard, num_shards = int(os.environ.get('RANK', 0)), int(os.environ['WORLD_SIZE'])
        config.update(shard=shard, num_shards=num_shards)
    if not 0 <= shard < num_shards:
        raise SystemExit(f"shard={shard} must be in [0, num_shards={num_shards}); fix: --shard=0..{num_shards - 1}")
    if mode not in ('sample', 'reencode'):
        raise SystemExit(f"mode={mode!r} is unknown; fix: one of sample, reencode")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise SystemExit(f"max_steps={max_steps!r} must be a positive int or None (every step); fix: --max_steps=100")
    if mode == 'reencode' and not candidates_file:
        raise SystemExit("mode='reencode' needs candidates_file; fix: --candidates_file=pool.jsonl")
    if not isinstance(procs, int) or procs < 0:
        raise SystemExit(f"procs={procs!r} must be 0 (one per core) or a positive int; fix: --procs=0")
    device = resolve_device(device)
    config['device'] = device
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    splits = [(s, r, n) for s, r, n in (('train', train_range, n_train_samples), ('eval', eval_range, n_eval_samples)) if r]
    problems = {s: load_problems(dataset, r[0], r[1], data_dir, data_path, synth_level, synth_seed, exclude_ids, word_family)
                for s, r, _ in splits}
    # every core: a process per core is 1.3x one process on torch's threads at 64 rows, level at 128 (bench.py
    # --only=procs) and never slower; never more processes than batches, and one on CUDA (one GPU)
    n_procs = procs or (1 if device.startswith('cuda') else len(cpu_cores()))
    n_procs = min(n_procs, max(-(-len(problems[s]) // max(1, batch_size // n)) for s, _, n in splits)) if splits else 1
    if num_shards == 1 and n_procs > 1:
        launch_procs(n_procs, {s: len(problems[s]) for s, _, _ in splits}, out_dir, threads)
        print(f'done: {out_dir}')
        raise SystemExit(0)
    gen_model, tok = load_generator(model, device, dtype)
    check_layers(gen_model, layers)
    config.update(d_gen=gen_model.config.hidden_size, num_hidden_layers=gen_model.config.num_hidden_layers,
                  has_chat_template=bool(getattr(tok, 'chat_template', None)), step_rule=STEP_RULE)
    table = step_table(tok)
    pool = read_candidates_file(candidates_file) if mode == 'reencode' else None
    verifier = None
    if search not in (None,) + SEARCH_RULES:
        raise SystemExit(f"search={search!r} is unknown; fix: None, or one of {', '.join(SEARCH_RULES)}")
    if search and prune_ckpt:
        raise SystemExit(f"search={search!r} and prune_ckpt={prune_ckpt!r}: one verifier steers a split; fix: --prune_ckpt=None "
                         f"(search stops rows itself) or --search=None")
    for key, ckpt in (('prune_ckpt', prune_ckpt), ('search_ckpt', search_ckpt if search else None)):
        if not ckpt:  # the training split is never steered: its candidates need their final labels
            continue
        if mode == 'reencode':
            raise SystemExit(f"{key} steers sampling; fix: mode='sample', or {key}=None to re-encode")
        if not os.path.isfile(ckpt):
            raise SystemExit(f"{key}={ckpt!r} not found; fix: train a verifier first (python train.py <config>)")
        verifier = load_checkpoint(ckpt, device)[0]
    if search and verifier is None:
        raise SystemExit(f"search={search!r} needs search_ckpt; fix: --search_ckpt=<verifiers/hsrm_seed42/ckpt.pt>")
    for split, _, n in splits:
        split_dir = os.path.join(out_dir, split)
        cfg = {**config, 'split': split, 'n_samples': n}
        if split != 'eval':
            cfg.update(prune_ckpt=None, prune_threshold=None, search=None, search_ckpt=None)
        check_resume(split_dir, cfg)
        atomic_write_json(cfg, os.path.join(split_dir, 'config.json'))
        try:
            run_split(split, problems[split], n, cfg, gen_model, tok, table, pool, verifier if split == 'eval' else None)
        except ValueError as e:  # a pruning setting the sampler refuses (names the key and the fix)
            raise SystemExit(str(e))
    print(f'done: {out_dir}')
