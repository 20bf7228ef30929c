"""
The on-disk format and checkpoints, what every stage reads and writes: atomic writes (a killed run never leaves a
half file), a split dir's problem files and labels loaded back (README "The pipeline"), and a verifier's checkpoint,
everything needed to rebuild the exact model, loadable with weights_only=True.
"""
import glob
import json
import os
import pickle

import torch

from model import build_verifier, count_params

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


def problem_files(split_dir):
    files = sorted(glob.glob(os.path.join(split_dir, 'problems', '*.pt')))
    if not files:
        raise FileNotFoundError(f"no extracted problems under {split_dir}/problems/; "
                                f"fix: run `python extract.py <config>` with out_dir pointing at {os.path.dirname(split_dir) or split_dir}")
    return files


# what torch.load raises on a file that is not a whole torch.save file (cut short, zeros, garbage)
DAMAGED = (RuntimeError, EOFError, IndexError, pickle.UnpicklingError)


def load_problem(path, mmap=False):
    """One extracted problem file (mmap=True: tensors are read only when touched). A file that does not
    load (an interrupted copy, a full disk) is an error naming it; extract.py's resume extracts it again."""
    try:
        return torch.load(path, weights_only=True, mmap=mmap)
    except DAMAGED as e:
        raise SystemExit(f"{path} does not load, it is damaged or incomplete ({type(e).__name__}: "
                         f"{(str(e) or 'end of file').splitlines()[0][:120]}); fix: delete it and re-run "
                         f"`python extract.py <config>` with the same out_dir to extract it again") from None


def load_labels(split_dir):
    """{problem key: [label dict per candidate]} from {split_dir}/labels.json."""
    path = os.path.join(split_dir, 'labels.json')
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing; fix: run `python label.py <config>` on this extraction first")
    with open(path) as f:
        return json.load(f)['labels']


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
                                 f"{p['key']} but it has {len(p['candidates'])} candidates; fix: re-run label.py on {split_dir}")
            for i, (c, l) in enumerate(zip(p['candidates'], ls)):
                if not isinstance(l.get('correct'), bool):
                    raise ValueError(f"labels.json in {split_dir}: problem {p['key']} candidate {i} has correct="
                                     f"{l.get('correct')!r}, not true/false; fix: re-run label.py on {split_dir}")
                c['correct'] = l['correct']
                c['answer'] = l.get('answer')
        problems.append(p)
    return problems


# -----------------------------------------------------------------------------
# checkpoints


def save_checkpoint(path, model, meta):
    """meta: train_config (dict), best_metric, best_step, ... (plain Python values)."""
    s = model.spec
    ckpt = {'version': 1, 'kind': model.kind, 'model_args': dict(model.args), 'd_gen': s['d_gen'],
            'layers': list(s['layers']), 'input_steps': s['input_steps'], 'max_steps': s['max_steps'], 'vocab': s['vocab'],
            'vocab_size': s['vocab_size'], 'max_tokens': s['max_tokens'], 'tokenizer': s['tokenizer'],
            'step_features': s.get('step_features', False), 'feat_norm': s.get('feat_norm'), 'residual': s.get('residual'),
            'res_norm': s.get('res_norm'),
            'n_params': count_params(model),
            **meta, 'state_dict': {k: v.detach().cpu() for k, v in model.state_dict().items()}}
    atomic_save(ckpt, path)


def load_checkpoint(path, device='cpu'):
    """(model in eval mode, checkpoint dict). Rebuilds the architecture and input spec from what the file
    holds (a checkpoint without max_steps, from before it was a knob, read every stored state)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found; fix: run `python train.py <config>` first")
    ck = torch.load(path, map_location='cpu', weights_only=True)
    model = build_verifier(ck['kind'], d_gen=ck['d_gen'], vocab_size=ck['vocab_size'], layers=ck['layers'],
                           input_steps=ck['input_steps'], vocab=ck['vocab'], max_tokens=ck['max_tokens'],
                           tokenizer=ck.get('tokenizer'), max_steps=ck.get('max_steps'),
                           step_features=ck.get('step_features', False), feat_norm=ck.get('feat_norm'),
                           residual=ck.get('residual'), res_norm=ck.get('res_norm'), **ck['model_args'])
    model.load_state_dict(ck['state_dict'])
    return model.to(device).eval(), ck
