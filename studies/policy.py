"""
The steering policy: a verifier's prefix scores deciding, when rows close a step, which rows stop, go on or branch,
handed to the sampler as an object (capture.sample_with_capture's steer: capture.py samples and captures, it knows no
rule). Pruning ('relative', 'global') stops weak rows; search ('beam', 'dvts') keeps the best rows of a group and
continues each as several. The same rules replayed offline on finished pools (replay_prune; replay_deepconf:
DeepConf's own online stop) are what steer.py's pruning study measures, and the online-equals-offline tests check.

The command samples under the policy the knobs below name: extract.py's splits (the eval split only: the training
split's candidates need their final labels) or sample.py's questions, with every other knob theirs:

    python -m studies.policy extract.py config/search_shop.py --search=beam --search_ckpt=<ckpt.pt> --out_dir=<dir>
    python -m studies.policy extract.py config/demo.py --prune_ckpt=<ckpt.pt> --prune_threshold=0.0 --out_dir=<dir>
    python -m studies.policy sample.py config/demo.py --question="Compute 9 - 2 - 5." --search=beam

A split or sample folder records the knobs in its config.json (store.STEERING); resuming it under another policy,
or none, is refused. sample.py checks the steering checkpoint as the one that picks (sample.refusals: a question of its
training groups is refused; train.check_fresh: a stale one too; the weights dtype: check_match).
"""
import os
import sys

import numpy as np
import torch

import extract
import sample
from configurator import configure, knobs, split_argv
from machine import check_positive, cli
from model import STEP_KINDS, layer_columns, read_kinds, reads
from store import load_checkpoint, trainer

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
prune_ckpt: str = None  # online pruning: a hidden-state verifier checkpoint, e.g.
                        # 'out/demo/verifiers/hsrm_seed42/ckpt.pt'; None = off
prune_rule = 'relative'  # 'relative' (stop a row scoring more than prune_threshold behind its pool's best) | 'global'
                         # (stop below prune_threshold)
prune_threshold: float = None  # the rule's threshold; python -m studies.steer --prune=True prints the one chosen on
                               # validation for each checkpoint
search: str = None  # verifier-steered search: None | 'beam' (N rows, the best N / search_width kept at each step, each
                    # continued search_width ways) | 'dvts' (N / search_width independent subtrees, each greedy)
search_ckpt: str = None  # the hidden-state verifier that steers it, e.g.
                         # 'out/words_shop/verifiers/hsrm_seed42/ckpt.pt'; sample.py: None = the one that picks
search_width = 4  # M: rows each survivor continues as (divides the samples per problem); M = 1 samples as search=None
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------
# the rules: what the verifier's prefix scores decide, per row, when rows close a step


PRUNE_RULES = ('global', 'relative')


def prune_now(latest, active, new, threshold, rule='global'):
    """Which rows of one problem's pool stop now (pure: the sampler's steering calls it online at each decoding
    step where some row closed a step; replay_prune replays it offline on finished pools).
    latest: float [n] each row's most recent prefix score (NaN: no step yet); active: bool [n] rows
    not stopped (generating or finished normally); new: bool [n] rows that closed a step just now
    (only those can be stopped now); rule 'global': stop when latest < threshold (calibrated on a
    validation split); 'relative': stop when latest < (best latest score among active rows) -
    threshold (threshold >= 0, a score margin behind the current leader). Never stops every active
    row: if it would, the best-scored of them goes on. -> bool [n]."""
    latest, active = np.asarray(latest, dtype=np.float64), np.asarray(active, dtype=bool)
    cand = np.asarray(new, dtype=bool) & active & ~np.isnan(latest)
    if rule == 'global':
        stop = cand & (latest < threshold)
    elif rule == 'relative':
        known = active & ~np.isnan(latest)
        stop = cand & (latest < latest[known].max() - threshold) if known.any() else np.zeros_like(cand)
    else:
        raise ValueError(f"prune rule={rule!r} is not one of {PRUNE_RULES}; fix: --prune_rules=['global', 'relative']")
    if stop.any() and not (active & ~stop).any():
        stop[np.flatnonzero(stop)[np.argmax(latest[stop])]] = False
    return stop


SEARCH_RULES = ('beam', 'dvts')


def policy(rule, latest, active, new, threshold=None, width=4):
    """The one rule for the verifier steering generation: how many rows each row of one group continues as,
    decided when rows close a step. -> int [n]: 0 = stop, 1 = continue, k > 1 = branch into k rows (itself
    and k - 1 copies sharing its prefix). Rows outside `active` get 0.
    Pruning ('global' / 'relative', prune_now) stops rows and never branches. Search ('beam' / 'dvts') is called
    when every active row of the group has closed the same step (all `new`): the best ceil(n / width) by latest
    prefix score survive (ties to the lower row), each as `width` rows, the last of them as the rows left over,
    so the group keeps its n rows. Beam search is one group of N rows per problem; DVTS is N / width groups
    (independent subtrees), each of which keeps its single best row: the same rule on smaller groups."""
    latest, active = np.asarray(latest, dtype=np.float64), np.asarray(active, dtype=bool)
    if rule in PRUNE_RULES:
        return np.where(active & ~prune_now(latest, active, new, threshold, rule), 1, 0)
    if rule not in SEARCH_RULES:
        raise ValueError(f"rule={rule!r} is not one of {PRUNE_RULES + SEARCH_RULES}")
    live = np.flatnonzero(active)
    order = live[np.argsort(-np.nan_to_num(latest[live], nan=-np.inf), kind='stable')]
    n_keep = -(-len(live) // width)
    copies = np.zeros(len(latest), dtype=np.int64)
    copies[order[:n_keep]] = width
    if n_keep:
        copies[order[n_keep - 1]] = len(live) - width * (n_keep - 1)
    return copies


# -----------------------------------------------------------------------------
# online: the policy the sampler calls, per batch


def ring_columns(spec, layers, D, kinds):
    """Columns of the ring (the stored kinds side by side, each D = len(layers) * d_gen wide) that a verifier with
    input spec `spec` reads, in its step_read order; None: all of them as they lie."""
    want = read_kinds(spec.get('step_read', 'boundary'))
    missing = [k for k in want if k not in kinds]
    if missing:
        raise ValueError(f"prune_ckpt / search_ckpt reads step_read={spec['step_read']!r}, this extraction stores "
                         f"step_kinds={list(kinds)}; fix: "
                         f"--step_kinds={[k for k in STEP_KINDS if k in kinds or k in want]}")
    cols = layer_columns(layers, spec['layers'], D // len(layers), D, 'prune_ckpt / search_ckpt')
    cols = torch.arange(D) if cols is None else cols
    out = torch.cat([kinds.index(k) * D + cols for k in want])
    return None if torch.equal(out, torch.arange(D * len(kinds))) else out


class Steering:
    """A steering policy to hand the sampler (capture.sample_with_capture's steer): a hidden-state verifier
    (store.load_checkpoint's; it joins the generator's device), the rule (pruning: 'relative' or 'global' with its
    threshold; search: 'beam' or 'dvts' with its width M) and record, what a split's or sample folder's config.json
    keeps of it (the knobs above, store.STEERING). The sampler calls start() for each batch."""

    def __init__(self, verifier, rule='relative', threshold=None, width=4, record=None):
        kind = verifier.spec['kind']
        if reads(kind, 'tokens') or not reads(kind, 'states'):
            raise ValueError(f"prune_ckpt / search_ckpt: a {kind!r} verifier reads text; steering scores hidden states "
                             f"as they arrive; fix: a hidden-state verifier (e.g. hsrm)")
        self.sync = rule in SEARCH_RULES  # search: a row that closes a step waits for its group
        if rule not in PRUNE_RULES + SEARCH_RULES or (threshold is None and not self.sync):
            raise ValueError(f"prune_rule={rule!r}, prune_threshold={threshold!r}; fix: a rule of {PRUNE_RULES} and a "
                             f"threshold (python -m studies.steer --prune=True prints the one chosen on validation)")
        if verifier.spec['residual']:
            raise ValueError(f"the steering checkpoint reads residual={verifier.spec['residual']!r} (a free scorer of "
                             "the whole prefix), which online steering does not feed; fix: steer with a checkpoint "
                             f"trained without residual (states, with or without step_features)")
        if verifier.spec['input_steps'] == 'answer':
            raise ValueError("the steering checkpoint reads input_steps='answer' (the steps after </think>), which "
                             "online steering does not track; fix: a checkpoint trained with input_steps='all' or "
                             "'last'")
        self.verifier, self.rule, self.threshold, self.width = verifier, rule, threshold, width
        self.features = verifier.spec['step_features']  # the sampler keeps each step's features beside its states
        self.record = dict(record or {})

    def describe(self, n):
        """What steers the sampling of n candidates a question, in words (sample.py prints it with its picks)."""
        w = self.width
        if self.rule == 'beam':
            return f"beam search of width {w} (at each step the best {-(-n // w)} of {n} rows go on, each as {w})"
        if self.rule == 'dvts':
            return (f"DVTS of width {w} ({n // w} subtrees of {w} rows, each keeping its best row at each step, "
                    f"continued {w} ways)")
        return f"online pruning ({self.rule} rule, threshold {self.threshold:g})"

    def start(self, layers, D, n_prompts, n_samples, kinds, device):
        """The steering of one batch of n_prompts x n_samples rows, whose ring holds the stored kinds of step state
        side by side (D = len(layers) x d_gen columns each)."""
        return _Batch(self, layers, D, n_prompts, n_samples, kinds, device)


class _Batch:
    """The verifier steering one sampling batch (Steering.start): per row id its latest prefix score (NaN before its
    first step), whether it still counts (not stopped, not finished: `active`), and for search whether it waits for
    its group, its group and its lineage; policy decides. Row ids p*N..p*N+N-1 start as prompt p's rows."""

    def __init__(self, policy_, layers, D, P, n_samples, kinds, device):
        v, rule, width = policy_.verifier.to(device), policy_.rule, policy_.width
        self.sync, self.rule, self.features = policy_.sync, rule, policy_.features
        if self.sync and not (isinstance(width, int) and 1 <= width <= n_samples and n_samples % width == 0):
            raise ValueError(f"search_width={width!r} with {n_samples} samples per problem; fix: a width M that "
                             "divides N (beam keeps N / M rows at each step, DVTS runs N / M subtrees), e.g. "
                             "--search_width=4")
        self.v, self.th, self.n, self.width = v, policy_.threshold, n_samples, width
        self.cols = ring_columns(v.spec, layers, D, kinds)
        B = P * n_samples
        self.latest, self.active, self.waiting = np.full(B, np.nan), np.ones(B, dtype=bool), np.zeros(B, dtype=bool)
        sub = np.arange(B) % n_samples // width if rule == 'dvts' else 0  # DVTS: N / width subtrees per prompt
        self.group = np.arange(B) // n_samples * n_samples + sub
        self.lineage = {r: (r // n_samples, r % n_samples, None, 0) for r in range(B)}  # id -> (prompt, row, parent,
                                                                                        # inherited)
        self.next_row = [n_samples] * P

    @property
    def n_rows(self):
        return len(self.latest)

    def score(self, ring, count, b, width, fring=None):
        """Prefix scores of batch rows b: their last `width` or fewer states, in step order, at most the
        verifier's max_steps (what model.first_step reads of the prefix), and with step_features each step's
        features from fring, standardized as model.make_batch does (a step's tokens run from the previous boundary
        the sampler saw: where extraction keeps fewer than all steps, the offline features of the first stored one
        start at token 0)."""
        S, dev = ring.shape[1] - 1, next(self.v.parameters()).device
        width = min(width, self.v.spec.get('max_steps') or width)
        m = count[b].clamp(max=width)
        i = torch.arange(width, device=ring.device)
        valid = i[None] < m[:, None]
        if self.v.spec['input_steps'] == 'last':
            at, valid = ((count[b] - 1) % S)[:, None], valid[:, :1]
        else:
            at = (count[b, None] - m[:, None] + i) % S
        st = ring[b[:, None], at] * valid[..., None]  # [nb, width, D], padding 0
        if self.cols is not None:
            st = st[..., self.cols.to(st.device)]
        if self.v.spec.get('step_features'):
            mu, sd = (torch.tensor(x, dtype=torch.float32, device=st.device) for x in self.v.spec['feat_norm'])
            st = torch.cat([st.float(), (fring[b[:, None], at] - mu) / sd * valid[..., None]], -1)
        return self.v({'states': st.float().to(dev), 'step_mask': valid.to(dev)}).float().cpu().numpy()

    def step(self, ring, count, keep, done, rows, width, fring=None):
        """Rows that closed a step or ended now: score, then decide with policy. -> (stop: bool [batch rows]
        or None, plan: [(source batch row, copy's batch row)], release: bool [batch rows] that stop waiting)."""
        b = (keep & (count > 0)).nonzero().squeeze(1)
        ids, kb, db = rows.cpu().numpy(), keep.cpu().numpy(), done.cpu().numpy()
        if len(b):
            self.latest[ids[b.cpu().numpy()]] = self.score(ring, count, b, width, fring)
        release = np.zeros(len(ids), dtype=bool)
        if not self.sync:  # pruning: each prompt's rows are one pool, decided as rows arrive
            new = np.zeros(self.n_rows, dtype=bool)
            new[ids[kb]] = True
            stop = np.zeros_like(new)
            for p in np.unique(ids[kb] // self.n):
                sl = slice(p * self.n, (p + 1) * self.n)
                stop[sl] = self.active[sl] & (policy(self.rule, self.latest[sl], self.active[sl], new[sl],
                                                     self.th) == 0)
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


# -----------------------------------------------------------------------------
# offline: the rules replayed on a finished pool in token order. A pool's rows are sampled together from token 0 (as
# extract.py does), so token index = time; a prefix's states are the same whether or not the row went on (a causal
# LM), so the replay stops what the online policy would


def replay_prune(prefix, step_pos, lengths, threshold, rule):
    """prune_now replayed on one pool in token order. prefix / step_pos: per row, its prefix
    scores [S] and step boundaries [S]; lengths: tokens of each finished row. A row stopped at its
    step k costs step_pos[k] + 1 tokens. -> (kept bool [n], tokens int [n])."""
    n = len(prefix)
    ev = sorted((int(t), i, k) for i, sp in enumerate(step_pos) for k, t in enumerate(sp))
    latest, active, tokens = np.full(n, np.nan), np.ones(n, dtype=bool), np.array(lengths, dtype=np.int64)
    j = 0
    while j < len(ev):
        t, new = ev[j][0], np.zeros(n, dtype=bool)
        while j < len(ev) and ev[j][0] == t:  # every row closing a step at token t decides together
            _, i, k = ev[j]
            if active[i]:
                latest[i], new[i] = prefix[i][k], True
            j += 1
        if new.any():
            stop = prune_now(latest, active, new, threshold, rule)
            active &= ~stop
            tokens[stop] = t + 1
    return active, tokens


def replay_deepconf(groups_, lows, lengths, window, threshold, warmup=0):
    """DeepConf's online stopping on one pool (their _deepthink_online and logits processor): rows
    [:warmup] run in full; every other row stops at the first token t where the mean confidence of the
    full window ending at t is below threshold, costing t + 1 tokens (the EOS it is forced to emit).
    A row votes (kept) when its lowest group confidence is >= threshold: warm-up rows too, and a row
    shorter than the window is judged by its mean but never stopped (their code). groups_: per row its
    sliding-window means; lows: its lowest group confidence. -> (kept, tokens)."""
    tokens = np.array(lengths, dtype=np.int64)
    for i in range(warmup, len(groups_)):
        if lengths[i] >= window:
            below = np.flatnonzero(groups_[i] < threshold)
            if below.size:
                tokens[i] = below[0] + window
    return np.asarray(lows) >= threshold, tokens


# -----------------------------------------------------------------------------
# the command: extract.py's splits or sample.py's questions sampled under the policy the knobs name


STAGES = ('extract.py', 'sample.py')


def steering(cfg, verifier):
    """The Steering the knobs in cfg name (search, else pruning by prune_rule), with verifier steering."""
    return Steering(verifier, cfg['search'] or cfg['prune_rule'], cfg['prune_threshold'], cfg['search_width'],
                    {k: cfg[k] for k in DEFAULTS})


def run(argv):
    """The command: argv[0] names the stage whose sampling the policy steers (STAGES), the rest are its config files
    and flags, the knobs above among them; every refusal of the knobs comes before any work."""
    stage = argv[0] if argv else ''
    if stage not in STAGES:
        raise SystemExit(f"python -m studies.policy {stage}: the first argument names the stage it steers, one of "
                         f"{', '.join(STAGES)}; fix: python -m studies.policy extract.py <config> --search=beam "
                         f"--search_ckpt=<ckpt.pt>")
    mod = extract if stage == 'extract.py' else sample
    own, cfg = split_argv(argv[1:], mod.DEFAULTS, DEFAULTS)  # the knobs above, from the same files and flags
    config = sample.configured(own) if stage == 'sample.py' else configure(dict(extract.DEFAULTS), own,  # its flags
                                                                           extract.DEFAULTS)
    cli(lambda c: check_positive(c, DEFAULTS, ('search_width',)), cfg, 'policy.py')
    if cfg['search'] not in (None,) + SEARCH_RULES:
        raise SystemExit(f"search={cfg['search']!r} is unknown; fix: None, or one of {', '.join(SEARCH_RULES)}")
    if cfg['search'] and cfg['prune_ckpt']:
        raise SystemExit(f"search={cfg['search']!r} and prune_ckpt={cfg['prune_ckpt']!r}: one verifier steers; fix: "
                         f"--prune_ckpt=None (search stops rows itself) or --search=None")
    if not cfg['search'] and not cfg['prune_ckpt']:
        raise SystemExit("nothing steers (search=None, prune_ckpt=None); fix: --search=beam --search_ckpt=<ckpt.pt>, "
                         f"or --prune_ckpt=<ckpt.pt> --prune_threshold=<x>; python {stage} samples without a policy")
    key = 'search_ckpt' if cfg['search'] else 'prune_ckpt'
    if stage == 'sample.py':  # search_ckpt None: the verifier that picks
        path = cfg[key] or sample.checkpoint(config)
        return cli(lambda c: sample.run(c, steering(cfg, sample.load_verifier(path)[0])), config, 'sample.py')
    if config['mode'] == 'reencode':
        raise SystemExit(f"{key} steers sampling; fix: mode='sample', or {key}=None to re-encode")
    if not cfg[key]:
        raise SystemExit(f"search={cfg['search']!r} needs search_ckpt; fix: "
                         "--search_ckpt=<verifiers/hsrm_seed42/ckpt.pt>")
    if not os.path.isfile(cfg[key]):
        raise SystemExit(f"{key}={cfg[key]!r} not found; fix: train a verifier first ({trainer(cfg[key])})")
    extract.run(config, steering(cfg, load_checkpoint(cfg[key])[0]), [sys.executable, '-m', 'studies.policy'])


if __name__ == '__main__':
    run(sys.argv[1:])
