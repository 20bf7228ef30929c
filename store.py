"""
The on-disk format and checkpoints, what every stage reads and writes: atomic writes (a killed run never leaves a
half file), a split dir's problem files and labels loaded back (README "The pipeline"), a verifier's checkpoint,
everything needed to rebuild the exact model, loadable with weights_only=True, and a training run's folder: its name
and whether it holds the run finished (train.py's bookkeeping).

Each {split}/problems/{index:06d}.pt is one problem (its question, gold, prompt, layers) with its `candidates`: text,
token ids, per-token log-probs / entropies / confidences, step positions, float16 step `states` [S, layers x d_gen]
and, if extract.py's step_kinds asks, `states_mean` / `states_least` of the same shape, `think_end`, `finish`.
load_split(dir) loads a split with its labels ({split}/labels.json, label.py's).
"""
import functools
import glob
import hashlib
import json
import os
import pickle
import zipfile
from collections import Counter

import numpy as np
import torch

from configurator import apply_config, stage_defaults
from model import SPEC, build_verifier, count_params, reads
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


def problem_files(split_dir):
    """The problem files of a split dir, sorted; one whose config.json names a range (extract.py's train_range /
    eval_range) must hold a file for each index of it (check_complete)."""
    files = sorted(glob.glob(os.path.join(split_dir, 'problems', '*.pt')))
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


def done_problems(problems, path):
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
        done.add(path(p))
    return done, damaged


def extracted(per_split, out_dir):
    """A function counting the problems of per_split ({split: problems}) extracted so far: those whole at this call
    (done_problems: a damaged file is not) and those whose file was written since (another inode or mtime), so a damaged
    file being extracted again counts once it is written, not while it is worked on."""
    path = lambda s, p: os.path.join(out_dir, s, 'problems', f"{p['index']:06d}.pt")  # noqa: E731
    paths = [path(s, p) for s, ps in per_split.items() for p in ps]
    stamp = lambda f: (lambda st: (st.st_ino, st.st_mtime_ns))(os.stat(f)) if os.path.exists(f) else None  # noqa: E731
    before = {f: stamp(f) for f in paths}
    whole = {f for s, ps in per_split.items() for f in done_problems(ps, lambda p, s=s: path(s, p))[0]}
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


def read_checkpoint(path, mmap=False):
    """The checkpoint dict of a ckpt.pt (weights_only). A missing file names the fix; one that does not load (cut
    short, zero-filled, garbage) is a ValueError naming it and the fix: retrain that run (train.py trains a run whose
    ckpt.pt does not load again); a torch file that loads but is no checkpoint (a problem file, a pickled model) is
    named as that."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found; fix: run `python train.py <config>` first")
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
    if not isinstance(ck, dict) or not {'state_dict', 'model_args'} <= set(ck) or not {'spec', 'kind'} & set(ck):
        keys = ', '.join(map(str, sorted(ck)[:6])) if isinstance(ck, dict) else ''
        what = ('an extracted problem (extract.py)' if isinstance(ck, dict) and {'key', 'candidates'} <= set(ck) else
                f'a dict of {keys}' if isinstance(ck, dict) else f'a {type(ck).__name__}')
        raise ValueError(f"{path} is a torch file but not a verifier checkpoint (it holds {what}){foreign}")
    if 'spec' not in ck:  # version 1 held the spec's keys at its top level; one saved before a key existed lacks it:
        ck['spec'] = {k: ck.get(k, d) for k, d in SPEC.items()}  # its default (max_steps None: every stored state)
    return ck


def _damaged(path, e):
    """The error of a ckpt.pt that does not load (torch's own text may advise an unsafe load: only its type is
    named)."""
    return ValueError(f"{path} does not load, it is damaged or incomplete ({type(e).__name__}); fix: retrain that run: "
                      f"re-run the train.py command that made it (python train.py <its config>; a run whose ckpt.pt "
                      f"does not load is trained again)")


def load_checkpoint(path, device='cpu'):
    """(model in eval mode, checkpoint dict), the model rebuilt from the input spec and architecture it holds."""
    ck = read_checkpoint(path)
    model = build_verifier(**ck['spec'], **ck['model_args'])
    model.load_state_dict(ck['state_dict'])
    return model.to(device).eval(), ck


# -----------------------------------------------------------------------------
# run folders: a training run's name, and whether its folder holds it finished ({run_dir}/config.json, log.json,
# ckpt.pt)


# train.py's keys whose non-default values name the default run dir, so ablation runs do not overwrite each other
NAME_KEYS = ('d_model', 'n_layer', 'n_head', 'dropout', 'text_size', 'text_tokenizer', 'max_tokens', 'verifier_layers',
             'step_read', 'input_steps', 'max_steps', 'loss', 'n_train', 'n_candidates', 'max_train_problems',
             'prefix_train', 'step_features', 'residual', 'norm_first')


def own_run(files=(), stored_layers=(-1,)):
    """The run name train.py gives the training knobs that config files set (run_name, less its seed), on data storing
    stored_layers: the run whose seeds evaluate.py and sample.py read. No files: train.py's defaults ('hsrm')."""
    defaults = stage_defaults('train.py')
    tc = apply_config(dict(defaults), list(files), defaults)
    return run_name({**tc, 'seed': 0}, defaults, stored_layers).removesuffix('_seed0')


def run_name(cfg, defaults, stored_layers=(-1,)):
    """'hsrm_seed42' for the paper's settings; e.g. 'hsrm_layers-1-2-3-4_loss-bce_seed42' otherwise.
    The layers read are named unless they are the paper's [-1] (verifier_layers None reads all stored); another
    key is named where it differs from defaults (train.py's knobs)."""
    tags, kind = [cfg['verifier']], cfg['verifier']
    unused = {'text_size'} if kind != 'text' else set()
    unused |= {'text_tokenizer', 'max_tokens'} if not reads(kind, 'tokens') else set()
    unused |= {'max_steps', 'step_read'} if not reads(kind, 'states') else set()
    for k in NAME_KEYS:
        v = cfg[k]
        if k == 'verifier_layers':
            v = list(v if v is not None else stored_layers)
            if v != [-1]:
                tags.append('layers' + ''.join(str(x) for x in v) if v else 'nostates')  # []: step features alone
        elif v != defaults[k] and k not in unused:
            tags.append(f"{k}-{str(v).replace('/', '-')}")
    return '_'.join(tags + [f"seed{cfg['seed']}"])


# keys that do not change what a finished run learned, left out when its config is compared with a new call's: where it
# is written (out_dir, run_dir: the data it reads is train_dirs), speed and placement (threads, device,
# chunk_candidates, eval_batch_size: the same model up to float rounding) and overwrite itself. Every other key counts,
# the training schedule and the seed included: a run is its data, its model and its steps. Its data (train.py's
# record, 'data') is compared apart (data_change), so a refusal names what changed in it.
NOT_RUN_KEYS = ('out_dir', 'run_dir', 'threads', 'procs', 'device', 'chunk_candidates', 'eval_batch_size', 'overwrite',
                'used_rows', 'data')


def _located(cfg):
    """A run config's train_dirs as paths relative to its run dir (symlinks resolved): the same for a run and its data
    moved or copied together (out_dir copied off a GPU box), whatever absolute path each was trained at."""
    dirs, run = cfg.get('train_dirs'), cfg.get('run_dir')
    if not dirs or not run:
        return dirs
    return [os.path.relpath(os.path.realpath(d), os.path.realpath(run)) for d in dirs]


def run_diff(old, new, defaults):
    """{key: (old value, new value)} of the keys (NOT_RUN_KEYS left out) where two run configs, as config.json holds
    them, differ; {} = the same run. train_dirs compare as the dirs they name relative to the run dir (out/x, /abs/out/x
    and a symlink are one run, and so is a run moved with its data), and not at all where both configs hold train.py's
    record of the data (data_change compares that: the same data wherever it lies); a key an older config.json lacks as
    its default (defaults: train.py's knobs) (val_cut: the problem-level cut it was trained on)."""
    base = json.loads(json.dumps(defaults, default=str))
    old, new = {**base, 'val_cut': 'by problem (before grouped cuts)', **old}, {**base, **new}  # older runs: the old
                                                                                                # cut
    skip = set(NOT_RUN_KEYS) | ({'train_dirs'} if old.get('data') and new.get('data') else set())
    real = lambda c, k: _located(c) if k == 'train_dirs' else c.get(k)  # noqa: E731
    return {k: (old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if k not in skip and real(old, k) !=
            real(new, k)}


def data_change(old, new, log=None, names=None):
    """What differs between the data a run was trained on (old: train.py's record in its config, one entry per split
    dir: where it lies relative to the run, its training / validation problem counts, their ids' and labels' hashes,
    the states' weights_dtype) and the data a call would train it on (new), in words; '' where none does. A run
    recorded before runs held the record (old None) is compared by its log.json's problem counts (log), all it
    kept. names: the split dirs as the message names them (default: where the record places them)."""
    if not new:
        return ''
    count = lambda rec, k: sum(r[k] for r in rec)  # noqa: E731
    if not old:
        if not log or 'n_train_problems' not in log:
            return ''
        was, now = (log['n_train_problems'], log['n_val_problems']), (count(new, 'n_train'), count(new, 'n_val'))
        return '' if was == now else (f"trained on {was[0]} training / {was[1]} validation problems, the split dirs "
                                      f"now give {now[0]} / {now[1]}")
    if len(old) != len(new):
        return f'trained on {len(old)} split dirs, now {len(new)}'
    for i, (o, n) in enumerate(zip(old, new)):
        where = names[i] if names else n['dir']
        if (o['n_train'], o['n_val']) != (n['n_train'], n['n_val']):
            return (f"{where}: trained on {o['n_train']} training / {o['n_val']} validation problems, it now gives "
                    f"{n['n_train']} / {n['n_val']}")
        if o['ids'] != n['ids']:
            return f"{where}: other problems than it was trained on ({n['n_train']} / {n['n_val']}, other ids)"
        if o['labels'] != n['labels']:
            return f"{where}: relabelled since it was trained (its labels.json marks other candidates correct)"
        if o.get('weights_dtype') != n.get('weights_dtype'):
            return (f"{where}: trained on states of {o.get('weights_dtype')} weights, it now holds "
                    f"{n.get('weights_dtype')}")
    return ''


def _sha(x):
    return hashlib.sha256(json.dumps(x).encode()).hexdigest()


def split_record(d, run_dir, keys, labels):
    """What a run trains on from split dir d, as its config.json and ckpt.pt record it (store.data_change compares
    two): where d lies relative to the run dir (store.train_dirs_now: a run moved with its data finds it), the
    training / validation problem counts, a hash of their ids (keys: [training keys, validation keys]), a hash of
    their candidates' labels (labels: per problem in that order, correct or not: what the losses and validation
    read) and the weights_dtype its states were extracted in."""
    cfgp = os.path.join(d, 'config.json')
    dtype = json.load(open(cfgp)).get('weights_dtype') if os.path.exists(cfgp) else None
    return {'dir': os.path.relpath(os.path.abspath(d), os.path.abspath(run_dir)), 'n_train': len(keys[0]),
            'n_val': len(keys[1]), 'ids': _sha(keys), 'labels': _sha(labels), 'weights_dtype': dtype}


def check_fresh(ck, path):
    """ValueError naming the change and the fix where the data a checkpoint was trained on (its train_config's record,
    train.py's; a run from before runs kept one: log.json's problem counts) is not what its split dirs hold now (grown,
    cut, other problems, relabelled, re-extracted in another dtype): its scores, and the validation choices made for it
    on those dirs, would be stale. Split dirs not found here (a checkpoint copied alone) are not checked."""
    tc = ck.get('train_config') or {}
    dirs = train_dirs_now(tc, path)
    if not dirs or not all(os.path.exists(os.path.join(d, 'labels.json')) for d in dirs):
        return
    now = []
    for d in dirs:
        labels = load_labels(d)
        a, b = split_problems(problem_files(d), **{k: tc[k] for k in ('val_frac', 'val_seed') if k in tc},
                              k=tc.get('max_train_problems'))
        keys = [[file_meta(f)[1] for f in a], [file_meta(f)[1] for f in b]]
        now.append(split_record(d, os.path.dirname(path), keys,
                                [[bool(x.get('correct')) for x in labels.get(k, [])] for k in keys[0] + keys[1]]))
    logp = os.path.join(os.path.dirname(path), 'log.json')
    log = json.load(open(logp)) if os.path.exists(logp) else None
    change = data_change(tc.get('data'), now, log, dirs)
    if change:
        raise ValueError(f"{path} is stale: {change}; fix: retrain it on the data as it is now (the command that "
                         "trained it, with --overwrite=True, e.g. python train.py <config> --overwrite=True)")


def run_state(run_dir):
    """'done': the run in run_dir finished (its log.json says so); 'unfinished': a train.py run folder (it writes
    config.json before training) whose log.json is missing or not done (interrupted); None: no train.py run folder
    (a checkpoint saved otherwise)."""
    logp = os.path.join(run_dir, 'log.json')
    if os.path.exists(logp):
        try:
            with open(logp) as f:
                return 'done' if json.load(f).get('done') else 'unfinished'
        except ValueError:  # cut short by a kill
            return 'unfinished'
    return 'unfinished' if os.path.exists(os.path.join(run_dir, 'config.json')) else None


def finished(c, defaults, keep_both):
    """Whether run config c is already trained in c['run_dir'] (skip it). A finished run whose config or data
    (c['data'], train.py's record: data_change) differs is refused (ValueError naming the keys or the change, and
    keep_both, the calling stage's way to a new run dir) unless c['overwrite']; an unfinished one (interrupted, no done
    log.json) is trained again."""
    logp, cfgp = os.path.join(c['run_dir'], 'log.json'), os.path.join(c['run_dir'], 'config.json')
    if not (os.path.exists(logp) and os.path.exists(cfgp)):
        return False
    with open(logp) as f1, open(cfgp) as f2:
        log, old = json.load(f1), json.load(f2)
    new = json.loads(json.dumps(c, default=str))
    done, diff, change = log.get('done'), run_diff(old, new, defaults), data_change(old.get('data'), new.get('data'),
                                                                                    log, c['train_dirs'])
    keys = ', '.join(f'{k} {a!r} -> {b!r}' for k, (a, b) in diff.items())
    if done and not diff and not change:
        try:  # a ckpt.pt cut short or zero-filled after the run finished: train it again
            read_checkpoint(os.path.join(c['run_dir'], 'ckpt.pt'), mmap=True)
        except (ValueError, FileNotFoundError) as e:
            print(f"{c['run_dir']} finished, but {str(e).split('; fix:')[0]}; training it again")
            return False
        print(f"{c['run_dir']} already finished with this config; skipping" + (
            '' if old.get('data') else ' (trained before runs recorded their data: its problem counts are those of '
                                       'the split dirs now)'))
        return True
    if done and not c['overwrite']:
        what = f'whose config differs ({keys})' if diff else f'trained on other data ({change})'
        raise ValueError(f"{c['run_dir']} holds a finished run {what}; fix: {keep_both} keeps both, --overwrite=True "
                         f"trains it again in place")
    what = f'with {keys}' if diff else f'trained on other data ({change})'
    print(f"{c['run_dir']} holds " + (f'a finished run {what}; overwriting it' if done else 'an unfinished run; '
                                      'training it again'))
    return False


def train_dirs_now(tc, path):
    """The split dirs a checkpoint's run (train_config tc, its ckpt.pt at path) was trained on, where they lie now: each
    where train.py's record places it relative to the run dir (a run and its data moved or copied together), else at
    the path it was trained at (a checkpoint copied alone). A config without train_dirs: {out_dir}/train."""
    dirs = tc.get('train_dirs') or ([os.path.join(tc['out_dir'], 'train')] if tc.get('out_dir') else [])
    if tc.get('data') and len(tc['data']) == len(dirs):
        rel = [r['dir'] for r in tc['data']]
    else:  # a run from before the record: relative to the run dir it was trained in
        rel = _located({'train_dirs': dirs, 'run_dir': tc['run_dir']}) if tc.get('run_dir') else dirs
    here = os.path.dirname(os.path.abspath(path))
    out = []
    for d, r in zip(dirs, rel):
        moved = os.path.normpath(os.path.join(here, r))
        out.append(moved if not os.path.isabs(r) and os.path.isdir(moved) else d)
    return out


def trained_on(ck, path):
    """The extraction configs (config.json) of a checkpoint's training splits (train_dirs_now: train.py's train_dirs
    from the checkpoint or the config.json beside it, where they lie now), each with its path under 'where'; [] when
    none is found; a shipped verifier's own (tables.export_verifier: it names no split dir)."""
    if ck.get('trained_on') is not None:
        return ck['trained_on']
    tc = ck.get('train_config')
    side = os.path.join(os.path.dirname(path), 'config.json')
    if not tc and os.path.exists(side):
        with open(side) as f:
            tc = json.load(f)
    out = []
    for d in train_dirs_now(tc or {}, path):
        p = os.path.join(d, 'config.json')
        if os.path.exists(p):
            with open(p) as f:
                out.append({**json.load(f), 'where': p})
    return out


def check_dtype(trained, dtype, path, what, fix, key='ckpt'):
    """ValueError (one line, the fix) where a verifier would read states of weights in dtype while it was trained on
    another's: trained, its training extractions' configs (trained_on; pooled splits: any of theirs); what: whose
    states those are, in words; fix, with {trained} for the dtype it was trained on; key: the knob naming the
    checkpoint (None: its path alone). Unknown on either side (an older extraction): not checked."""
    had = [t for t in trained if t.get('weights_dtype')]
    if dtype and had and dtype not in {t['weights_dtype'] for t in had}:
        raise ValueError(f"{f'{key}={path!r}' if key else path} was trained on states of {had[0]['weights_dtype']} "
                         f"weights ({had[0]['where']}), {what}; fix: {fix.format(trained=had[0]['weights_dtype'])}")
