"""
The on-disk format and checkpoints, what every stage reads and writes: atomic writes (a killed run never leaves a
half file), a split dir's problem files and labels loaded back (README "The pipeline"), a verifier's checkpoint,
everything needed to rebuild the exact model, loadable with weights_only=True. A training run's bookkeeping (its
name, whether its folder holds it finished, what changed since) is train.py's.

Each {split}/problems/{index:06d}.pt is one problem (its question, gold, prompt, layers) with its `candidates`: text,
token ids, per-token log-probs / entropies / confidences, step positions, float16 step `states` [S, layers x d_gen]
and, if extract.py's step_kinds asks, `states_mean` / `states_least` of the same shape, `think_end`, `finish`.
load_split(dir) loads a split with its labels ({split}/labels.json, label.py's).
"""
import functools
import glob
import json
import os
import pickle
import zipfile
from collections import Counter

import numpy as np
import torch

from model import build_verifier, count_params
from tasks import group_key

# -----------------------------------------------------------------------------
# files: atomic writes and the extraction format


def atomic_save(obj, path):
    """torch.save to a temp file in the same directory, then rename: a killed run never leaves a half file."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f'{path}.tmp{os.getpid()}'
    torch.save(obj, tmp)
    os.replace(tmp, path)


def atomic_write_json(obj, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w') as f:
        json.dump(obj, f, indent=1, default=str)
    os.replace(tmp, path)


def atomic_write_json_lines(rows, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w') as f:
        f.write(''.join(json.dumps(r) + '\n' for r in rows))
    os.replace(tmp, path)


def update_json_lines(path, change):
    """Rewrite the json-lines file path as change(its rows) -> rows, atomically, holding an OS lock (flock on
    .{name}.lock beside it) from the read to the write: processes updating one file at once (the shards of a split,
    each recording its run) each keep the others' lines. Blocks while another holds it, a moment."""
    import fcntl
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f'.{os.path.basename(path)}.lock'), 'a') as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released as f closes
        rows = []
        if os.path.exists(path):
            with open(path) as g:
                rows = [json.loads(x) for x in g]
        atomic_write_json_lines(change(rows), path)


_LOCKS = {}  # {path: open file} of the locks this process holds (lock), until it exits


def lock(folder, key, part=''):
    """Hold {folder}/.lock[.part] until this process exits (folder made here), or refuse in one line where another
    process holds it: two runs on one folder would each do the same work. An OS lock (flock): a killed run leaves none
    behind. part: a share of the folder's work that runs beside the others (a shard)."""
    import fcntl
    os.makedirs(folder, exist_ok=True)
    path = os.path.abspath(os.path.join(folder, '.lock' + (f'.{part}' if part else '')))
    if path in _LOCKS:  # this process's already (a second run in it)
        return
    f = open(path, 'a+')
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        raise SystemExit(f"{key}={folder!r}{f' ({part})' if part else ''} is being written by another run (process "
                         f"{f.read().strip() or '?'}, holding {path}); fix: let it finish (this command then resumes "
                         f"what is left), or --{key}=<another folder>") from None
    f.truncate(0)
    f.write(str(os.getpid()))
    f.flush()
    _LOCKS[path] = f


# the keys a split's or a sample folder's config.json records of the steering policy its sampling ran under
# (studies/policy.py's knobs); plain sampling records none of them (a folder written before the policy left the stages
# holds their defaults, search and prune_ckpt None)
STEERING = ('search', 'prune_ckpt', 'search_ckpt', 'search_width', 'prune_rule', 'prune_threshold')


def steering(cfg):
    """{key: value} of the steering policy config.json dict cfg records; {} where none steered its sampling."""
    return {k: cfg.get(k) for k in STEERING} if cfg.get('search') or cfg.get('prune_ckpt') else {}


def problem_files(split_dir, growing=False):
    """The problem files of a split dir, sorted; one whose config.json names a range (extract.py's train_range /
    eval_range) must hold a file for each index of it (check_complete). growing: those written so far, none or some
    (a split read while an extraction grows it)."""
    files = sorted(glob.glob(os.path.join(split_dir, 'problems', '*.pt')))
    if growing:
        return files
    if not files:
        raise FileNotFoundError(f"no extracted problems under {split_dir}/problems/; "
                                "fix: run `python extract.py <config>` with out_dir pointing at "
                                f"{os.path.dirname(split_dir) or split_dir}")
    check_complete(split_dir, files)
    return files


def check_complete(split_dir, files):
    """ValueError naming the fix unless files ({index:06d}.pt, extract.py's names) cover the range the split's
    config.json records for it (its split's train_range / eval_range): a killed or partial extraction is never read
    as the whole split. exclude_ids leave their indices out: at most that many may lack a file. A split dir without
    that record (made by hand, or before it) is not checked."""
    path = os.path.join(split_dir, 'config.json')
    if not os.path.exists(path):
        return
    with open(path) as f:
        cfg = json.load(f)
    key = f"{cfg.get('split')}_range"
    r = cfg.get(key)
    if not (isinstance(r, (list, tuple)) and len(r) == 2 and all(isinstance(x, int) for x in r)):
        return
    held = {os.path.basename(p)[:-3] for p in files}
    missing = [i for i in range(r[0], r[1] + 1) if f'{i:06d}' not in held]
    if len(missing) > len(cfg.get('exclude_ids') or ()):
        raise ValueError(f"{split_dir} is incomplete: {len(missing)} of the {r[1] - r[0] + 1} problems of its "
                         f"{key}={tuple(r)} have no file (e.g. problems/{missing[0]:06d}.pt); fix: run `python "
                         f"extract.py <config>` again with out_dir {os.path.dirname(os.path.abspath(split_dir))} (it "
                         f"extracts only the missing ones), then label.py")


# what torch.load raises on a file that is not a whole torch.save file (cut short: OSError; zeros; a text file:
# KeyError; garbage in its pickle: UnicodeDecodeError, a ValueError), and what check_problem / check_crc raise on one
# that loads
DAMAGED = (RuntimeError, EOFError, IndexError, pickle.UnpicklingError, OSError, KeyError, ValueError,
           zipfile.BadZipFile)


def check_crc(path):
    """Raise zipfile.BadZipFile when a torch.save file's bytes differ from the CRC32s its zip directory holds: garbage
    inside a tensor's bytes loads silently otherwise. Reads the whole file."""
    with zipfile.ZipFile(path) as z:
        bad = z.testzip()
    if bad is not None:
        raise zipfile.BadZipFile(f'{bad} fails its CRC check')


def check_problem(d):
    """Raise ValueError unless d has the structure of an extracted problem (extract.py): keys, and per candidate its
    states [S, width] (one width; a stored mean / least kind the same shape), step_pos [S], token_ids [T] and per-token
    statistics [T]."""
    if not isinstance(d, dict) or not {'key', 'question', 'candidates'} <= set(d) \
            or not isinstance(d['candidates'], list) or not d['candidates']:
        raise ValueError(f"not a problem dict (keys {sorted(d) if isinstance(d, dict) else type(d).__name__})")
    widths = set()
    for i, c in enumerate(d['candidates']):
        st, ids = c.get('states') if isinstance(c, dict) else None, c.get('token_ids') if isinstance(c, dict) else None
        if not (torch.is_tensor(st) and st.dim() == 2 and torch.is_tensor(ids) and ids.dim() == 1):
            raise ValueError(f'candidate {i} lacks states [S, width] or token_ids [T]')
        widths.add(st.shape[1])
        if 'step_pos' in c and len(c['step_pos']) != len(st) or any(len(c[k]) != len(ids) for k in (
                'logprobs', 'entropies', 'confidences') if k in c) or any(
                c[k].shape != st.shape for k in ('states_mean', 'states_least') if k in c):  # model.STEP_KINDS
            raise ValueError(f'candidate {i}: step_pos / per-token statistics do not match its states / tokens')
    if len(widths) > 1:
        raise ValueError(f'candidates differ in state width {sorted(widths)}')


def load_problem(path, mmap=False, crc=None):
    """One extracted problem file (mmap=True: tensors are read only when touched), its bytes checked against their CRCs
    (crc; None: unless mmap) and its structure (check_problem). A file that does not load (an interrupted copy, a full
    disk, garbage) is an error naming it; extract.py's resume extracts it again."""
    try:
        if not mmap if crc is None else crc:
            check_crc(path)
        d = torch.load(path, weights_only=True, mmap=mmap)
        check_problem(d)
        return d
    except DAMAGED as e:
        raise SystemExit(f"{path} does not load, it is damaged or incomplete ({type(e).__name__}: "
                         f"{(str(e) or 'end of file').splitlines()[0][:120]}); fix: re-run `python extract.py "
                         f"<config>` with the same out_dir: it extracts a damaged file again") from None


def load_labels(split_dir):
    """{problem key: [label dict per candidate]} from {split_dir}/labels.json. A missing or damaged one (cut short, not
    JSON, not label.py's) is one line naming it; label.py writes it again from the problem files."""
    path = os.path.join(split_dir, 'labels.json')
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing; fix: run `python label.py <config>` on this extraction first")
    try:
        with open(path, encoding='utf-8') as f:
            labels = json.load(f)['labels']
        if not isinstance(labels, dict):
            raise TypeError(f"'labels' is a {type(labels).__name__}")
        return labels
    except (ValueError, KeyError, TypeError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError(f"{path} does not load, it is damaged or incomplete ({type(e).__name__}: "
                         f"{str(e).splitlines()[0][:80]}); fix: relabel: python label.py <config> with out_dir "
                         f"{os.path.dirname(os.path.abspath(split_dir))} (it writes labels.json again from the problem "
                         f"files)") from None


def load_split(split_dir, labels=True, files=None):
    """All problems of one split dir (or the given files of it) as a list of dicts (the per-problem .pt
    content), each candidate carrying 'correct' (bool) from labels.json when labels=True. Never needs
    the generator."""
    files = problem_files(split_dir) if files is None else files  # no data at all is the first thing to report
    lab = load_labels(split_dir) if labels else None
    problems = []
    for path in files:
        p = load_problem(path)
        if lab is not None:
            ls = lab.get(p['key'])
            if ls is None or len(ls) != len(p['candidates']):
                raise ValueError(f"labels.json in {split_dir} has {0 if ls is None else len(ls)} labels for problem "
                                 f"{p['key']} but it has {len(p['candidates'])} candidates; fix: re-run label.py on "
                                 f"{split_dir}")
            for i, (c, l) in enumerate(zip(p['candidates'], ls)):
                if not isinstance(l.get('correct'), bool):
                    raise ValueError(f"labels.json in {split_dir}: problem {p['key']} candidate {i} has correct="
                                     f"{l.get('correct')!r}, not true/false; fix: re-run label.py on {split_dir}")
                c['correct'] = l['correct']
                c['answer'] = l.get('answer')
        problems.append(p)
    return problems


def done_problems(problems, path, n=None):
    """(paths of `problems` already extracted, how many files did not load, {path: its candidates} of whole files
    holding fewer than n candidates: a pool being grown, not done; n None: any count is done). A file that does not
    load (an interrupted copy, a full disk) is extracted again; one holding another question or gold than the
    problem at its index means the data source changed (dataset file, exclude_ids, synthetic level or
    seed): an error, since the split would mix two data sets. Files are memory-mapped: their states are
    never read."""
    done, damaged, short = set(), 0, {}
    for p in problems:
        if not os.path.exists(path(p)):
            continue
        try:
            check_crc(path(p))  # garbage inside a tensor's bytes loads silently: its CRC tells
            old = torch.load(path(p), weights_only=True, mmap=True)
            check_problem(old)
        except DAMAGED:
            damaged += 1
            continue
        if (old['question'], old['gold']) != (p['question'], p['gold']):
            raise SystemExit(f"{path(p)} holds {old['dataset']} problem {old['id']!r} ({old['question'][:60]!r}, gold "
                             f"{old['gold']!r}), this run's index {p['index']} is {p['dataset']} problem {p['id']!r} "
                             f"({p['question'][:60]!r}, gold {p['gold']!r}): the data changed (dataset, its file, "
                             "exclude_ids, synth_level, word_family, synth_seed); fix: a new --out_dir, or the data "
                             "it was extracted from")
        if n is not None and len(old['candidates']) < n:
            short[path(p)] = len(old['candidates'])
        else:
            done.add(path(p))
    return done, damaged, short


def extracted(per_split, out_dir, ns=None):
    """A function counting the problems of per_split ({split: problems}) extracted so far: those whole at this call
    (done_problems: a damaged file is not, nor one with fewer candidates than ns[split], being grown) and those whose
    file was written since (another inode or mtime), so a damaged or growing file counts once it is written, not while
    it is worked on."""
    path = lambda s, p: os.path.join(out_dir, s, 'problems', f"{p['index']:06d}.pt")  # noqa: E731
    paths = [path(s, p) for s, ps in per_split.items() for p in ps]
    stamp = lambda f: (lambda st: (st.st_ino, st.st_mtime_ns))(os.stat(f)) if os.path.exists(f) else None  # noqa: E731
    before = {f: stamp(f) for f in paths}
    whole = {f for s, ps in per_split.items()
             for f in done_problems(ps, lambda p, s=s: path(s, p), (ns or {}).get(s))[0]}
    return lambda: sum(f in whole and stamp(f) == before[f] or stamp(f) not in (None, before[f]) for f in paths)


def generated_tokens(cands):
    """Tokens one problem's sampling ran through the generator's decoding forward: each candidate's decoded (its
    prompt's last token and its own; a search copy's since it was made), or, in files made before it was recorded,
    its tokens."""
    return sum(c['decoded'] if 'decoded' in c else len(c['token_ids']) for c in cands)


# -----------------------------------------------------------------------------
# the grouped split: a split dir's problems cut into training and validation by group (train.py's; evaluate.py and the
# studies cut validation as it did)


@functools.lru_cache(maxsize=None)  # curve and transfer cut the same files at every size and fold: read each once
def file_meta(path):
    """(tasks.group_key, key) of one problem file (memory-mapped: its states are never read)."""
    p = load_problem(path, mmap=True)
    return group_key(p), p['key']


def file_group(path):
    return file_meta(path)[0]


VAL_CUT = 'by group (tasks.group_key)'  # the validation cut's rule, in each run's config.json: a run cut otherwise is
                                        # another run


def split_problems(problems, val_frac=0.2, val_seed=42, k=None):
    """Deterministic split -> (train, val) by group: every candidate of a problem, and every problem of a group
    (tasks.group_key: a synthetic operand multiset, a word family's numbers and answer; a benchmark problem alone),
    lands on one side, so validation choices are made on questions training never saw, not even reordered.
    problems: problem dicts or their files (read memory-mapped for the group). k (max_train_problems): first keep
    k problems, a fixed draw by val_seed that is nested (the k=25 problems are among the k=50 ones), then split
    those; k = len(problems) is the same as None. Validation takes whole groups in a seeded order until it holds
    val_frac of the problems (with one problem per group: exactly a problem-level split)."""
    n = len(problems)
    if k is not None:
        if not 0 < k <= n:
            raise ValueError(f"max_train_problems={k} but the split dir has {n} problems; fix: --max_train_problems="
                             f"<1..{n}> (K counts training and validation problems)")
        keep = np.sort(np.random.default_rng([val_seed, 1]).permutation(n)[:k])
        problems, n = [problems[i] for i in keep], k
    n_val = int(round(val_frac * n))
    if n_val < 1 or n - n_val < 1:
        raise ValueError(f"val_frac={val_frac} on {n} problems leaves {n - n_val} train / {n_val} val problems; "
                         f"fix: extract more problems or change --val_frac")
    groups = [group_key(p) if isinstance(p, dict) else file_group(p) for p in problems]
    uniq, size = list(dict.fromkeys(groups)), Counter(groups)
    val, count = set(), 0
    for g in np.random.default_rng(val_seed).permutation(len(uniq)):
        if count >= n_val:
            break
        val.add(uniq[g])
        count += size[uniq[g]]
    if len(val) == len(uniq):
        raise ValueError(f"val_frac={val_frac} on {n} problems in {len(uniq)} groups (tasks.group_key) leaves no "
                         f"training group; fix: extract more problems or lower --val_frac")
    return [p for p, g in zip(problems, groups) if g not in val], [p for p, g in zip(problems, groups) if g in val]


# -----------------------------------------------------------------------------
# checkpoints


def save_checkpoint(path, model, meta):
    """The model's input spec (model.SPEC's keys), architecture and weights, with meta: train_config (dict),
    best_metric, best_step, ... (plain Python values)."""
    ckpt = {'version': 2, 'spec': dict(model.spec), 'model_args': dict(model.args), 'n_params': count_params(model),
            **meta, 'state_dict': {k: v.detach().cpu() for k, v in model.state_dict().items()}}
    atomic_save(ckpt, path)


def trainer(path):
    """The command that writes a checkpoint at path (or a glob of them), which a fix names where none is there: the
    data-need curve's runs ({out_dir}/curve/K<k>/<variant>/seed<s>/ckpt.pt, studies/curve.py's run_dir: train.py never
    writes there), baselines.py's text verifiers ({out_dir}/verifiers/text_<size>_seed<s>/), else train.py's."""
    parts = os.path.normpath(path).split(os.sep)
    if len(parts) >= 5 and parts[-5] == 'curve' and parts[-4][:1] == 'K' and parts[-4][1:].isdigit():
        return 'python -m studies.curve <config>'
    if len(parts) >= 3 and parts[-3] == 'verifiers' and parts[-2].startswith('text_'):
        return 'python baselines.py <config>'
    return 'python train.py <config>'


def read_checkpoint(path, mmap=False):
    """The checkpoint dict of a ckpt.pt (weights_only). A missing file names the fix; one that does not load (cut
    short, zero-filled, garbage) is a ValueError naming it and the fix: retrain that run (train.py trains a run whose
    ckpt.pt does not load again); a torch file that loads but is no checkpoint (a problem file, a pickled model) is
    named as that."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found; fix: run `{trainer(path)}` first")
    foreign = "; fix: the ckpt.pt of a run train.py wrote ({out_dir}/verifiers/<run>/ckpt.pt, python train.py <config>)"
    try:
        if not mmap:
            check_crc(path)
        ck = torch.load(path, map_location='cpu', weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as e:
        if 'Weights only load failed' in str(e):  # a whole torch file, holding Python objects: some other program's
            raise ValueError(f"{path} is a torch file but not a verifier checkpoint (it holds Python objects, not "
                             f"tensors and plain values){foreign}") from None
        raise _damaged(path, e) from None
    except DAMAGED as e:
        raise _damaged(path, e) from None
    if isinstance(ck, dict) and {'state_dict', 'model_args', 'kind'} <= set(ck) and 'spec' not in ck:
        raise _damaged(path, None, f"is a verifier checkpoint of an older format (version {ck.get('version', 1)}), "
                                   "which this code does not read")
    if not isinstance(ck, dict) or not {'state_dict', 'model_args', 'spec'} <= set(ck):
        keys = ', '.join(map(str, sorted(ck)[:6])) if isinstance(ck, dict) else ''
        what = ('an extracted problem (extract.py)' if isinstance(ck, dict) and {'key', 'candidates'} <= set(ck) else
                f'a dict of {keys}' if isinstance(ck, dict) else f'a {type(ck).__name__}')
        raise ValueError(f"{path} is a torch file but not a verifier checkpoint (it holds {what}){foreign}")
    return ck


def _damaged(path, e, what=None):
    """The error of a ckpt.pt that does not load (torch's own text may advise an unsafe load: only its type is
    named), or is what."""
    return ValueError(f"{path} {what or f'does not load, it is damaged or incomplete ({type(e).__name__})'}; fix: "
                      f"retrain that run: re-run the train.py command that made it (python train.py <its config>; a "
                      f"run whose ckpt.pt does not load is trained again)")


def load_checkpoint(path, device='cpu'):
    """(model in eval mode, checkpoint dict), the model rebuilt from the input spec and architecture it holds."""
    ck = read_checkpoint(path)
    model = build_verifier(**ck['spec'], **ck['model_args'])
    model.load_state_dict(ck['state_dict'])
    return model.to(device).eval(), ck


def check_dtype(trained, dtype, path, what, fix, key='ckpt'):
    """ValueError (one line, the fix) where a verifier would read states of weights in dtype while it was trained on
    another's: trained, its training extractions' configs (trained_on; pooled splits: any of theirs); what: whose
    states those are, in words; fix, with {trained} for the dtype it was trained on; key: the knob naming the
    checkpoint (None: its path alone). Unknown on either side (an older extraction): not checked."""
    had = [t for t in trained if t.get('weights_dtype')]
    if dtype and had and dtype not in {t['weights_dtype'] for t in had}:
        raise ValueError(f"{f'{key}={path!r}' if key else path} was trained on states of {had[0]['weights_dtype']} "
                         f"weights ({had[0]['where']}), {what}; fix: {fix.format(trained=had[0]['weights_dtype'])}")
