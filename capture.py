"""
Sampling with capture, shared by extract.py (the study's splits) and sample.py (best-of-N for new questions): what a
step is (the step rule), the decoding loop that keeps the hidden state at every step boundary while it samples (no
extra forward pass) and that a steering policy handed to it as an object stops, holds and branches rows in (pruning,
beam / DVTS search: studies/policy.py), and the teacher-forced re-encoding that gives candidates sampled elsewhere the
same states and statistics. The model, its sampler and its decoding cache come from generator.py; the candidate dict
is the on-disk format (README).

A step ends at the token just before a step delimiter (the first of a run of newline tokens); the last token closes
the final step; `max_steps` keeps the last max_steps boundaries (None: all, for thinking traces, with the </think>
position stored so train.py chooses the steps). `layers` follows HF `hidden_states` (-1 = final layer after the
norm). The loop preallocates its KV cache, samples top-p from a top-64 prefilter with an exact fall back to the full
sort (one uniform per row and step, so a row's tokens never depend on which other rows still run), syncs with the
host once per step and drops finished rows; the tests prove the captured states equal a teacher-forced re-encoding.
"""
import heapq
from collections import deque

import torch

from generator import (TOPK_PREFILTER, candidate_key, decode_step, draw, eos_ids, full_nucleus,
                       hidden_selection, move_rows, nonfinite, nucleus, prefill, prompt_groups, put_prompts, row_cache,
                       token_stats, uniforms, vocab_stats)
from machine import LOGIT_CHUNK, fit_rows, reencode_bytes
from model import STEP_KINDS
from tasks import batch_prompts

# -----------------------------------------------------------------------------
# what a step is: change it here. Sampling and re-encoding both decide boundaries with step_ends (on
# the table step_table builds), so the two paths can never disagree. STEP_RULE names the rule in the
# split's config.json: check_resume refuses to mix extractions made under different rules, so give a
# changed rule a new name.
STEP_RULE = 'newline'
# with bfloat16 weights on CPU the decoding attention reads a row buffer's written columns (the batch's longest), or
# its whole capacity once they pass this share of it (below it, decode_attention copies them, as torch's bfloat16 bmm
# runs slowly on a strided slice); in float32 always the whole capacity, as a column count that follows the batch
# moved a candidate's float32 rounding with its shard (AMD EPYC under ONEDNN_MAX_CPU_ISA=AVX2)
WHOLE_ABOVE = 0.75
# how candidates are drawn, recorded in each split's config.json (a resume under another is refused): 'counter' = one
# uniform per candidate and token from (seed, problem, sample, token) alone (generator.uniforms), in continuous batches
SAMPLER = 'counter'


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


def _fit(table, V):
    # the model's vocabulary may be padded past the tokenizer's: those ids are no delimiters
    return torch.cat([table, table.new_zeros((max(0, V - len(table)),) + table.shape[1:])])


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
# sampling with capture


@torch.no_grad()
def sample_with_capture(model, tok, prompts, n_samples, layers=(-1,), max_new_tokens=512, temperature=0.7,
                        top_p=0.9, seed=0, table=None, eos=None, max_steps=100, conf_topk=20,
                        torch_compile=False, steer=None, step_kinds=('boundary',), rows=None, keys=None, frame=None):
    """n_samples completions for each prompt: a list (per prompt) of lists of candidate dicts (README format), in
    sample order. sample_stream's loop, every prompt's candidates collected; its arguments are these."""
    out = [None] * len(prompts)
    for i, cands in sample_stream(model, tok, prompts, n_samples, layers, max_new_tokens, temperature, top_p, seed,
                                  table, eos, max_steps, conf_topk, torch_compile, steer, step_kinds, rows, keys,
                                  frame):
        out[i] = cands
    return out


@torch.no_grad()
def sample_stream(model, tok, prompts, n_samples, layers=(-1,), max_new_tokens=512, temperature=0.7, top_p=0.9,
                  seed=0, table=None, eos=None, max_steps=100, conf_topk=20, torch_compile=False, steer=None,
                  step_kinds=('boundary',), rows=None, keys=None, frame=None, first_sample=0):
    """Sample n_samples completions of each prompt with continuous batching, yielding (prompt index, its candidates)
    as each prompt's last candidate ends. They are samples first_sample .. first_sample + n_samples - 1: a pool grown
    from 8 to 16 candidates samples 8-15 alone, and gets what one run of 16 would.

    `rows` rows decode at once (None: every candidate at once). A row that ends (EOS, max_new_tokens, or stopped by
    steering) takes the next waiting candidate in the same step: its prompt (all but the last token, prefilled once
    per prompt and kept until its samples have started) is copied into the row's KV cache, and the last prompt token
    goes through the decoding forward with the other rows' tokens. Each row writes at its own cache column and
    position, so no row waits for another. Once no candidate waits, ended rows leave the batch (the last rows move
    into their slots). Candidate j of prompt i draws token t with the uniform of (seed, keys[i], j, t)
    (generator.uniforms; keys None: the prompt indices), so its tokens depend on nothing else: not on the rows
    around it, their order or when it started. Nor does its arithmetic on CPU, given frame = (width, common)
    (prompt_frame of every prompt a run may sample: extract.py passes the dataset's): the prompt store is width
    columns wide and the first `common` tokens, shared by every prompt, are prefilled once; each prompt's rest is
    prefilled alone (no padding), so a prompt's keys and values and the reductions over them do not follow the batch
    (tested). In bfloat16 the attention over a row's own columns reads the batch's written columns, whose count does:
    a float's last bits can move with it (no token did in the tests); in float32 it reads them all (WHOLE_ABOVE),
    but float32's few-row matmul kernels can still move a float's last bits with the batch's row count on some CPUs
    (generator.MIN_ROWS). frame None: from these prompts.

    The step costs what the model costs: the KV cache preallocated once (on CPU a prompt's keys and values once, read
    by all its rows in one matmul: generator.decode_attention), top-p on the top-64 tokens (the full sort
    only for rows whose top-64 mass is short of top_p: the same distribution), boundaries and statistics for all rows
    at once in device buffers (states in a ring of the last max_steps per row; max_steps=None: every state, the ring
    doubling when a row fills it), one host sync per step. Every candidate records `decoded`: the tokens its row ran
    through the decoding forward (its prompt's last token and its own tokens; a search copy's since it was made), so
    the decoding forwards add up to the candidates' decoded (store.generated_tokens). torch_compile: the decoding
    forward is compiled over fixed shapes (CUDA graphs on GPU): every row runs every step, an ended row idle until
    refilled.

    steer: a steering policy (studies/policy.py's Steering; the rules live there). A steered prompt's rows start
    together (its n_samples rows wait for as many free rows) and it gets its own steerer, steer.start(layers, D, 1,
    n_samples, kinds, device), whose step(ring, count, keep, done, rows, width, fring) scores the prefixes of its rows
    that closed a step and says (stop: bool per row or None, plan: [(source row, copy's row)], release: bool per row).
    A stopped row ends with finish='pruned' and its tokens up to that step boundary: what the offline replay of the
    same rule would cut. With steerer.sync (search), a row that closes a step waits (runs no forward) until released;
    the copies of a plan take the stopped rows' slots and copy their source's KV cache rows (no new prefill), their
    row ids from steerer.branched(sources, inherited), and the candidates carry row, parent and inherited
    (steerer.lineage: the leading tokens shared with the parent). steerer.features: the step features
    (model.step_feature_matrix) are kept beside the ring.

    step_kinds: what is stored per step (model.STEP_KINDS; 'boundary' always): 'mean' keeps a running sum of each
    row's token states since its last boundary, 'least' the state of its least likely token so far; both go into the
    ring beside the boundary state when a step closes."""
    device = next(model.parameters()).device
    V = model.get_output_embeddings().weight.shape[0]
    table = _fit(step_table(tok) if table is None else table, V).to(device)
    eos = torch.tensor(eos_ids(model, tok) if eos is None else eos, device=device)
    T, D, kinds = max_new_tokens, len(layers) * model.config.hidden_size, stored_kinds(step_kinds)
    searching = bool(steer and steer.sync)
    if steer and first_sample:
        raise ValueError(f"first_sample={first_sample} with a steering policy: its steerer numbers a prompt's rows "
                         "from 0; fix: steer a fresh extraction (first_sample=0)")
    if searching and torch_compile:
        raise ValueError(f"search={steer.rule!r} with torch_compile=True: search idles and copies rows, which the "
                         f"compiled fixed-shape step cannot; fix: torch_compile=False")
    ids = [tok(p, add_special_tokens=False).input_ids for p in prompts]
    if not ids:
        return
    if not all(ids):
        raise ValueError(f"prompt {[len(x) for x in ids].index(0)} has no tokens; fix: a non-empty prompt")
    keys = list(range(len(prompts))) if keys is None else [int(k) for k in keys]
    B = min(rows or len(prompts) * n_samples, len(prompts) * n_samples)
    B = max(B, n_samples) if steer else B  # a steered prompt's rows start together
    fast = model.config._attn_implementation == 'sdpa' and device.type == 'cpu' and not torch_compile
    width, common = frame or (max(map(len, ids)), common_prefix(ids))
    if max(map(len, ids)) > width or common > common_prefix(ids):
        raise ValueError(f"frame={frame}: a prompt has {max(map(len, ids))} tokens, these prompts share "
                         f"{common_prefix(ids)}; fix: frame=prompt_frame of every prompt the run samples")
    s = _rows(model, B, width + T, T, max_steps, D, kinds, bool(steer and steer.features),
              whole=0.0 if torch_compile else (WHOLE_ABOVE if next(model.parameters()).dtype != torch.float32 else 0.0)
              if fast else 1.0, static=torch_compile, slots=min(B, len(ids)) if fast else 0,
              common=common if fast else 0)
    s.seed, s.keys = seed, keys
    step = decode_step(model, s.cache, layers, torch_compile, fast)
    jobs = {}  # prompt index -> {'todo': candidates not started, 'left': rows in the batch, 'done': {row id: data},
               # 'steer': its steerer}
    queue = deque(range(len(prompts)))
    _admit(model, s, ids, keys, seed, n_samples, queue, jobs, steer, (layers, D, kinds, device), first_sample)
    while s.n_live:
        _feed(s, step)
        done, keep, at_max, col, any_done, any_keep, n_kept, stats = _next_tokens(
            s, temperature, top_p, eos, table, bool(steer or not max_steps), conf_topk)
        _capture(s, col, keep, at_max, n_kept, not max_steps, stats)
        stop, plan = None, []
        if steer and any_keep:  # rows closed a step: the verifier scores them, the policy stops / continues /
            stop, plan, release = _steer(s, jobs, keep, done, min(n_kept, s.ring.shape[1] - 1))  # branches
            if searching:
                s.wait[:s.m] = (s.wait[:s.m] | (keep & ~done)) & ~release
        ended = done | stop if stop is not None else done
        if any_done or stop is not None:  # finished and stopped rows become candidates
            _collect(s, ended, stop, at_max, jobs)
        if plan:
            _branch(s, plan, jobs, ended)
        if any_done or stop is not None:
            s.live[:s.m] &= ~ended
            for i in [i for i, j in jobs.items() if not j['todo'] and not j['left']]:
                if 'slot' in jobs[i]:  # its prompt's keys and values are no longer read
                    heapq.heappush(s.free, jobs[i]['slot'])
                yield i, _results(tok, jobs.pop(i), max_steps, D, kinds)
            _admit(model, s, ids, keys, seed, n_samples, queue, jobs, steer, (layers, D, kinds, device), first_sample)
        if searching:
            _front(s)


def common_prefix(ids):
    """How many leading tokens every prompt (token id lists) shares, short of each one's last token."""
    n = min(map(len, ids)) - 1
    for i, t in enumerate(ids[0][:n]):
        if any(x[i] != t for x in ids):
            return i
    return max(n, 0)


class _Rows:
    """The decoding batch: every tensor in PER_ROW holds one entry per row (stats: along dim 1), allocated once for
    every row; rows [0, m) are in use (the rest free), and of them the first b run the next forward. The KV cache
    holds one row per row, so moving rows moves them all together."""
    PER_ROW = ('job', 'rid', 'key', 'slot', 'plen', 'w', 'pos', 'toks', 'ring', 'ring_pos', 'count', 'ln', 'bnd', 'ran',
               'wait', 'live', 'nxt', 'prev', 'logits', 'h_prev', 'samp', 'acc', 'acc_n', 'least_lp', 'least_h', 'fsum',
               'fring')

    def __init__(self, **tensors):
        self.__dict__.update(tensors)

    def move(self, src, dst):  # rows dst become copies of rows src (src = dst reordered: a swap)
        for k in self.PER_ROW:
            getattr(self, k)[dst] = getattr(self, k)[src]
        self.stats[:, dst] = self.stats[:, src]
        move_rows(self.cache, src, dst)


def _rows(model, B, cap, T, max_steps, D, kinds, feats, whole, static, slots=0, common=0):
    """B free rows: their KV cache of capacity cap (the longest prompt and max_new_tokens T) and every per-row
    tensor (feats: keep each step's features for a step-feature verifier that steers; whole: attention reads the
    whole capacity once the written columns pass this share of it, else those; static: rows never move, every row
    runs every step: the compiled step's fixed shapes; slots:
    the prompts' keys and values sit once per prompt in a store of that many slots (the `common` leading tokens every
    prompt shares prefilled once), read by decode_attention, and a row's own buffer holds T + 1 columns; else every
    row holds its prompt's copy)."""
    device = next(model.parameters()).device
    if slots:  # a row runs its prompt's last token, then its own (the last: for its state)
        cache, shared = row_cache(model, B, T + 1, slots, cap - T - 1)
        cap = T + 1
    else:
        cache, shared = row_cache(model, B, cap)
    S = max_steps or 64
    z = lambda *shape, dtype=torch.long: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
    return _Rows(
        cache=cache, shared=shared, cap=cap, whole=whole, static=static, dtype=next(model.parameters()).dtype, T=T,
        kv={},  # prompt index -> (its prefill cache, its row there): kept until every candidate of it has started
        # (without a prompt store)
        free=list(range(slots)) if slots else None,  # the prompt store's free slots (a heap: the lowest first)
        common=common, prefix=None,  # the prompts' shared leading tokens and their prefill (with a prompt store)
        # host ints: rows in use, rows holding a candidate, rows the next forward runs, the largest write column
        m=0, n_live=0, b=0, wmax=0,
        job=z(B), rid=z(B),  # each row's prompt index and row id within it (its sample; search: its lineage row)
        slot=z(B), plen=z(B),  # its prompt's slot in the prompt store and that prompt's columns there
        key=z(B),  # its candidate_key: what its draws come from
        w=z(B), pos=z(B),  # the cache column and the position id of the token it feeds next
        logits=torch.zeros(B, model.get_output_embeddings().weight.shape[0], dtype=next(model.parameters()).dtype,
                           device=device),  # the model's dtype: vocab_stats converts what it reads
        toks=z(B, T + 1),  # column T: scratch for rows that draw nothing
        stats=torch.zeros(3, B, T + 1, device=device),  # log-prob, entropy, confidence
        ring=z(B, S + 1, D * len(kinds), dtype=torch.float16),  # the last S kept states, the kinds side by side
        # (S doubles when every state is kept); slot S: discard
        ring_pos=z(B, S + 1),
        count=z(B),  # kept states so far
        ln=z(B),  # tokens drawn so far
        bnd=z(B),  # tokens before the latest boundary: what an end keeps
        ran=z(B),  # tokens the row fed through the model (a copy: since it was made)
        wait=z(B, dtype=torch.bool),  # search: closed a step, waits for its group
        live=z(B, dtype=torch.bool),  # rows holding a candidate
        samp=z(B, dtype=torch.bool),  # rows that draw a token this step
        nxt=z(B), prev=z(B),  # the token fed next (drawn this step) and the one fed before it
        h_prev=torch.zeros(B, D, device=device),  # the state of prev: kept if nxt closes a step
        # the open step's token states so far (width 0 when that kind is not stored): their sum and count ('mean'),
        # the lowest log-prob and its token's state ('least')
        acc=torch.zeros(B, D * ('mean' in kinds), device=device), acc_n=z(B),
        least_lp=torch.full((B,), float('inf'), device=device),
        least_h=torch.zeros(B, D * ('least' in kinds), device=device),
        # each kept step's mean log-prob, entropy and confidence (model.step_feature_matrix), beside the ring: what a
        # step-feature verifier reads when it steers (width 0 otherwise)
        fsum=torch.zeros(B, 3 * feats, device=device), fring=torch.zeros(B, S + 1, 3 * feats, device=device))


def _admit(model, s, ids, keys, seed, n, queue, jobs, steer, where, first=0):
    """Free rows take waiting candidates (queue: prompt indices, in order): a prompt's candidates one by one (samples
    first .. first + n - 1), a steered prompt's n at once (with its steerer; where = (layers, D, kinds, device)).
    Prompts not yet in s.kv (with a prompt store: without a slot) are prefilled together (all but their last token:
    prefill), their keys and values copied into each of their rows (into their slot), and the last token is what a row
    feeds first. Then the rows in use are made contiguous, [0, m): the last ones move into the slots left free (the
    compiled step's rows never move)."""
    slots = (~s.live[:s.m]).nonzero().squeeze(1).tolist() + list(range(s.m, len(s.live)))
    new = []  # (row, prompt, row id)
    while queue:
        i = queue[0]
        j = jobs.setdefault(i, {'todo': n, 'left': 0, 'done': {}})
        k = j['todo'] if steer else 1
        if len(slots) - len(new) < k:
            break
        new += [(slots[len(new) + r], i, first + n - j['todo'] + r) for r in range(k)]
        j['todo'] -= k
        j['left'] += k
        if steer:
            j['steer'] = steer.start(where[0], where[1], 1, n, where[2], where[3])
        if not j['todo']:
            queue.popleft()
    if new:
        dev = s.live.device
        rows, prompts, rids = zip(*new)
        r = torch.tensor(rows, device=dev)
        C = s.common
        if s.free is not None:  # a prompt store: each prompt's keys and values go once into a slot of their own,
            if C and s.prefix is None:  # after the shared prefix's, prefilled once and put in every slot
                s.prefix = prefill(model, [ids[prompts[0]][:C]])
                put_prompts(s.cache, None, s.prefix, None, None)
            fresh = list(dict.fromkeys(p for p in prompts if 'slot' not in jobs[p]))
            for p in fresh:
                jobs[p]['slot'] = heapq.heappop(s.free)
            for p in [p for p in fresh if len(ids[p]) > C + 1]:  # one at a time: a prompt's keys and values do not
                put_prompts(s.cache, [jobs[p]['slot']], prefill(model, [ids[p][C:-1]], s.prefix), [0],  # follow the
                            [len(ids[p]) - 1 - C], at=C)  # others' lengths (padding changes the rounding)
            s.slot[r] = torch.tensor([jobs[p]['slot'] for p in prompts], device=dev)
        else:
            need = list(dict.fromkeys(i for _, i, _ in new if i not in s.kv and len(ids[i]) > 1))
            if need:
                pre = prefill(model, [ids[i][:-1] for i in need])
                s.kv.update({i: (pre, x) for x, i in enumerate(need)})
            for row, p in zip(rows, prompts):
                if p in s.kv:
                    put_prompts(s.cache, [row], s.kv[p][0], [s.kv[p][1]], [len(ids[p]) - 1])
            for p in set(prompts):
                if not jobs[p]['todo']:
                    s.kv.pop(p, None)  # every candidate of p started: its prefill can go
        at = torch.tensor([len(ids[p]) - 1 for p in prompts], device=dev)
        s.job[r], s.rid[r] = torch.tensor(prompts, device=dev), torch.tensor(rids, device=dev)
        s.pos[r], s.plen[r] = at, at
        s.w[r] = 0 if s.free is not None else at  # with a prompt store a row's own columns start at 0
        s.nxt[r] = torch.tensor([ids[p][-1] for p in prompts], device=dev)
        s.key[r] = torch.tensor([candidate_key(seed, keys[p], q) for p, q in zip(prompts, rids)], device=dev)
        for k in ('ln', 'count', 'bnd', 'ran', 'acc_n', 'acc', 'least_h', 'fsum'):
            getattr(s, k)[r] = 0
        s.least_lp[r], s.wait[r], s.live[r] = float('inf'), False, True
        s.m, s.n_live = max(s.m, max(rows) + 1), s.n_live + len(new)
        s.wmax = max(s.wmax, int(s.w[r].max()))
    if s.static:
        s.m = s.b = len(s.live)
        return
    m = s.n_live  # compact: the rows in use at m or above move into the free slots below m
    holes = (~s.live[:m]).nonzero().squeeze(1)
    if len(holes):
        s.move(s.live[m:s.m].nonzero().squeeze(1) + m, holes)
        s.live[m:s.m] = False
    s.m = s.b = m


def _feed(s, step):
    """Run the first b rows' tokens through the model, each at its own cache column and position; a row's mask lets
    it attend to its own columns only. The compiled step runs every row (an idle one at its last column)."""
    b, n = s.b, min(s.wmax + 1, s.cap)  # wmax: an upper bound, rows that end included
    n = s.cap if n > s.whole * s.cap else n
    fed = s.live[:b] & ~s.wait[:b] if s.static else None
    s.shared['at'][:b] = s.w[:b].clamp(max=s.cap - 1)
    s.shared['n'] = n
    mask = torch.arange(n, device=s.w.device)[None] <= s.w[:b, None]  # [b, n]
    if s.free is not None:  # the prompt's columns in the store first, as a float32 bias (decode_attention's)
        mask = torch.cat([torch.arange(s.shared['prompt'], device=s.w.device)[None] < s.plen[:b, None], mask], 1)
        mask = torch.zeros(mask.shape, device=mask.device).masked_fill_(~mask, torch.finfo().min)
        s.shared['group'] = prompt_groups(s.slot[:b])
    mask = mask[:, None, None]  # [b, 1, 1, columns]
    logits, h = step(s.nxt[:b], mask, s.pos[:b])
    s.logits[:b], s.h_prev[:b], s.prev[:b] = logits, h, s.nxt[:b]
    inc = 1 if fed is None else fed.long()
    s.w[:b] += inc
    s.pos[:b] += inc
    s.ran[:b] += inc


def _outcome(s, at_max, eos, table):
    """(rows that end now, rows whose state before token nxt is kept: nxt ends a step or the candidate), rows [0, m)"""
    m = s.m
    nxt, samp = s.nxt[:m], s.samp[:m]
    done = (torch.isin(nxt, eos) & samp) | at_max
    return done, done | (step_ends(s.prev[:m], nxt, table) & samp & (s.ln[:m] > 0))


def _next_tokens(s, temperature, top_p, eos, table, count_kept, conf_topk):
    """Draw this step's token for every running row in [0, m) (a row at max_new_tokens ends, 'length', and draws
    nothing), top-p from the top-64 logits (vocab_stats, which also gives the drawn tokens' statistics), with the step's
    one host sync (has a row finished? did a row need the full sort? did a row close a step? the most states a row
    keeps, if count_kept; the largest write column; are a running row's logits and state finite, else ValueError naming
    the fix). -> (done, keep, at_max, col, any_done, any_keep, n_kept, the drawn tokens' (log-prob, entropy,
    confidence)), each over rows [0, m)"""
    m, T, k = s.m, s.T, TOPK_PREFILTER
    zero = s.ln.new_zeros(())
    go = s.live[:m] & ~s.wait[:m]
    ln = s.ln[:m]
    at_max, samp = go & (ln >= T), go & (ln < T)
    s.samp[:m] = samp
    col = torch.where(samp, ln, T)
    u = uniforms(s.key[:m], ln)
    logits = s.logits[:m]
    vals, ids, logz, ent, zt, finite = vocab_stats(logits, max(k, conf_topk), temperature)
    short = None
    if temperature <= 0:
        new = ids[:, 0]
    elif top_p >= 1.0:
        new = draw(torch.softmax(logits.float() / temperature, dim=-1), None, u)
    else:
        w, short = nucleus(vals[:, :k], zt, temperature, top_p)
        new = draw(w, ids[:, :k], u)
    s.nxt[:m] = torch.where(samp, new, s.nxt[:m])
    done, keep = _outcome(s, at_max, eos, table)
    # an overflow samples garbage: an inf or nan anywhere in a row's logits (vocab_stats' finite) or state (its sum)
    bad = go & ~(finite & torch.isfinite(s.h_prev[:m].sum(-1, dtype=torch.float32)))
    count = s.count[:m]
    flags = [done.any(), (short & samp).any() if short is not None else zero, keep.any(),
             (count + keep).max() if count_kept else zero, bad.any(), s.w[:m].max()]
    any_done, any_short, any_keep, n_kept, any_bad, s.wmax = torch.stack([f.long() for f in flags]).tolist()
    if any_bad:
        raise nonfinite(s.dtype, f'decoding token {int(ln.max())}')
    if any_short:  # rare: a nucleus wider than the prefilter; those rows draw from the full sort
        r = (short & samp).nonzero().squeeze(1)
        s.nxt[r] = draw(*full_nucleus(torch.softmax(logits[r].float() / temperature, dim=-1), top_p), u[r])
        done, keep = _outcome(s, at_max, eos, table)
        any_done, any_keep, n_kept = torch.stack([done.any().long(), keep.any().long(),
                                                  (count + keep).max()]).tolist()
    nxt = s.nxt[:m]
    stats = (logits.gather(1, nxt[:, None])[:, 0].float() - logz, ent, logz - vals[:, :conf_topk].mean(-1))
    return done, keep, at_max, col, any_done, any_keep, n_kept, stats


def _capture(s, col, keep, at_max, n_kept, every, stats):
    """Write the drawn tokens and their statistics, and the state before each token that closes a step or the
    candidate into the ring (every state kept: the ring doubles when a row fills it), beside it the open step's
    mean token state and least likely token's state when those kinds are stored. Rows [0, m)."""
    m = s.m
    ar = torch.arange(m, device=s.w.device)
    s.toks[ar, col] = s.nxt[:m]
    s.stats[:, ar, col] = torch.stack(stats)
    ln, samp, h = s.ln[:m], s.samp[:m], s.h_prev[:m]
    add = (samp | at_max) & (ln > 0)  # h_prev is the state of token ln - 1, seen once: fold it into the open step
    before = (ln - 1).clamp(min=0)
    if s.acc.shape[1]:
        s.acc[:m] += add[:, None] * h.float()
    s.acc_n[:m] += add
    if s.fsum.shape[1]:
        s.fsum[:m] += add[:, None] * s.stats[:, ar, before].T
    if s.least_h.shape[1]:
        lp = s.stats[0, ar, before]
        lower = add & (lp < s.least_lp[:m])  # strict: the first of equal log-probs stays
        s.least_lp[:m] = torch.where(lower, lp, s.least_lp[:m])
        s.least_h[:m] = torch.where(lower[:, None], h.float(), s.least_h[:m])
    S = s.ring.shape[1] - 1
    if every and n_kept > S:
        s.ring, s.ring_pos, s.fring = (torch.cat([x[:, :S], x.new_zeros(x.shape[0], S + 1, *x.shape[2:])], 1)
                                       for x in (s.ring, s.ring_pos, s.fring))
        S *= 2
    kept_now = keep & (ln > 0)  # the first token has no state before it
    slot = torch.where(kept_now, s.count[:m] % S, S)
    acc_n = s.acc_n[:m].clamp(min=1)[:, None]
    parts = [h.float()] + ([s.acc[:m] / acc_n] if s.acc.shape[1] else []) + ([s.least_h[:m]] if s.least_h.shape[1]
                                                                              else [])
    s.ring[ar, slot] = torch.cat(parts, 1).to(torch.float16) if len(parts) > 1 else h.to(torch.float16)
    if s.fsum.shape[1]:
        s.fring[ar, slot] = s.fsum[:m] / acc_n
        s.fsum[:m] *= ~kept_now[:, None]
    if len(parts) > 1:  # a closed step: the next one starts empty
        s.acc[:m] *= ~kept_now[:, None]
        s.least_lp[:m] = torch.where(kept_now, float('inf'), s.least_lp[:m])
    s.acc_n[:m] *= ~kept_now
    s.ring_pos[ar, slot] = ln - 1
    s.count[:m] += kept_now
    s.bnd[:m] = torch.where(keep, ln, s.bnd[:m])
    s.ln[:m] += samp


def _steer(s, jobs, keep, done, width):
    """Each prompt with a row that closed a step or ended: its steerer decides on its rows. -> (stop: bool [m] or None,
    plan: [(source row, copy's row)], release: bool [m])"""
    m = s.m
    stop, release, plan = torch.zeros_like(keep), torch.zeros_like(keep), []
    job = s.job[:m]
    for i in job[keep].unique().tolist():
        sel = (job == i).nonzero().squeeze(1)
        st, pl, rel = jobs[i]['steer'].step(s.ring[sel], s.count[sel], keep[sel], done[sel], s.rid[sel], width,
                                            s.fring[sel])
        if st is not None:
            stop[sel] |= st
        if rel is not None:
            release[sel] |= rel
        plan += [(int(sel[a]), int(sel[b])) for a, b in pl]
    return (stop if stop.any() else None), plan, release


def _collect(s, ended, stop, at_max, jobs):
    """Rows that end now (finished, or stopped by the verifier: 'pruned') into their prompt's done: row id ->
    (token ids, statistics, state positions, states, finish, tokens it ran), the states in step order."""
    S = s.ring.shape[1] - 1
    fin = ended.nonzero().squeeze(1)
    cut = stop[fin].tolist() if stop is not None else [False] * len(fin)
    job, rid, toks, stats, ring, ring_pos, count, bnd, length, ran = (x.cpu() for x in (
        s.job[fin], s.rid[fin], s.toks[fin], s.stats[:, fin], s.ring[fin], s.ring_pos[fin], s.count[fin], s.bnd[fin],
        at_max[fin], s.ran[fin]))
    for j, (i, r) in enumerate(zip(job.tolist(), rid.tolist())):
        m, L = min(int(count[j]), S), int(bnd[j])
        slots = [(int(count[j]) - m + x) % S for x in range(m)]
        jobs[i]['done'][r] = (toks[j, :L].tolist(), stats[:, j, :L], ring_pos[j, slots].tolist(), ring[j, slots],
                              'pruned' if cut[j] else 'length' if length[j] else 'eos', int(ran[j]))
        jobs[i]['left'] -= 1
    s.n_live -= len(fin)


def _branch(s, plan, jobs, ended):
    """Search: copies take the stopped rows' slots, with their source's cache rows and state (no prefill)."""
    src, dst = (torch.tensor(x, device=s.w.device) for x in zip(*plan))
    s.move(src, dst)
    for i, r, k, d in zip(s.job[src].tolist(), s.rid[src].tolist(), s.ln[src].tolist(), dst.tolist()):
        s.rid[d] = jobs[i]['steer'].branched([r], [k])[0]
        s.key[d] = candidate_key(s.seed, s.keys[i], int(s.rid[d]))
        jobs[i]['left'] += 1
    s.ran[dst] = 0  # what the source ran is counted with the source
    ended[dst] = False
    s.n_live += len(plan)


def _front(s):
    """Search: waiting rows run no forward. The fed rows move to the front (swapping rows); b: how many."""
    fed = ~s.wait[:s.m]
    b = int(fed.sum())
    i, j = (~fed[:b]).nonzero().squeeze(1), fed[b:].nonzero().squeeze(1) + b
    if len(i):
        s.move(torch.cat([j, i]), torch.cat([i, j]))
    s.b = b


def _results(tok, job, max_steps, D, kinds=('boundary',)):
    """One prompt's candidates in row order (search: with row, parent, inherited from its steerer's lineage), each
    with decoded: the tokens its row ran through the decoding forward."""
    lineage = job['steer'].lineage if 'steer' in job and job['steer'].sync else None
    out = []
    for r in sorted(job['done']):
        ids, st, spos, states, finish, n_ran = job['done'][r]
        c = _candidate(tok, ids, st[0], st[1], st[2], spos, states, finish, max_steps, D, kinds)
        c['decoded'] = n_ran
        if lineage is not None:
            c['row'], c['parent'], c['inherited'] = lineage[r][1:]
        out.append(c)
    return out


# -----------------------------------------------------------------------------
# the candidate dicts


def _candidate(tok, ids, lps, ents, confs, spos, states, finish, max_steps, d, kinds=('boundary',)):
    """The candidate dict from captured positions [k] and states [k, d * len(kinds)] (the kinds side by side), of which
    it stores the last max_steps (None: all), each kind under its key (model.STEP_KINDS), and think_end: the token index
    completing '</think>' (None: no </think>), from which train.py's input_steps='answer' reads the steps after it."""
    keep = list(range(len(spos)))[-max_steps:] if max_steps else list(range(len(spos)))
    c = {'text': tok.decode(ids, skip_special_tokens=True), 'token_ids': torch.tensor(ids, dtype=torch.long),
         'logprobs': torch.as_tensor(lps, dtype=torch.float32), 'entropies': torch.as_tensor(ents, dtype=torch.float32),
         'confidences': torch.as_tensor(confs, dtype=torch.float32),
         'step_pos': torch.tensor([spos[k] for k in keep], dtype=torch.long),
         'finish': finish, 'think_end': think_end_index(tok, ids)}
    for j, kind in enumerate(kinds):
        c[STEP_KINDS[kind]] = states[keep][:, j * d:(j + 1) * d].to(torch.float16) if keep else \
            torch.zeros(0, d, dtype=torch.float16)
    return c


def stored_kinds(step_kinds):
    """extract.py's step_kinds in STEP_KINDS order, refusing an unknown kind or a list without 'boundary'."""
    kinds = list(step_kinds)
    if 'boundary' not in kinds or any(k not in STEP_KINDS for k in kinds) or len(set(kinds)) < len(kinds):
        raise ValueError(f"step_kinds={kinds!r}: 'boundary' (always: the step count, the paper's read and steering use "
                         f"it) plus any of {[k for k in STEP_KINDS if k != 'boundary']}, each once; fix: "
                         f"--step_kinds=['boundary'] (the paper) or --step_kinds=['boundary','mean','least']")
    return [k for k in STEP_KINDS if k in kinds]

# -----------------------------------------------------------------------------
# re-encoding existing candidates with one teacher-forced pass


@torch.no_grad()
def reencode(model, tok, prompts, completions, layers=(-1,), finishes=None, table=None, max_steps=100, conf_topk=20,
             chunk=LOGIT_CHUNK, step_kinds=('boundary',)):
    """Same outputs as sampling for given completions (list of token-id lists, one per prompt in `prompts`): one
    left-padded forward pass over prompt + completion through the model's body (no KV cache), keeping only the
    selected layers' states, then the LM head over the completion tokens, `chunk` // vocabulary tokens at a time with
    their statistics: never [rows, T, V] logits at once (80 GB for 64 AIME traces). The caller chooses how many rows
    go in one call (reencode_problems: machine.reencode_bytes). Logits are lm_head(final state), as for every model
    here. step_kinds: the kinds stored per step, from the same pass (the step's tokens: after the previous boundary
    through this one, as sampling reads them)."""
    kinds = stored_kinds(step_kinds)
    device = next(model.parameters()).device
    head = model.get_output_embeddings()
    V = head.weight.shape[0]
    table = _fit(step_table(tok) if table is None else table, V)
    finishes = finishes or ['eos'] * len(prompts)
    p_ids = [tok(p, add_special_tokens=False).input_ids for p in prompts]
    seqs = [p + list(c) for p, c in zip(p_ids, completions)]
    L = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), L), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), L), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, L - len(s):], mask[i, L - len(s):] = torch.tensor(s), 1
    ids, mask = ids.to(device), mask.to(device)
    out = model.base_model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                           output_hidden_states=hidden_selection(model, layers), use_cache=False)
    # sequences are right-aligned: completion i fills the last T_i positions, and its token j is predicted at
    # L - T_i - 1 + j
    row = torch.tensor([i for i, c in enumerate(completions) for _ in c], dtype=torch.long, device=device)
    pos = torch.tensor([L - len(c) - 1 + j for c in completions for j in range(len(c))], dtype=torch.long,
                       device=device)
    tgt = torch.tensor([t for c in completions for t in c], dtype=torch.long, device=device)
    k = max(1, chunk // V)
    chunks = [torch.stack(token_stats(head(out.last_hidden_state[row[j:j + k], pos[j:j + k]]), tgt[j:j + k], conf_topk))
              for j in range(0, len(tgt), k)]
    stats = torch.cat(chunks, 1).cpu() if len(tgt) else None
    spos = [step_positions(c, table) for c in completions]
    at_row = torch.tensor([i for i, sp in enumerate(spos) for _ in sp], dtype=torch.long, device=device)
    at = torch.tensor([L - len(c) + p for c, sp in zip(completions, spos) for p in sp], dtype=torch.long, device=device)
    states = torch.cat([out.hidden_states[l][at_row, at] for l in layers], dim=-1).cpu()
    if not (torch.isfinite(states).all() and (stats is None or torch.isfinite(stats).all())):
        raise nonfinite(next(model.parameters()).dtype, 're-encoding')
    D = len(layers) * model.config.hidden_size
    cands, t0, s0 = [], 0, 0
    for i, c in enumerate(completions):
        T, m = len(c), len(spos[i])
        if T == 0:
            cands.append(_candidate(tok, [], [], [], [], [], None, finishes[i], max_steps, D, kinds))
            continue
        lp, en, cf = stats[:, t0:t0 + T]
        st = states[s0:s0 + m]
        if len(kinds) > 1:
            st = torch.cat([st, *_step_reads(out.hidden_states, layers, i, L - T, lp, spos[i], kinds)], 1)
        cands.append(_candidate(tok, list(c), lp, en, cf, spos[i], st, finishes[i], max_steps, D, kinds))
        t0, s0 = t0 + T, s0 + m
    return cands


def _step_reads(hidden_states, layers, i, start, lp, spos, kinds):
    """Row i's 'mean' and / or 'least' states [steps, D] (kinds order) from a teacher-forced pass whose completion
    tokens sit at positions start.. : step k's tokens are those after boundary k-1 through boundary k."""
    H = torch.cat([hidden_states[l][i, start:start + len(lp)] for l in layers], -1).float().cpu()  # [T, D]
    bounds = [-1] + list(spos)
    out = []
    if 'mean' in kinds:
        out.append(torch.stack([H[a + 1:b + 1].mean(0) for a, b in zip(bounds, bounds[1:])]))
    if 'least' in kinds:  # argmin: the first of equal log-probs
        out.append(torch.stack([H[a + 1 + int(lp[a + 1:b + 1].argmin())] for a, b in zip(bounds, bounds[1:])]))
    return out


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


def reencode_problems(problems, n, cfg, model, tok, table, pool, room):
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

# -----------------------------------------------------------------------------
# a run's problems, sampled as extraction samples them (extract.py's splits, sample.py's questions)


def prompt_frame(tok, problems, cfg):
    """(the longest prompt's tokens, the tokens every prompt shares) of problems' prompts under cfg: the frame
    sample_stream decodes a run's prompts in, so that a candidate's arithmetic does not follow its batch."""
    ids = [tok(p, add_special_tokens=False).input_ids for p in batch_prompts(tok, problems, cfg)]
    return max(map(len, ids)), common_prefix(ids)


def sample_problems(model, tok, problems, n, cfg, table=None, steer=None, frame=None, first_sample=0):
    """Yield (problem, prompt, candidates) as each of `problems` gets its n candidates (samples first_sample ..
    first_sample + n - 1), sampled with capture in one
    continuous batch of cfg['batch_size'] rows (sample_stream) under cfg (extract.py's keys: layers, max_new_tokens,
    temperature, top_p, seed, max_steps, conf_topk, system_prompt, enable_thinking; optional step_kinds and
    torch_compile) and the steering policy steer (None: plain sampling). A candidate's draws come from the run seed,
    its problem's index and its sample number alone: a resumed, sharded or grown run samples what one run would, given
    one frame (prompt_frame of every problem it may sample; None: these problems')."""
    prompts = batch_prompts(tok, problems, cfg)
    for i, cands in sample_stream(
            model, tok, prompts, n, cfg['layers'], cfg['max_new_tokens'], cfg['temperature'], cfg['top_p'],
            seed=cfg['seed'], table=table, max_steps=cfg['max_steps'], conf_topk=cfg['conf_topk'],
            torch_compile=cfg.get('torch_compile', False), steer=steer, step_kinds=cfg.get('step_kinds', ['boundary']),
            rows=cfg['batch_size'], keys=[p['index'] for p in problems], frame=frame, first_sample=first_sample):
        yield problems[i], prompts[i], cands
