"""Labelling throughput (candidates/s, CPU, one process) of label.py's stage 1. Run: python bench_label.py"""
import json
import os
import random
import re
import time

import label

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'shared', 'data')


def _rows(rel):
    with open(os.path.join(DATA, rel)) as f:
        return [json.loads(line) for line in f]


def _rate(cands):
    """candidates/s for grade() over (text, gold, dataset), from a cold equivalence cache."""
    label._equiv.cache_clear()
    label._sympy_cache.clear()
    label.is_equiv('1', 'x')  # start the sympy worker outside the timing
    label._equiv.cache_clear()
    t = time.perf_counter()
    n_correct = sum(label.grade(text, gold, ds)['correct'] for text, gold, ds in cands)
    return len(cands) / (time.perf_counter() - t), n_correct / len(cands)


def bench_labeling(n=4000, seed=0):
    rng = random.Random(seed)
    # GSM8K-style: gold solutions rewritten the way a model writes them, half with a wrong final number
    cands = []
    for r in _rows('gsm8k/test.jsonl') + _rows('gsm8k/train.jsonl')[:n]:
        body, gold = r['answer'].split('####')
        body = re.sub(r'<<[^<>]*>>', '', body).strip()
        ans = gold.strip() if rng.random() < 0.5 else str(int(gold.strip().replace(',', '')) + rng.randint(1, 9))
        ending = rng.choice([f'\nThe answer is {ans}.', f'\nSo the final answer is ${ans}$.', f'\n\\boxed{{{ans}}}', f' {ans}'])
        cands.append((body + ending, gold, 'gsm8k'))
    cands = cands[:n]
    rate, acc = _rate(cands)
    print(f'label gsm8k-style : {rate:8.0f} candidates/s  ({len(cands)} candidates, {acc:.0%} correct)')
    # MATH-style: each solution against its own answer and against another record's (sympy does real work)
    rows = _rows('math500/test.jsonl')
    cands = [(r['solution'], r['answer'], 'math500') for r in rows]
    cands += [(r['solution'], rows[(i + 7) % len(rows)]['answer'], 'math500') for i, r in enumerate(rows)]
    rate, acc = _rate(cands)
    print(f'label math500-style: {rate:8.0f} candidates/s  ({len(cands)} candidates, {acc:.0%} correct)')


if __name__ == '__main__':
    bench_labeling()
