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
import torch

from generator import (LOGIT_CHUNK, TOPK_PREFILTER, PreallocLayer, copy_rows, decode_cache, draw, eos_ids, full_nucleus,
                       hidden_selection, nucleus, vocab_stats)
from model import STEP_KINDS
from tasks import GENERATED, build_prompt

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
    most likely tokens. All float32 [...]. The sampler computes the same from the same vocab_stats."""
    logits = logits.float()
    vals, _, logz, ent, _, _ = vocab_stats(logits, conf_topk)
    return logits.gather(-1, tokens[..., None]).squeeze(-1) - logz, ent, logz - vals[..., :conf_topk].mean(-1)


def _nonfinite(dtype, where):
    return ValueError(f"non-finite logits or hidden states while {where} with {str(dtype)[6:]} weights: the model "
                      f"overflows this dtype (float16's range ends at 65,504; Qwen3 was trained in bfloat16), and the "
                      f"samples would be garbage; fix: --dtype=bfloat16")


def _fit(table, V):
    # the model's vocabulary may be padded past the tokenizer's: those ids are no delimiters
    return torch.cat([table, table.new_zeros((max(0, V - len(table)),) + table.shape[1:])])

# -----------------------------------------------------------------------------
# sampling with capture


@torch.no_grad()
def sample_with_capture(model, tok, prompts, n_samples, layers=(-1,), max_new_tokens=512, temperature=0.7,
                        top_p=0.9, seed=0, table=None, eos=None, max_steps=100, conf_topk=20,
                        torch_compile=False, steer=None, step_kinds=('boundary',)):
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

    steer: a steering policy (studies/policy.py's Steering: the rules live there, not here). steer.start(layers, D,
    n_prompts, n_samples, kinds, device) gives the batch's steerer; at each decoding step where rows close a step
    its step(ring, count, keep, done, rows, width, fring) scores their prefixes (the states kept so far) and says
    (stop: bool per batch row or None, plan: [(source batch row, copy's batch row)], release: bool per batch row).
    A stopped row leaves the batch with finish='pruned' and its tokens up to that step boundary: what the offline
    replay of the same rule would cut. With steerer.sync (search), a row that closes a step waits (its slot idles,
    masked out of attention) until released; the copies of a plan take the stopped rows' slots and copy their
    source's KV cache rows (no new prefill), their row ids from steerer.branched(sources, inherited) (steerer.n_rows:
    the ids given so far), and the candidates carry row, parent and inherited (steerer.lineage: the leading tokens
    shared with the parent), stopped ones included, and decoded: the tokens the row itself ran through the model,
    which generated_tokens() sums (a stopped row's step-closing token, and a copy re-running its source's, ran but are
    not among its token_ids).
    steerer.features: the step features (model.step_feature_matrix) are kept beside the ring.

    step_kinds: what is stored per step (model.STEP_KINDS; 'boundary' always): 'mean' keeps a running sum of each
    row's token states since its last boundary, 'least' the state of its least likely token so far; both go into the
    ring beside the boundary state when a step closes."""
    device = next(model.parameters()).device
    V = model.get_output_embeddings().weight.shape[0]
    table = _fit(step_table(tok) if table is None else table, V).to(device)
    eos = torch.tensor(eos_ids(model, tok) if eos is None else eos, device=device)
    gen = torch.Generator(device=device).manual_seed(seed)
    T, D = max_new_tokens, len(layers) * model.config.hidden_size
    kinds = stored_kinds(step_kinds)
    steer = steer.start(layers, D, len(prompts), n_samples, kinds, device) if steer is not None else None
    searching = bool(steer and steer.sync)
    if searching and torch_compile:
        raise ValueError(f"search={steer.rule!r} with torch_compile=True: search copies and idles rows, which the "
                         f"static compiled cache cannot; fix: torch_compile=False")
    attn = model.config._attn_implementation
    fast = attn == 'sdpa' and device.type == 'cpu' and not torch_compile  # decode_attention runs the decoding steps
    s, Lp = _prefill(model, tok, prompts, n_samples, T, max_steps, D, torch_compile, kinds,
                     feats=bool(steer and steer.features),
                     whole=fast and next(model.parameters()).dtype != torch.float32)
    if searching and not all(isinstance(l, PreallocLayer) for l in s.cache.layers):
        raise ValueError(f"search={steer.rule!r}: this model's cache has layers of another kind (e.g. sliding-window "
                         f"attention) than the preallocated ones search idles and copies rows in; fix: search=None")
    draws = torch.rand(T, len(s.rows), generator=gen, device=device)  # [token index, row id]; search's new rows add
                                                                      # columns
    step = _decode_step(model, s.cache, layers, torch_compile)
    if fast:
        model.config._attn_implementation = 'decode_sdpa'  # SDPA's arithmetic, faster at one query on CPU; restored
                                                           # below
    done_all, t = {}, 0
    while True:
        done, keep, at_max, col, any_done, any_keep, n_kept, stats = _next_tokens(
            s, draws, temperature, top_p, eos, table, bool(steer or not max_steps), conf_topk)
        _capture(s, col, keep, at_max, n_kept, not max_steps, stats)
        stop, plan = None, []
        if steer and any_keep:  # rows closed a step: the verifier scores them, the policy stops / continues / branches
            stop, plan, release = steer.step(s.ring, s.count, keep, done, s.rows, min(n_kept, s.ring.shape[1] - 1),
                                             s.fring)
            if searching:
                s.wait = (s.wait | (keep & ~done)) & ~release
        ended = done | stop if stop is not None else done
        if any_done or stop is not None:  # finished and stopped rows become candidates
            _collect(s, ended, stop, at_max, done_all)
        if plan:
            _branch(s, plan, steer, ended)
        s.fed = s.samp & ~ended  # rows whose new token goes through the model now
        if (any_done or stop is not None) and not _drop(s, ended, torch_compile or (None if steer else 'lazy')):
            break
        b = len(s.rows)
        if searching:
            b = _front(s)
            if draws.shape[1] < steer.n_rows:
                new = torch.rand(T, steer.n_rows - draws.shape[1], generator=gen, device=device)
                draws = torch.cat([draws, new], 1)
            if b == 0:  # every row waits for a group decided at its next boundary: nothing to run now
                continue
        _feed(s, step, b, Lp + t, T, searching, torch_compile)
        t += 1
    model.config._attn_implementation = attn
    return _results(tok, done_all, len(prompts), n_samples, steer.lineage if searching else None, max_steps, D, kinds)


class _Rows:
    """The decoding batch: every tensor below holds one entry per batch row (stats: along dim 1), and the KV cache
    one row per batch row, so dropping, copying or reordering rows moves them all together."""
    PER_ROW = ('rows', 'toks', 'ring', 'ring_pos', 'count', 'ln', 'bnd', 'ran', 'wait', 'live', 'mask', 'pos', 'nxt',
               'prev', 'logits', 'h_prev', 'samp', 'fed', 'acc', 'acc_n', 'least_lp', 'least_h', 'fsum', 'fring')

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


def _prefill(model, tok, prompts, n_samples, T, max_steps, D, static, kinds=('boundary',), feats=False, whole=False):
    """One forward over the left-padded prompts, then n_samples copies of each prompt's cache as the decoding
    cache (rows prompt-major), and the batch's row tensors (feats: keep each step's features for a step-feature
    verifier that steers). -> (_Rows, padded prompt length)"""
    from transformers import DynamicCache
    device = next(model.parameters()).device
    enc = tok(prompts, return_tensors='pt', padding=True, padding_side='left', add_special_tokens=False).to(device)
    P, Lp = enc.input_ids.shape
    B, cap, S = P * n_samples, Lp + T + 1, max_steps or 64
    cache = DynamicCache()
    out = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask, past_key_values=cache, use_cache=True,
                position_ids=(enc.attention_mask.cumsum(-1) - 1).clamp(min=0), logits_to_keep=1)
    cache = decode_cache(model, cache, n_samples, cap, static, whole)
    mask = torch.zeros(B, cap, dtype=torch.long, device=device)
    mask[:, :Lp] = enc.attention_mask.repeat_interleave(n_samples, 0)
    z = lambda *shape, dtype=torch.long: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
    return _Rows(
        cache=cache, mask=mask, dtype=next(model.parameters()).dtype,
        pos=mask.sum(-1) - 1,  # position id of each row's last token
        logits=out.logits[:, -1].float().repeat_interleave(n_samples, 0),
        rows=torch.arange(B, device=device),  # the row id of each batch row (search: copies get new ids)
        toks=z(B, T + 1),  # column T: scratch for rows that draw nothing
        stats=torch.zeros(3, B, T + 1, device=device),  # log-prob, entropy, confidence
        ring=z(B, S + 1, D * len(kinds), dtype=torch.float16),  # the last S kept states, the kinds side by side
        # (S doubles when every state is kept); slot S: discard
        ring_pos=z(B, S + 1),
        count=z(B),  # kept states so far
        ln=z(B),  # tokens drawn so far
        bnd=z(B),  # tokens before the latest boundary: what an end keeps
        ran=z(B),  # tokens the row itself fed through the model (a copy: since it was made); a boundary token the cut
                   # drops still ran
        wait=z(B, dtype=torch.bool),  # search: closed a step, waits for its group
        live=torch.ones(B, dtype=torch.bool, device=device),  # rows still decoding (torch_compile keeps finished rows)
        samp=z(B, dtype=torch.bool),  # rows that draw a token this step
        fed=z(B, dtype=torch.bool),  # rows whose token goes through the model this step
        nxt=z(B), prev=z(B),  # this step's token and the one before it
        h_prev=torch.zeros(B, D, device=device),  # the state before nxt: kept if nxt closes a step
        # the open step's token states so far (width 0 when that kind is not stored): their sum and count ('mean'),
        # the lowest log-prob and its token's state ('least')
        acc=torch.zeros(B, D * ('mean' in kinds), device=device), acc_n=z(B),
        least_lp=torch.full((B,), float('inf'), device=device),
        least_h=torch.zeros(B, D * ('least' in kinds), device=device),
        # each kept step's mean log-prob, entropy and confidence (model.step_feature_matrix), beside the ring: what a
        # step-feature verifier reads when it steers (width 0 otherwise)
        fsum=torch.zeros(B, 3 * feats, device=device), fring=torch.zeros(B, S + 1, 3 * feats, device=device)), Lp


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
    return torch.compile(forward, mode='reduce-overhead' if next(model.parameters()).device.type == 'cuda'
                         else 'default')


def _outcome(s, at_max, eos, table):
    """(rows that end now, rows whose state before token nxt is kept: nxt ends a step or the candidate)"""
    done = (torch.isin(s.nxt, eos) & s.samp) | at_max
    return done, done | (step_ends(s.prev, s.nxt, table) & s.samp & (s.ln > 0))


def _next_tokens(s, draws, temperature, top_p, eos, table, count_kept, conf_topk):
    """Draw this step's token for every running row (a row at max_new_tokens ends, 'length', and draws nothing),
    top-p from the top-64 logits (vocab_stats, which also gives the drawn tokens' statistics), with the step's one
    host sync (has a row finished? did a row need the full sort? did a row close a step? the most states a row
    keeps, if count_kept; are a running row's logits and state finite, else ValueError naming the fix).
    -> (done, keep, at_max, col, any_done, any_keep, n_kept, the drawn tokens' (log-prob, entropy, confidence))"""
    T, zero, k = draws.shape[0], s.ln.new_zeros(()), TOPK_PREFILTER
    go = s.live & ~s.wait
    at_max, s.samp = go & (s.ln >= T), go & (s.ln < T)
    col = torch.where(s.samp, s.ln, T)
    u = draws[col.clamp(max=T - 1), s.rows]
    vals, ids, logz, ent, zt, finite = vocab_stats(s.logits, max(k, conf_topk), temperature)
    short = None
    if temperature <= 0:
        new = ids[:, 0]
    elif top_p >= 1.0:
        new = draw(torch.softmax(s.logits / temperature, dim=-1), None, u)
    else:
        w, short = nucleus(vals[:, :k], zt, temperature, top_p)
        new = draw(w, ids[:, :k], u)
    s.nxt = torch.where(s.samp, new, s.nxt)
    done, keep = _outcome(s, at_max, eos, table)
    # an overflow samples garbage: an inf or nan anywhere in a row's logits (vocab_stats' finite) or state (its sum)
    bad = go & ~(finite & torch.isfinite(s.h_prev.sum(-1, dtype=torch.float32)))
    flags = [done.any(), (short & s.samp).any() if short is not None else zero, keep.any(),
             (s.count + keep).max() if count_kept else zero, bad.any()]
    any_done, any_short, any_keep, n_kept, any_bad = torch.stack([f.long() for f in flags]).tolist()
    if any_bad:
        raise _nonfinite(s.dtype, f'decoding token {int(s.ln.max())}')
    if any_short:  # rare: a nucleus wider than the prefilter; those rows draw from the full sort
        r = (short & s.samp).nonzero().squeeze(1)
        s.nxt[r] = draw(*full_nucleus(torch.softmax(s.logits[r] / temperature, dim=-1), top_p), u[r])
        done, keep = _outcome(s, at_max, eos, table)
        any_done, any_keep, n_kept = torch.stack([done.any().long(), keep.any().long(),
                                                  (s.count + keep).max()]).tolist()
    stats = (s.logits.gather(1, s.nxt[:, None])[:, 0] - logz, ent, logz - vals[:, :conf_topk].mean(-1))
    return done, keep, at_max, col, any_done, any_keep, n_kept, stats


def _capture(s, col, keep, at_max, n_kept, every, stats):
    """Write the drawn tokens and their statistics, and the state before each token that closes a step or the
    candidate into the ring (every state kept: the ring doubles when a row fills it), beside it the open step's
    mean token state and least likely token's state when those kinds are stored."""
    ar = torch.arange(len(s.rows), device=s.rows.device)
    s.toks[ar, col] = s.nxt
    s.stats[:, ar, col] = torch.stack(stats)
    add = (s.samp | at_max) & (s.ln > 0)  # h_prev is the state of token ln - 1, seen once: fold it into the open step
    before = (s.ln - 1).clamp(min=0)
    if s.acc.shape[1]:
        s.acc += add[:, None] * s.h_prev.float()
    s.acc_n += add
    if s.fsum.shape[1]:
        s.fsum += add[:, None] * s.stats[:, ar, before].T
    if s.least_h.shape[1]:
        lp = s.stats[0, ar, before]
        lower = add & (lp < s.least_lp)  # strict: the first of equal log-probs stays
        s.least_lp = torch.where(lower, lp, s.least_lp)
        s.least_h = torch.where(lower[:, None], s.h_prev.float(), s.least_h)
    S = s.ring.shape[1] - 1
    if every and n_kept > S:
        s.ring, s.ring_pos, s.fring = (torch.cat([x[:, :S], x.new_zeros(x.shape[0], S + 1, *x.shape[2:])], 1)
                                       for x in (s.ring, s.ring_pos, s.fring))
        S *= 2
    kept_now = keep & (s.ln > 0)  # the first token has no state before it
    slot = torch.where(kept_now, s.count % S, S)
    parts = [s.h_prev.float()] + ([s.acc / s.acc_n.clamp(min=1)[:, None]] if s.acc.shape[1] else []) + \
        ([s.least_h] if s.least_h.shape[1] else [])
    s.ring[ar, slot] = torch.cat(parts, 1).to(torch.float16) if len(parts) > 1 else s.h_prev.to(torch.float16)
    if s.fsum.shape[1]:
        s.fring[ar, slot] = s.fsum / s.acc_n.clamp(min=1)[:, None]
        s.fsum *= ~kept_now[:, None]
    if len(parts) > 1:  # a closed step: the next one starts empty
        s.acc *= ~kept_now[:, None]
        s.least_lp = torch.where(kept_now, float('inf'), s.least_lp)
    s.acc_n *= ~kept_now
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


COMPACT = 8  # plain sampling: ended rows leave the batch once they are 1/8 of it (a move copies every live row's cache,
             # ~100 rows' forwards at SmolLM2's 128 rows; an ended row costs one forward a step until then)


def _drop(s, ended, keep_ended):
    """Ended rows stop (not live). keep_ended=True (the static compiled cache): they stay in the batch; 'lazy' (plain
    sampling): they leave the batch and the cache once they are 1 / COMPACT of it; None (steering: the policy sees
    the batch's rows): at once. -> whether any row is left."""
    s.live &= ~ended
    left = int(s.live.sum())
    if left and keep_ended is not True and (keep_ended is None or (len(s.live) - left) * COMPACT >= len(s.live)):
        s.take(s.live.nonzero().squeeze(1))
    return left > 0


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


def _results(tok, done_all, n_prompts, n_samples, lineage, max_steps, D, kinds=('boundary',)):
    """Per prompt, its candidates in row order (search: with row, parent, inherited and decoded)."""
    results = [[] for _ in range(n_prompts)]
    where = lineage if lineage is not None else {r: (r // n_samples, r % n_samples) for r in done_all}
    for r in sorted(done_all, key=lambda r: where[r][:2]):
        ids, st, spos, states, finish, n_ran = done_all[r]
        c = _candidate(tok, ids, st[0], st[1], st[2], spos, states, finish, max_steps, D, kinds)
        if lineage is not None:
            c['row'], c['parent'], c['inherited'] = where[r][1:]
            c['decoded'] = n_ran
        results[where[r][0]].append(c)
    return results


def generated_tokens(cands):
    """Tokens one problem's sampling ran through the generator: each search row's own decode forwards (decoded),
    else each candidate's tokens (plain sampling runs each once)."""
    return sum(c['decoded'] if 'decoded' in c else len(c['token_ids']) for c in cands)


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
    go in one call (extract.py: memory.reencode_bytes). Logits are lm_head(final state), as for every model here.
    step_kinds: the kinds stored per step, from the same pass (the step's tokens: after the previous boundary through
    this one, as sampling reads them)."""
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
        raise _nonfinite(next(model.parameters()).dtype, 're-encoding')
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

# -----------------------------------------------------------------------------
# a run's problems, sampled as extraction samples them (extract.py's splits, sample.py's questions)


def problem_batches(problems, n, batch_size):
    """Problems in fixed batches of batch_size // n (at least one). sample_problems seeds each batch by its first
    index, so a batch's candidates do not depend on the batches around it (a resumed, sharded or single batch)."""
    per = max(1, batch_size // n)
    return [problems[i:i + per] for i in range(0, len(problems), per)]


def batch_prompts(tok, batch, cfg):
    """The problems' prompts (tasks.build_prompt): a generated task shows its worked example, a benchmark question
    cfg['system_prompt']; cfg['enable_thinking'] for the chat template."""
    return [build_prompt(tok, p, cfg['system_prompt'] if p['dataset'] not in GENERATED else None,
                         cfg['enable_thinking'])
            for p in batch]


def sample_problems(model, tok, batch, n, cfg, table=None, steer=None):
    """One batch of problems (problem_batches) sampled with capture, n candidates each, under cfg (extract.py's keys:
    layers, max_new_tokens, temperature, top_p, seed, max_steps, conf_topk, system_prompt, enable_thinking; optional
    step_kinds and torch_compile) and the steering policy steer (None: plain sampling), seeded by the run seed and
    the batch's first index. -> (prompts, candidates per problem)."""
    prompts = batch_prompts(tok, batch, cfg)
    return prompts, sample_with_capture(
        model, tok, prompts, n, cfg['layers'], cfg['max_new_tokens'], cfg['temperature'], cfg['top_p'],
        seed=cfg['seed'] * 1_000_003 + batch[0]['index'], table=table, max_steps=cfg['max_steps'],
        conf_topk=cfg['conf_topk'], torch_compile=cfg.get('torch_compile', False), steer=steer,
        step_kinds=cfg.get('step_kinds', ['boundary']))
