"""
The tasks: the problems extract.py samples solutions for, and the prompt each is asked with. Add a task here.

- synth: generated arithmetic, synth_level one-digit operations (+ or -); index i of a level is always the same
  question (synth_space). Questions are grouped by operand multiset and the space is cut in two parts: training
  ranges lie below synth_boundary, evaluation ranges above it (check_synth_ranges), so no evaluation question
  shares its numbers with a training question.
- words: generated GSM8K-style word-problem families (WORD_FAMILIES: shop, travel, bake, share): disjoint index
  ranges share no arithmetic (word_space), or, under split='numbers', the space is grouped by the numbers alone and cut
  in two parts as the synthetic levels are (check_word_ranges).
- gsm8k, math500, aime, olympiadbench: JSONL files under data_dir (DATASETS), else the Hugging Face hub.

load_problems(dataset, lo, hi, ...) gives the problems with indices lo..hi as dicts {index, id, dataset, question,
gold, meta}; group_key(problem) what splits must keep together; build_prompt(tok, problem, ...) the chat prompt (a
generated task shows a worked example of its own as the previous turn instead of a system prompt). No knobs:
extract.py's knobs choose the task.
"""
import functools
import itertools
import json
import os
import random
import re
import warnings

import numpy as np

MATH_SYSTEM = 'Please reason step by step, and put your final answer within \\boxed{}.'
DATASETS = {  # name: (file under data_dir, question field, gold field, HF fallback (path, config, split))
    'gsm8k': ('gsm8k/test.jsonl', 'question', 'answer', ('openai/gsm8k', 'main', 'test')),
    'math500': ('math500/test.jsonl', 'problem', 'answer', ('HuggingFaceH4/MATH-500', None, 'test')),
    'aime': ('aime/aimo-validation-aime.jsonl', ('question', 'problem'), 'answer',
             ('AI-MO/aimo-validation-aime', None, 'train')),
    'olympiadbench': ('olympiadbench/test.jsonl', 'question', 'final_answer',
                      ('Hothan/OlympiadBench', 'OE_TO_maths_en_COMP', 'train')),
}
PROMPT_TOKENS = {'gsm8k': 256, 'math500': 1024, 'aime': 512, 'olympiadbench': 1408}  # the longest prompt (MATH_SYSTEM,
# chat template) rounded up: 219 / 944 / 449 / 1332 tokens by SmolLM2's tokenizer (finer than Qwen3's). The paper
# cells' batch_size is sized with it (machine.fit_batch_size); extract.py's check counts the real prompts
GENERATED = ('synth', 'words')  # tasks generated here: a worked example as the previous turn instead of a system prompt

# -----------------------------------------------------------------------------
# synthetic arithmetic


SYNTH_LEVELS = (1, 2, 3, 4)  # level 4 enumerates 5.9M operand/operator tuples once (about a second)
HELD_OUT = 1 / 3  # share of a grouped space's groups (a synthetic level's operand multisets, a word family's numbers
                 # under word_split='numbers') whose questions form the evaluation part of its space
SYNTH_SPLIT = 'operand-multiset'  # the split rule, recorded in each extraction's config.json (old ones are refused)


@functools.lru_cache(maxsize=8)
def _synth_space(level, seed):
    """(rows, boundary): every distinct synthetic question of a level, as rows of (level+1 operands in 1..9, level
    operators, 0 = '+', 1 = '-'), each running result >= 0, and the index where the evaluation part starts.
    Questions are grouped by operand multiset (6 + 9 - 2 and 9 + 6 - 2, or 9 - 6 + 2, are one group: a verifier
    trained on one has seen the other's numbers, often its answer). The groups are shuffled by the seed and the
    last HELD_OUT of them form the evaluation part: indices 0..boundary-1 hold the training groups, boundary..
    the held-out ones, so a train range below the boundary and an eval range above it share no numbers. Within each
    part the questions run round-robin over its groups (one question of every group, then a second, ...), so any
    range of a part is spread over as many groups as it can be."""
    if level not in SYNTH_LEVELS:
        raise SystemExit(f"synth_level={level!r} is not supported; fix: one of {', '.join(map(str, SYNTH_LEVELS))}")
    grids = np.meshgrid(*[np.arange(1, 10)] * (level + 1), *[np.arange(2)] * level, indexing='ij')
    rows = np.stack([g.ravel() for g in grids], 1).astype(np.int8)  # [9^(L+1) * 2^L, 2L+1]
    acc, ok = rows[:, 0].astype(np.int32), np.ones(len(rows), bool)
    for k in range(level):
        acc = acc + np.where(rows[:, level + 1 + k] == 0, 1, -1) * rows[:, k + 1]
        ok &= acc >= 0
    rows = rows[ok]
    groups = {}
    for i, key in enumerate(map(bytes, np.sort(rows[:, :level + 1], axis=1))):
        groups.setdefault(key, []).append(i)
    order, boundary = _held_out_order(groups, random.Random(f'{seed}-{level}'))
    return rows[order], boundary


def _held_out_order(groups, rng):
    """(order, boundary) of a space whose items fall into groups (key -> [item indices]): the groups shuffled by rng
    (Python's shuffle: the same order on every platform and version), the last HELD_OUT of them the evaluation part
    (order[boundary:]); within each part the items run round-robin over its groups (one of every group, then a
    second, ...), so any range of a part is spread over as many groups as it can be."""
    keys = sorted(groups)
    rng.shuffle(keys)
    n_held = int(round(len(keys) * HELD_OUT))
    parts = []
    for part in (keys[n_held:], keys[:n_held]):
        members = [groups[k] for k in part]
        for m in members:
            rng.shuffle(m)
        parts.append([m[r] for r in range(max(map(len, members))) for m in members if r < len(m)])
    return parts[0] + parts[1], len(parts[0])


def synth_space(level, seed):
    """Every distinct synthetic question of a level in its fixed order (_synth_space): rows of (operands,
    operators). Sizes: level 1: 126, 2: 1,899, 3: 30,036, 4: 487,674 questions; index i is row i."""
    return _synth_space(level, seed)[0]


def synth_boundary(level, seed):
    """The first index of a level's evaluation part: train ranges lie below it, eval ranges at or above it."""
    return _synth_space(level, seed)[1]


def check_synth_ranges(level, seed, train_range, eval_range):
    """SystemExit naming the fix unless train_range lies in the level's training part and eval_range in its
    held-out part (None: that split is not extracted)."""
    _check_parts(f'synthetic level {level}: its questions are split by operand multiset', synth_boundary(level, seed),
                 len(synth_space(level, seed)), train_range, eval_range)


def _check_parts(where, b, n, train_range, eval_range):
    """SystemExit naming the fix unless train_range lies in 0..b-1 (a held-out space's training part) and eval_range in
    b..n-1 (None: that split is not extracted); where: the space and its rule, for the message."""
    for key, r, (lo, hi) in (('train_range', train_range, (0, b - 1)), ('eval_range', eval_range, (b, n - 1))):
        if r is not None and not lo <= r[0] <= r[1] <= hi:
            raise SystemExit(f"{key}={tuple(r)} on {where} (no evaluation question shares its numbers with a training "
                             f"question), indices 0..{b - 1} training, {b}..{n - 1} evaluation; fix: {key} within "
                             f"({lo}, {hi})")


def group_key(problem):
    """What a model could recall across problems: synthetic questions with the same operand multiset, a word
    family's questions with the same numbers and answer (the numbers alone under word_split='numbers'), are one
    group (splits never divide a group); a benchmark problem is its own. A string."""
    if problem['dataset'] == 'synth':
        return 'synth:' + number_key(problem)
    if problem['dataset'] == 'words':  # under word_split='numbers' the numbers alone (word_space)
        nums = number_key(problem) + ('' if problem['meta'].get('split') == 'numbers' else f"={problem['gold']}")
        return f"words-{problem['meta']['family']}:{nums}"
    return f"{problem['dataset']}:{problem['id']}"


BENCHMARK_KINDS = ('subject', 'level')  # a benchmark row's own categories (MATH-500 has both), kept in meta


def problem_kinds(problem):
    """{kind: part} of the parts evaluate.py breaks the table down by: a synthetic question's operator pattern
    ('a+b-c', the operands as letters) and whether its operand multiset repeats a number; a word problem's family; a
    benchmark problem's own categories (BENCHMARK_KINDS: MATH-500's subject and level), {} where it has none
    (GSM8K, AIME, OlympiadBench here: each problem is its own group, group_key)."""
    if problem['dataset'] == 'synth':
        nums = re.findall(r'\d+', problem['question'])
        ops = re.findall(r'\d\s*([+-])\s*(?=\d)', problem['question'])
        pattern = ''.join(chr(ord('a') + i) + (ops[i] if i < len(ops) else '') for i in range(len(nums)))
        return {'operator pattern': pattern,
                'operands': 'a repeated number' if len(set(nums)) < len(nums) else 'distinct numbers'}
    if problem['dataset'] == 'words':
        return {'family': problem['meta']['family']}
    return {k: str(problem['meta'][k]) for k in BENCHMARK_KINDS if k in problem.get('meta', {})}


def number_key(problem):
    """The question's numbers alone, as a sorted multiset ('4 6 9 12'): what a model could recall from a training
    question that uses them in another arrangement (curve.py reports the evaluation questions sharing it apart). A
    question without a digit (23 in GSM8K test: "three times", "ten packets") is keyed by its own text, lower case,
    whitespace collapsed: its own group, never one empty key shared by all such questions."""
    nums = re.findall(r'\d+', problem['question'])
    return ' '.join(sorted(nums, key=int)) if nums else ' '.join(problem['question'].lower().split())


def seen_groups(problems, groups):
    """[(problem, its group, 'train' or 'val')] of the problems that share a group (group_key) with a problem a verifier
    trained or validated on: groups = {'train': [keys], 'val': [keys]} as train.py stores them in ckpt.pt. A word
    family's key is its numbers and answer under word_split='arithmetic', its numbers alone under 'numbers': where
    either side is keyed on the numbers alone (a checkpoint of the 'numbers' split, a problem of it, or a question with
    no gold: sample.py's own), the two are compared on the numbers, the stricter key, whatever split each came from."""
    bare = lambda k: k.rsplit('=', 1)[0] if k.startswith('words-') else k  # noqa: E731  (a words key less its =answer)
    seen = {k: side for side in ('val', 'train') for k in groups.get(side, [])}
    numbers = {bare(k): side for k, side in seen.items()}  # every stored key on its numbers
    out = []
    for p in problems:
        k = group_key(p)
        if k in seen:
            out.append((p, k, seen[k]))
        elif bare(k) in seen:  # a checkpoint keyed on the numbers alone: any answer
            out.append((p, bare(k), seen[bare(k)]))
        elif (bare(k) == k or p.get('gold') is None) and bare(k) in numbers:  # a problem keyed on its numbers alone
            out.append((p, bare(k), numbers[bare(k)]))
    return out


def check_unseen(problems, groups, where, fix='', warned=set()):
    """ValueError naming the fix when a problem to score shares its group with a problem the verifier at `where` trained
    or validated on (seen_groups); fix: a way out the calling stage adds. groups None (a checkpoint saved before they
    were stored) is warned about once per checkpoint and not checked: its old tables still reproduce."""
    if groups is None:
        if where not in warned:
            warned.add(where)
            warnings.warn(f"{where} stores no training groups (saved before checkpoints did), so the problems it "
                          "scores are not checked against its training problems; fix: retrain it (python train.py "
                          "<config>)")
        return
    hits = seen_groups(problems, groups)
    if hits:
        (p, k, side), n = hits[0], len(hits)
        raise ValueError(f"{n} of the {len(problems)} problems to score share a group with {where}'s {side} problems, "
                         f"e.g. {p['id']} ({p['question'][:60]!r}): group {k!r}; fix: score problems it never trained "
                         "on (the eval split of its own config, or a range outside its train_range), or a verifier "
                         f"trained without them{fix}")


def synth_problem(index, level, seed):
    """Synthetic arithmetic: level+1 one-digit operands, each joined by + or -, every running result >= 0.
    Problem `index` is entry `index` of synth_space(level, seed): distinct indices are distinct questions."""
    space = synth_space(level, seed)
    if not 0 <= index < len(space):
        raise SystemExit(f"synthetic index {index} is outside level {level}'s {len(space)} distinct questions; "
                         f"fix: keep train_range / eval_range within 0..{len(space) - 1} (or raise synth_level)")
    row = space[index].tolist()
    nums, ops = row[:level + 1], ['+' if o == 0 else '-' for o in row[level + 1:]]
    acc = nums[0]
    for op, n in zip(ops, nums[1:]):
        acc = acc + n if op == '+' else acc - n
    expr = ' '.join([str(nums[0])] + [f'{o} {n}' for o, n in zip(ops, nums[1:])])
    return {'index': index, 'id': f'synth-{level}-{index}', 'dataset': 'synth', 'question': f'Compute {expr}.',
            'gold': str(acc), 'meta': {'level': level}}


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


def check_disjoint(train, evaluation):
    """SystemExit naming the fix when an evaluation problem shares its group (group_key) with a training problem."""
    seen = {group_key(p): p for p in train}
    shared = [(p, seen[group_key(p)]) for p in evaluation if group_key(p) in seen]
    if shared:
        (e, t), n = shared[0], len(shared)
        raise SystemExit(f"{n} evaluation problem(s) share numbers with a training problem, e.g. eval {e['id']} "
                         f"({e['question'][:60]!r}) and train {t['id']} ({t['question'][:60]!r}): group "
                         f"{group_key(e)!r}; fix: train_range and eval_range from parts of the task that share no "
                         "group (tasks.group_key)")


# -----------------------------------------------------------------------------
# word families

# GSM8K-style word-problem families (transfer experiments): each a template with its own operations and number of
# steps, names and objects drawn per question. A family's questions are enumerated once, one per arithmetic (the
# numbers and operations of its worked solution: word_arithmetic), and shuffled by the seed, as synth_space, so
# disjoint index ranges never share their arithmetic (not only their text). Each entry: (parameter ranges, a valid(p)
# filter, the question, the worked solution lines -> answer). The worked example shown before a question is the family's
# own template at EXAMPLE parameters, whose arithmetic is never in its space (word_space leaves it out).
_NAMES = [('Ava', 'she'), ('Ben', 'he'), ('Chloe', 'she'), ('Dan', 'he'), ('Emma', 'she'), ('Finn', 'he'),
          ('Grace', 'she'), ('Hugo', 'he')]


def _shop(p, name, pr, items):
    a, b, c, d = p
    (i1, i2) = items
    q = (f'{name} buys {a} {i1} at {b} dollars each and {c} {i2} at {d} dollars each. '
         f'How many dollars does {pr} spend in all?')
    return q, [f'The {i1} cost {a} * {b} = {a * b} dollars.', f'The {i2} cost {c} * {d} = {c * d} dollars.',
               f'In all {pr} spends {a * b} + {c * d} = {a * b + c * d} dollars.'], a * b + c * d


def _travel(p, name, pr, items):
    a, b, c = p
    (vehicle,) = items
    q = (f'{name} rides a {vehicle} {a} km each day for {b} days and then {c} km more. '
         f'How many km does {pr} ride in all?')
    return q, [f'The {b} days are {a} * {b} = {a * b} km.', f'In all {a * b} + {c} = {a * b + c} km.'], a * b + c


def _bake(p, name, pr, items):
    a, b, c = p
    (thing,) = items
    q = (f'{name} bakes {a} trays with {b} {thing} on each tray and packs them in boxes of {c}. '
         f'How many boxes does {pr} fill?')
    return q, [f'There are {a} * {b} = {a * b} {thing}.', f'They fill {a * b} / {c} = {a * b // c} boxes.'], a * b // c


def _share(p, name, pr, items):
    a, b, c = p
    (thing,) = items
    q = (f'{name} has {a} {thing}. {pr.capitalize()} gives away {b} and then finds {c} more. '
         f'How many {thing} does {name} have now?')
    return q, [f'After giving away {pr} has {a} - {b} = {a - b} {thing}.',
               f'After finding more {pr} has {a - b} + {c} = {a - b + c} {thing}.'], a - b + c


WORD_FAMILIES = {  # name: (make, parameter ranges, valid(params), object choices, the worked example's parameters)
    'shop': (_shop, [range(2, 10), range(2, 13), range(2, 10), range(2, 13)], lambda p: p[0] != p[2],
             [('pens', 'notebooks'), ('apples', 'pears'), ('cups', 'plates'), ('stamps', 'cards')], (7, 12, 6, 11)),
    'travel': (_travel, [range(2, 16), range(2, 10), range(1, 16)], lambda p: True,
               [('bike',), ('scooter',), ('horse',)], (12, 3, 14)),
    'bake': (_bake, [range(2, 43), range(2, 13), range(2, 13)], lambda p: p[0] * p[1] % p[2] == 0 and p[2] not in p[:2],
             [('muffins',), ('cookies',), ('rolls',)], (8, 6, 12)),
    'share': (_share, [range(6, 31), range(1, 10), range(1, 10)], lambda p: p[1] < p[0],
              [('stickers',), ('marbles',), ('shells',)], (52, 17, 13)),
}


def word_arithmetic(family, params):
    """What a family question computes: the operations of its worked solution with their operands, those of + and *
    in order (3 * 4 is 4 * 3), sorted. Questions with the same arithmetic differ only in names, objects or the
    order of their parts: a verifier trained on one has seen the other's numbers."""
    make, _, _, items, _ = WORD_FAMILIES[family]
    ops = []
    for x, op, y in re.findall(r'(\d+) ([-+*/]) (\d+) =', ' '.join(make(params, *_NAMES[0], items[0])[1])):
        x, y = int(x), int(y)
        ops.append((*sorted((x, y)), op) if op in '+*' else (x, y, op))
    return tuple(sorted(ops))


WORD_SPLITS = ('arithmetic', 'numbers')  # what a word family's disjoint index ranges keep apart (word_space)


@functools.lru_cache(maxsize=8)
def _word_space(family, seed, split):
    """(entries, boundary) of word_space: boundary None where any disjoint ranges will do ('arithmetic')."""
    if family not in WORD_FAMILIES:
        raise SystemExit(f"word_family={family!r} is unknown; fix: one of {', '.join(WORD_FAMILIES)}")
    if split not in WORD_SPLITS:
        raise SystemExit(f"word_split={split!r} is unknown; fix: one of {', '.join(WORD_SPLITS)}")
    make, ranges, valid, items, example = WORD_FAMILIES[family]
    seen, params = {word_arithmetic(family, example)}, []
    for p in itertools.product(*ranges):
        a = word_arithmetic(family, p) if valid(p) else None
        if a is not None and a not in seen:
            seen.add(a)
            params.append(p)
    rng = random.Random(f'{seed}-{family}')
    rng.shuffle(params)
    entries = [(p, rng.randrange(len(_NAMES)), rng.randrange(len(items))) for p in params]
    if split == 'arithmetic':
        return entries, None
    groups = {}  # the question's numbers alone: 4 pens at 12 and 6 at 9 is one group with 4 apples at 9 and 6 at 12
    for i, (p, name, item) in enumerate(entries):
        groups.setdefault(number_key({'question': make(p, *_NAMES[name], items[item])[0]}), []).append(i)
    order, boundary = _held_out_order(groups, random.Random(f'{seed}-{family}-{split}'))
    return [entries[i] for i in order], boundary


def word_space(family, seed, split='arithmetic'):
    """A word family's questions as (params, name index, object index): one per arithmetic (the first parameters
    in product order), the worked example's left out, in one fixed shuffled order with a name and object drawn
    per question (Python's Random: the same on every platform). Index i is row i. split='arithmetic': disjoint
    index ranges never share their arithmetic, but may share their numbers in another arrangement (4 pens at 12
    and 6 at 9 = 102 against 4 apples at 9 and 6 at 12 = 108). split='numbers': the same questions grouped by their
    numbers alone and held out as the synthetic levels are (_held_out_order): a train range below
    word_boundary and an eval range at or above it share no numbers."""
    return _word_space(family, seed, split)[0]


def word_boundary(family, seed, split):
    """The first index of a word family's evaluation part under split='numbers'; None under 'arithmetic'."""
    return _word_space(family, seed, split)[1]


def check_word_ranges(family, seed, split, train_range, eval_range):
    """SystemExit naming the fix unless, under split='numbers', train_range lies below the family's boundary and
    eval_range at or above it (None: that split is not extracted). 'arithmetic' checks nothing here."""
    b = word_boundary(family, seed, split)
    if b is not None:
        _check_parts(f'word family {family!r} with word_split={split!r}: its questions are grouped by their numbers', b,
                     len(word_space(family, seed, split)), train_range, eval_range)


def word_solution(family, params, name=0, item=0):
    """(question, worked solution text, answer) of one family question."""
    make, _, _, items, _ = WORD_FAMILIES[family]
    q, lines, ans = make(params, *_NAMES[name], items[item])
    return q, '\n'.join(lines + [f'The answer is {ans}.']), ans


def word_problem(index, family, seed, split='arithmetic'):
    """Problem `index` of a word family: entry `index` of word_space(family, seed, split), GSM8K-style (the gold
    solution ends in '#### answer' in meta). Under split='numbers' the id and meta say so (index i is another
    question there) and group_key keeps the numbers alone together."""
    space = word_space(family, seed, split)
    if not 0 <= index < len(space):
        raise SystemExit(f"word index {index} is outside family {family!r}'s {len(space)} distinct questions; "
                         f"fix: keep train_range / eval_range within 0..{len(space) - 1}")
    params, name, item = space[index]
    q, sol, ans = word_solution(family, params, name, item)
    meta = {'family': family, 'solution': f'{sol}\n#### {ans}'} | ({'split': split} if split != 'arithmetic' else {})
    return {'index': index, 'id': f'words-{family}-{index}' if split == 'arithmetic'
            else f'words-{family}-{split}-{index}', 'dataset': 'words', 'question': q, 'gold': str(ans), 'meta': meta}

# -----------------------------------------------------------------------------
# benchmark datasets (and every task's loader)


def _read_jsonl(path, key, value):
    if not os.path.isfile(path):
        raise SystemExit(f"{key}={value!r}: file {path} not found; fix: set --data_dir or --data_path to the "
                         "folder/file holding the dataset JSONL, or leave both unset to read it from the Hugging Face "
                         "hub (pip install -r requirements-hub.txt; needs network)")
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_problems(dataset, lo, hi, data_dir=None, data_path=None, synth_level=2, seed=1337, exclude_ids=(),
                  word_family='shop', word_split='arithmetic'):
    """Problems with dataset indices lo..hi (inclusive, as in the paper's split table; a file's hi None: its last), less
    the rows whose id is in exclude_ids (their indices are skipped, the others keep their file index). A row with no id
    of its own (GSM8K) is known by its line; in a data_path file other than the dataset's own (GSM8K's train.jsonl
    beside test.jsonl) by '<file name>-<line>', so that its line 600 and test problem 600 are two groups (group_key)."""
    if dataset == 'synth':
        return [synth_problem(i, synth_level, seed) for i in range(lo, hi + 1)]
    if dataset == 'words':
        return [word_problem(i, word_family, seed, word_split) for i in range(lo, hi + 1)]
    if dataset not in DATASETS:
        raise SystemExit(f"dataset={dataset!r} is unknown; fix: one of {', '.join(['synth', 'words', *DATASETS])}")
    rel, qkeys, gkey, hf = DATASETS[dataset]
    path = data_path or (os.path.join(data_dir, rel) if data_dir else None)
    if path is None:
        try:
            import datasets
        except ImportError:
            raise SystemExit(f"dataset={dataset!r} with no data_dir/data_path reads the Hugging Face hub "
                             f"and needs `pip install -r requirements-hub.txt` and network; fix: that, or pass "
                             f"--data_dir=<folder with {rel}>")
        rows = [dict(r) for r in datasets.load_dataset(hf[0], hf[1], split=hf[2])]
    else:
        rows = _read_jsonl(path, 'data_path' if data_path else 'data_dir', data_path or data_dir)
    hi = len(rows) - 1 if hi is None else hi  # None: to the last row
    if hi >= len(rows) or lo < 0 or lo > hi:
        raise SystemExit(f"range [{lo}, {hi}] does not fit {dataset} with {len(rows)} problems; fix: indices in [0, "
                         f"{len(rows) - 1}]")
    qkeys = (qkeys,) if isinstance(qkeys, str) else qkeys
    stem = os.path.basename(path or rel).removesuffix('.jsonl')
    prefix = '' if stem == os.path.basename(rel).removesuffix('.jsonl') else f'{stem}-'  # another file: its name first
    out = []
    for i in range(lo, hi + 1):
        r = rows[i]
        rid = str(r.get('id', r.get('unique_id', f'{prefix}{i}')))
        if rid in exclude_ids:
            continue
        q = next((r[k] for k in qkeys if k in r), None)
        if q is None or gkey not in r:
            raise SystemExit(f"{dataset} row {i} lacks field {qkeys[0] if q is None else gkey!r} (has {sorted(r)}); "
                             f"fix: point data_path at a file with the fields listed in the README")
        if not str(q).strip():
            raise SystemExit(f"{dataset} row {i} has an empty question; fix: remove it or choose another range")
        gold = r[gkey]
        if dataset == 'gsm8k':
            gold = gold.split('####')[-1].strip()
        meta = {k: r[k] for k in ('answer_type', 'unit', 'is_multiple_answer', 'error', 'subject', 'level') if k in r}
        if dataset == 'olympiadbench' and isinstance(gold, str):
            gold = [gold]
        out.append({'index': i, 'id': rid, 'dataset': dataset, 'question': str(q),
                    'gold': gold if isinstance(gold, list) else str(gold), 'meta': meta})
    return out


def new_problem(question, dataset, index=0, id=None, gold=None, synth_level=2, word_family='shop',
                word_split='arithmetic'):
    """A question from outside the data (sample.py), as a problem of `dataset`: asked in its prompt style
    (build_prompt: a generated task's worked example of level synth_level or family word_family, a benchmark's
    system prompt) and graded as its answers are (gold None: no gold known); grouped (group_key) by word_split's
    rule."""
    if dataset not in GENERATED + tuple(DATASETS):
        raise SystemExit(f"dataset={dataset!r} is unknown; fix: one of {', '.join(GENERATED + tuple(DATASETS))}")
    if not str(question).strip():
        raise SystemExit(f"question {index} ({id!r}) is empty; fix: a question with text")
    if dataset == 'synth' and synth_level not in SYNTH_LEVELS:
        raise SystemExit(f"synth_level={synth_level!r} is not supported; fix: one of "
                         f"{', '.join(map(str, SYNTH_LEVELS))}")
    if dataset == 'words' and word_family not in WORD_FAMILIES:
        raise SystemExit(f"word_family={word_family!r} is unknown; fix: one of {', '.join(WORD_FAMILIES)}")
    meta = {'level': synth_level} if dataset == 'synth' else {'family': word_family} if dataset == 'words' else {}
    if dataset == 'words' and word_split != 'arithmetic':
        meta['split'] = word_split
    return {'index': index, 'id': str(index if id is None else id), 'dataset': dataset, 'question': str(question),
            'gold': None if gold is None else gold if isinstance(gold, list) else str(gold), 'meta': meta}


def task_pattern(dataset, synth_level=2, word_family='shop'):
    """(regex, an example) of the questions a generated task asks: synth, its level's 'Compute a + b - c.'; words, its
    family's template with any names, objects and numbers. (None, None) for a benchmark: any question is one of its."""
    if dataset == 'synth':
        return re.compile(r'Compute \d+' + r' [-+] \d+' * synth_level + r'\.'), synth_example(synth_level)[0]
    if dataset != 'words':
        return None, None
    make, ranges, _, items, example = WORD_FAMILIES[word_family]
    nums = [1001 + i for i in range(len(ranges))]
    pat = re.escape(make(nums, 'Qname', 'qpron', tuple(f'qitem{i}' for i in range(len(items[0]))))[0])
    for n in nums:
        pat = pat.replace(str(n), r'\d+')
    pat = pat.replace('Qname', '[A-Z][a-z]+').replace('Qpron', '(?:He|She)').replace('qpron', '(?:he|she)')
    for i in range(len(items[0])):
        pat = pat.replace(f'qitem{i}', '[a-z]+')
    return re.compile(pat), word_solution(word_family, example)[0]


# -----------------------------------------------------------------------------
# candidates sampled elsewhere (extract.py's mode='reencode' gives them their states)

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

# -----------------------------------------------------------------------------
# the prompt


def build_prompt(tok, problem, system_prompt, enable_thinking, warn=[True]):
    """Chat-templated prompt text; a plain prompt (with a one-time warning) for tokenizers without a template."""
    msgs = [{'role': 'system', 'content': system_prompt}] if system_prompt else []
    if problem['dataset'] in GENERATED:
        fam = problem['meta'].get('family')
        ex_q, ex_a = synth_example(problem['meta']['level']) if fam is None \
            else word_solution(fam, WORD_FAMILIES[fam][4])[:2]
        msgs += [{'role': 'user', 'content': ex_q}, {'role': 'assistant', 'content': ex_a}]
    msgs.append({'role': 'user', 'content': problem['question']})
    if getattr(tok, 'chat_template', None):
        return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True,
                                       enable_thinking=enable_thinking)
    if warn[0]:
        warnings.warn('the tokenizer has no chat template: using a plain "Question:/Answer:" prompt; '
                      'fix: pass an instruct model, or accept the plain prompt')
        warn[0] = False
    turns = [m['content'] if m['role'] == 'system' else
             ('Question: ' if m['role'] == 'user' else 'Answer: ') + m['content'] for m in msgs]
    return '\n\n'.join(turns) + '\n\nAnswer:'


def batch_prompts(tok, batch, cfg):
    """The problems' prompts (tasks.build_prompt): a generated task shows its worked example, a benchmark question
    cfg['system_prompt']; cfg['enable_thinking'] for the chat template."""
    return [build_prompt(tok, p, cfg['system_prompt'] if p['dataset'] not in GENERATED else None,
                         cfg['enable_thinking'])
            for p in batch]
