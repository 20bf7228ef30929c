"""
Label every sampled candidate correct / incorrect against the gold answer.

Stage 1 (deterministic, no network): grading.py's grader finds the final answer span with this project's rules
(boxes, answer statements, GSM8K '####', the last math span or number), then compares it with the gold answer:
plain numbers exactly (fast path), everything else with Hugging Face's Math-Verify in a worker process that is
killed past `sympy_timeout`; results are cached per (answer, gold) pair.
Stage 2 (optional): a local Hugging Face causal LM judges the candidates stage 1 did not mark correct (an
online-pruned candidate, a partial solution, stays incorrect and is never judged); decisions are cached in
{split}/judge_cache.json.

Reads {out_dir}/{split}/problems/*.pt (see extract.py), writes {split}/labels.json atomically.
    python label.py config/gsm8k_1p7b.py
    python label.py config/math500_1p7b.py --judge_model=/path/to/Qwen3-8B --judge_batch_size=16
"""
import difflib
import hashlib
import json
import os

import torch
from tqdm import tqdm

from configurator import configure, knobs
from generator import load_generator
from grading import grade, normalize_gold
from machine import check_writable, cli, resolve_device
from store import atomic_write_json, load_problem, problem_files

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
out_dir = 'out/demo'  # the extraction run directory (holds train/ and eval/)
splits = ['train', 'eval']  # split directories under out_dir to label (missing ones are skipped)
judge_model: str = None  # None = stage 1 only; else a local HF causal LM: 'smollm2', a .gguf path, folder or hub id
judge_batch_size = 8
judge_scope = 'unresolved'  # 'unresolved': judge only candidates stage 1 did not mark correct | 'all' (never pruned
                            # ones)
judge_max_tokens = 3072  # judge prompt budget in tokens; a longer solution is cut in the middle
truncated_policy = 'incorrect'  # 'incorrect': cut at the length limit with no answer statement -> wrong | 'grade'
sympy_timeout = 2.0  # seconds per Math-Verify comparison; the worker process is killed past it
device = 'auto'  # judge device: 'auto' | 'cpu' | 'cuda' | 'cuda:0' ...
seed = 1337  # labelling is deterministic; recorded for the run config
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------
# stage 2: LLM judge

JUDGE_PROMPT = ("Problem:\n{question}\n\nA student's solution:\n{solution}\n\nReference answer: {gold}\n\n"
                "Is the student's final answer mathematically equivalent to the reference answer? "
                "Answer Yes or No.")


def load_judge(name, device='cpu'):
    """(model, tokenizer) for a local HF causal LM: 'smollm2' (embedded), a .gguf path, a folder or hub id."""
    return load_generator(name, device, key='judge_model')


def _cut_middle(tok, text, max_tokens):
    """text within max_tokens of tok: its start and its end (where the answer is), the middle dropped."""
    ids = tok.encode(text, add_special_tokens=False)
    if len(ids) <= max_tokens:
        return text
    head = max_tokens // 3
    return (tok.decode(ids[:head]) + '\n[... middle of the solution cut ...]\n' +
            tok.decode(ids[len(ids) - (max_tokens - head):]))


def judge_prompts(tok, items, max_tokens=3072):
    """items: (question, candidate text, gold) -> prompt strings (chat template if the model has one).
    The question gets up to a quarter of max_tokens, the solution the rest, each cut in the middle."""
    out = []
    for q, text, gold in items:
        msg = JUDGE_PROMPT.format(question=_cut_middle(tok, q.strip(), max_tokens // 4),
                                  solution=_cut_middle(tok, text.strip(), max_tokens - max_tokens // 4), gold=gold)
        if getattr(tok, 'chat_template', None):  # Qwen3: no <think> block, the next token is the verdict
            msg = tok.apply_chat_template([{'role': 'user', 'content': msg}], tokenize=False,
                                          add_generation_prompt=True, enable_thinking=False)
        else:
            msg += '\nAnswer:'
        out.append(msg)
    return out


def judge_decide(model, tok, prompts, batch_size=8):
    """One forward pass per batch; Yes if the next-token logit of Yes beats No. -> list[bool]"""
    tok.padding_side = 'left'
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    yes = sorted({tok.encode(w, add_special_tokens=False)[0] for w in ('Yes', ' Yes')})
    no = sorted({tok.encode(w, add_special_tokens=False)[0] for w in ('No', ' No')})
    device = next(model.parameters()).device
    out = []
    for i in range(0, len(prompts), batch_size):
        enc = tok(prompts[i:i + batch_size], return_tensors='pt', padding=True, add_special_tokens=False)
        ids, mask = enc['input_ids'].to(device), enc['attention_mask'].to(device)  # [B, T]
        pos = (mask.cumsum(-1) - 1).clamp(min=0)  # left padding: positions start at each text's first token
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1).logits[:, -1].float()
        out += (logits[:, yes].max(-1).values > logits[:, no].max(-1).values).tolist()
    return out

# -----------------------------------------------------------------------------
# labelling a split


def _summary(problems, labels, stage1, truncated):
    """Per dataset: per-sample accuracy, pass@N, share of problems with both correct and incorrect."""
    by = {}
    for p in problems:
        for name in (p['dataset'], 'all'):
            by.setdefault(name, []).append(p['key'])
    out = {}
    for name, keys in by.items():
        ls = [labels[k] for k in keys]
        flat = [r['correct'] for l in ls for r in l]
        s1 = [c for k in keys for c in stage1[k]]
        stages = {}
        for l in ls:
            for r in l:
                stages[r['stage']] = stages.get(r['stage'], 0) + 1
        out[name] = dict(
            n_problems=len(ls), n_candidates=len(flat),
            accuracy=sum(flat) / max(1, len(flat)),
            pass_at_n=sum(any(r['correct'] for r in l) for l in ls) / max(1, len(ls)),
            mixed=sum(0 < sum(r['correct'] for r in l) < len(l) for l in ls) / max(1, len(ls)),
            stage1_accuracy=sum(s1) / max(1, len(s1)),
            changed=sum(a != b for a, b in zip(s1, flat)),
            incorrect_to_correct=sum(b and not a for a, b in zip(s1, flat)),
            correct_to_incorrect=sum(a and not b for a, b in zip(s1, flat)),
            truncated_to_incorrect=sum(truncated[k] for k in keys),  # truncated_policy's effect on stage 1
            stages=dict(sorted(stages.items())))
    return out


def label_split(split_dir, judge_model=None, judge_batch_size=8, judge_scope='unresolved',
                sympy_timeout=2.0, device='cpu', truncated_policy='incorrect', judge_max_tokens=3072):
    """Label {split_dir}/problems/*.pt -> {split_dir}/labels.json (atomic); returns the summary.
    judge_model: None (stage 1 only), a model name/path, or a (name, model, tokenizer) tuple."""
    if judge_scope not in ('unresolved', 'all'):
        raise ValueError(f"judge_scope={judge_scope!r} is unknown; fix: 'unresolved' or 'all'")
    problems, labels, stage1, truncated = [], {}, {}, {}
    for path in tqdm(problem_files(split_dir), desc=f'label {os.path.basename(split_dir.rstrip("/"))}', leave=False):
        d = load_problem(path, mmap=True, crc=True)  # mmap: the hidden states are never read (but a damaged file is
                                                     # named)
        p = dict(key=d['key'], dataset=d['dataset'], question=d['question'], gold=d['gold'],
                 texts=[c['text'] for c in d['candidates']])
        problems.append(p)
        args = [(c['text'], p['gold'], p['dataset'], sympy_timeout, c.get('finish'), d.get('meta'))
                for c in d['candidates']]
        labels[p['key']] = [grade(*a, truncated_policy=truncated_policy) for a in args]
        stage1[p['key']] = [r['correct'] for r in labels[p['key']]]
        truncated[p['key']] = sum(grade(*a, truncated_policy='grade')['correct'] for a, r in zip(args, labels[p['key']])
                                  if r['stage'].endswith('/truncated'))  # cached: what the policy turned to wrong
    if judge_model is not None:
        name, model, tok = judge_model if isinstance(judge_model, tuple) \
            else (judge_model, *load_judge(judge_model, device))
        cache_path = os.path.join(split_dir, 'judge_cache.json')
        cache = {}
        if os.path.exists(cache_path):
            try:
                with open(cache_path, encoding='utf-8') as f:
                    cache = json.load(f)
            except ValueError as e:  # a cache only: the decisions are made again
                print(f"{cache_path} does not load ({type(e).__name__}); judging its candidates again")
        todo = []  # (problem, candidate index, cache key, item)
        for p in problems:
            gold = normalize_gold(p['gold'], p['dataset'])
            for j, (t, r) in enumerate(zip(p['texts'], labels[p['key']])):
                if r['stage'] != 'pruned' and (judge_scope == 'all' or not r['correct']):  # pruned: partial, stays
                                                                                           # wrong
                    item = (p['question'], t, gold)
                    key = hashlib.sha256(json.dumps([JUDGE_PROMPT, name, judge_max_tokens, p['question'], t, gold])
                                         .encode()).hexdigest()
                    todo.append((p, j, key, item))
        missing = list({k: it for _, _, k, it in todo if k not in cache}.items())
        step = judge_batch_size * 8
        for i in tqdm(range(0, len(missing), step), desc='judge', leave=False):
            chunk = missing[i:i + step]
            prompts = judge_prompts(tok, [it for _, it in chunk], judge_max_tokens)
            decisions = judge_decide(model, tok, prompts, judge_batch_size)
            cache.update({k: bool(v) for (k, _), v in zip(chunk, decisions)})
            atomic_write_json(cache, cache_path)  # resumable: decisions survive an interrupted run
        for p, j, key, _ in todo:
            r = labels[p['key']][j]
            r['correct'], r['stage'] = cache[key], 'judge'
    summary = _summary(problems, labels, stage1, truncated)
    atomic_write_json(dict(version=1, labels=labels, summary=summary), os.path.join(split_dir, 'labels.json'))
    return summary


def print_summary(split, summary):
    print(f'{split:6s} {"dataset":14s} {"probs":>6s} {"cands":>7s} {"acc":>6s} {"pass@N":>6s} {"mixed":>6s} '
          f'{"changed":>7s} {"i->c":>5s} {"c->i":>5s} {"trunc":>5s}  stages')
    for name, s in summary.items():
        print(f'{split:6s} {name:14s} {s["n_problems"]:6d} {s["n_candidates"]:7d} {s["accuracy"]:6.3f} '
              f'{s["pass_at_n"]:6.3f} {s["mixed"]:6.3f} {s["changed"]:7d} {s["incorrect_to_correct"]:5d} '
              f'{s["correct_to_incorrect"]:5d} {s["truncated_to_incorrect"]:5d}  {s["stages"]}')

# -----------------------------------------------------------------------------
# the run


def run(cfg):
    """The CLI: label every split of out_dir that holds problems, the judge (judge_model) loaded once; writes each
    split's labels.json and label_config.json. Every knob and split is checked before any is labelled."""
    for key, ok in (('truncated_policy', ('incorrect', 'grade')), ('judge_scope', ('unresolved', 'all'))):
        if cfg[key] not in ok:
            raise ValueError(f"{key}={cfg[key]!r} is not one of {list(ok)}; fix: --{key}={ok[0]}")
    known = DEFAULTS['splits'] + sorted(  # extract.py's splits, and any other split dir out_dir holds
        d for d in (os.listdir(cfg['out_dir']) if os.path.isdir(cfg['out_dir']) else [])
        if d not in DEFAULTS['splits'] and os.path.isdir(os.path.join(cfg['out_dir'], d, 'problems')))
    unknown = [s for s in cfg['splits'] if s not in known]
    if unknown:  # a misspelt split was skipped, or called a missing extraction
        fix = [s if s in known else (difflib.get_close_matches(s, known, n=1, cutoff=0) or known)[0]
               for s in cfg['splits']]
        raise ValueError(f"splits={cfg['splits']!r}: unknown split {', '.join(map(repr, unknown))} (the known ones: "
                         f"{', '.join(known)}); fix: --splits=\"{list(dict.fromkeys(fix))}\"")
    found = [s for s in cfg['splits'] if os.path.isdir(os.path.join(cfg['out_dir'], s, 'problems'))]
    if not found:
        raise SystemExit(f"out_dir={cfg['out_dir']!r} has none of splits={cfg['splits']} with a problems/ folder; "
                         f"fix: run `python extract.py <config>` with this out_dir first")
    dirs = [os.path.join(cfg['out_dir'], s) for s in found]
    check_writable('out_dir', *dirs)  # labels.json, the judge's cache: before work
    for d in dirs:  # a split missing problems of its range (a killed extraction): before any is labelled
        problem_files(d)
    device = resolve_device(cfg['device'])
    judge = (cfg['judge_model'], *load_judge(cfg['judge_model'], device)) if cfg['judge_model'] else None
    for split, d in zip(found, dirs):
        summary = label_split(d, judge, cfg['judge_batch_size'], cfg['judge_scope'], cfg['sympy_timeout'], device,
                              cfg['truncated_policy'], cfg['judge_max_tokens'])
        atomic_write_json(cfg, os.path.join(d, 'label_config.json'))
        print_summary(split, summary)


if __name__ == '__main__':
    cli(run, configure(globals()), 'label.py')  # config files, then --key=value, override the knobs above
