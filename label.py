"""
Label every sampled candidate correct / incorrect against the gold answer.

Stage 1 (deterministic, no network): extract the final answer with a cascade of rules
(last \\boxed{} -> "the answer is" -> "Answer:" / "####" -> last number), normalise LaTeX, then
compare: exact numbers, then sympy (in a worker process with a hard time limit), then strings.
Stage 2 (optional): a local Hugging Face causal LM judges the candidates stage 1 did not mark correct;
decisions are cached in {split}/judge_cache.json.

Reads {out_dir}/{split}/problems/*.pt (see extract.py), writes {split}/labels.json atomically.
    python label.py config/gsm8k_1p7b.py
    python label.py config/math500_1p7b.py --judge_model=Qwen/Qwen3-1.7B --judge_batch_size=16
"""
import os
import re
import json
import random
import hashlib
import threading
import time
import functools
import multiprocessing as mp
from fractions import Fraction

from configurator import configure, knobs

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
out_dir = 'out/demo'  # the extraction run directory (holds train/ and eval/)
splits = ['train', 'eval']  # split directories under out_dir to label (missing ones are skipped)
judge_model = None  # None = stage 1 only; else a local HF causal LM: 'smollm2', a .gguf path, folder or hub id
judge_batch_size = 8
judge_scope = 'unresolved'  # 'unresolved': judge only candidates stage 1 did not mark correct; 'all'
sympy_timeout = 2.0  # seconds per sympy comparison; the worker process is killed past it
device = 'auto'  # judge device: 'auto' | 'cpu' | 'cuda' | 'cuda:0' ...
seed = 1337  # labelling is deterministic; recorded for the run config
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------
# answer extraction

STAGES = ('boxed', 'answer_is', 'answer_stmt', 'last_number', 'none')
_BOX = re.compile(r'\\(?:boxed|fbox)(?![A-Za-z])')
_ANSWER_IS = re.compile(r'the\s+(?:final\s+)?answer\s+is\s*:?', re.I)
_ANSWER_STMT = re.compile(r'(?:\b(?:final\s+)?answer\s*\**\s*[:：]|####)\s*\**', re.I)
_LAST_NUM = re.compile(r'(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?')


def _brace_group(s, i):
    """s[i] == '{': return (content, index after the matching '}') or None if unbalanced."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == '{' and s[j - 1:j] != '\\':
            depth += 1
        elif s[j] == '}' and s[j - 1:j] != '\\':
            depth -= 1
            if depth == 0:
                return s[i + 1:j], j + 1
    return None


def _boxes(text):
    """Contents of all well-formed \\boxed{...} / \\boxed 5 / \\fbox{...}, in order."""
    if '\\boxed' not in text and '\\fbox' not in text:
        return []
    close, stack = {}, []
    for m in re.finditer(r'(?<!\\)[{}]', text):  # pair all braces in one pass: linear even for '\\boxed{' * 1000
        if m.group() == '{':
            stack.append(m.start())
        elif stack:
            close[stack.pop()] = m.start()
    out = []
    for m in _BOX.finditer(text):
        i = m.end()
        while i < len(text) and text[i] == ' ':
            i += 1
        if i in close and text[i + 1:close[i]].strip():
            out.append(text[i + 1:close[i]].strip())
        elif i > m.end() and text[i:i + 1] != '{':  # "\\boxed 5": the token after the space
            tok = re.match(r'[^\s$]+', text[i:])
            if tok:
                out.append(tok.group(0))
    return out


def _clip(span):
    """The answer inside the text after 'the answer is' / 'Answer:': its math spans or one sentence."""
    span = span.lstrip(' \t\n*:')
    m = re.match(r'\$[^$\n]+\$(?:\s*(?:,|and|or)\s*\$[^$\n]+\$)*', span)  # "$69$, $84$"
    if m and not span.startswith('$$'):
        return ', '.join(x.strip() for x in re.findall(r'\$([^$\n]+)\$', m.group(0))) or None
    for open_, close in (('$$', '$$'), ('\\[', '\\]'), ('\\(', '\\)')):
        j = span.find(close, len(open_))
        if span.startswith(open_) and j > 0:
            return span[len(open_):j].strip() or None
    line = re.sub(r'<<[^<>]*>>', '', span.strip().split('\n')[0])  # GSM8K calculator annotations
    line = re.split(r'\.(?=\s|$)|\*\*|\s+(?:because|since|which|so)\s', line)[0]
    line = re.sub(r'^(?:therefore|thus|then|simply|just|equal to)\s+', '', line.split('=')[-1].strip(), flags=re.I)
    return line.strip() or None


def extract_answer(text):
    """-> (answer string or None, stage): the model's final answer and which rule found it."""
    if not text:
        return None, 'none'
    boxes = _boxes(text)
    if boxes:
        return boxes[-1], 'boxed'
    for pattern, stage in ((_ANSWER_IS, 'answer_is'), (_ANSWER_STMT, 'answer_stmt')):
        for m in reversed(list(pattern.finditer(text))):
            ans = _clip(text[m.end():])
            if ans:
                return ans, stage
    nums = _LAST_NUM.findall(text)
    if nums:
        return nums[-1], 'last_number'
    return None, 'none'


def normalize_gold(gold, dataset):
    """The gold answer as stored by extract.py -> one answer string (lists are joined with ', ')."""
    if isinstance(gold, (list, tuple)):  # olympiadbench final_answer list; multiple answers are ', '-joined
        return ', '.join(g.replace('$', '').strip() for g in gold)
    gold = str(gold).strip()
    if dataset == 'gsm8k':
        return gold.split('####')[-1].strip().replace(',', '')
    if dataset in ('aime', 'synth') and re.fullmatch(r'[+-]?\d+', gold):
        return str(int(gold))  # AIME "025" == 25
    return gold

# -----------------------------------------------------------------------------
# normalisation

_WORDS = {w: str(i) for i, w in enumerate(
    'zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen '
    'sixteen seventeen eighteen nineteen twenty'.split())}
_UNITS = set('m cm mm km g kg mg s h min hr sec l ml in ft yd mi lb oz mph kph'.split())
_DROP = re.compile(r'\\left(?![a-zA-Z])|\\right(?![a-zA-Z])|\\[!,;:> ]|\\q?quad|\\displaystyle|~|'
                   r'\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|°|\\degree|\$|\\\$')
_TEXT = re.compile(r'\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}')
_NUM = re.compile(r'[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d{1,3})?')


def _norm(s):
    """Canonical surface form of one answer: no $, spacing macros, \\text, units, degrees, x=."""
    s = str(s).strip()
    s = re.sub(r'^\\(?:boxed|fbox)\s*\{(.*)\}$', r'\1', s)  # a nested box left in an answer
    s = re.sub(r'\\begin\{[pbv]?matrix\}(.*?)\\end\{[pbv]?matrix\}',  # matrices -> nested lists
               lambda m: '[' + ','.join('[' + r.replace('&', ',') + ']' for r in m.group(1).split('\\\\')) + ']',
               s, flags=re.S)
    s = s.replace('\\dfrac', '\\frac').replace('\\tfrac', '\\frac').replace('{,}', ',').replace('\\%', '%')
    s = _DROP.sub('', s)
    for _ in range(3):  # \text{...} -> its content, spaced so units stay separate words
        s = _TEXT.sub(r' \1 ', s)
    s = re.sub(r'\\(?:le|leq|leqslant)(?![a-zA-Z])', '<=', s)
    s = re.sub(r'\\(?:ge|geq|geqslant)(?![a-zA-Z])', '>=', s)
    s = re.sub(r'\\(?:varnothing|emptyset)(?![a-zA-Z])', r'\\emptyset', s)
    s = re.sub(r'\\frac\s*(\d)\s*(\d)', r'\\frac{\1}{\2}', s)  # \frac12
    s = re.sub(r'\\frac\s*(\d)\s*\{', r'\\frac{\1}{', s)  # \frac3{4}
    s = re.sub(r'\\frac\s*(\{[^{}]*\})\s*([0-9a-zA-Z])', r'\\frac\1{\2}', s)  # \frac{270}7
    s = re.sub(r'\\sqrt\s*([0-9a-zA-Z])', r'\\sqrt{\1}', s)  # \sqrt3
    s = re.sub(r'\s+(?:and|or)\s+', ',', s)
    s = s.strip().rstrip('.,;:').strip()
    s = re.sub(r'^(?:[a-zA-Z](?:_\{?\w+\}?)?(?:\(\s*[a-z]\s*\))?|\\[a-zA-Z]+)\s*(?:=|\\in(?![a-zA-Z]))\s*(?=[^=]+$)', '', s)
    m = re.fullmatch(r'(.*?[\d}])\s+([a-zA-Z]+(?:(?:\.\s*|\s+)[a-zA-Z]+)*\.?\s*(?:\^\{?\d\}?)?(?:/[a-zA-Z]+)?)', s)
    if m and (len(m.group(2).split()[0]) > 2 or m.group(2).split()[0].rstrip('.').lower() in _UNITS):
        s = m.group(1)  # "5.4 cents", "864 inches^2", "\frac{270}{7} degrees"
    s = s.strip()
    while (t := _bracketed(s)) and t[:2] == ('(', ')') and len(t[2]) == 1:
        s = t[2][0]  # "(C)", "(023)", "(x+1)": one item in parentheses is just that item
    if re.fullmatch(r'-?\d{1,3}(,\d{3})+(\.\d+)?', s.replace(' ', '')):
        s = s.replace(',', '')  # thousands separators
    s = _WORDS.get(s.lower(), s)
    return re.sub(r'\s+(?![a-zA-Z])|(?<![a-zA-Z])\s+', '', s)  # spaces matter only between letters


def _num(s):
    """Plain number (int, decimal, a/b, \\frac{a}{b}, mixed number, a x 10^k) -> Fraction, else None."""
    neg = s.startswith('-')
    t = s[1:] if neg else s
    try:
        if _NUM.fullmatch(t):
            v = Fraction(t)
        elif m := re.fullmatch(r'(\d+)/(\d+)|\\frac\{(\d+)\}\{(\d+)\}', t):
            a, b = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            v = Fraction(int(a), int(b))
        elif m := re.fullmatch(r'(\d+)\\frac\{(\d+)\}\{(\d+)\}', t):  # mixed number 15\frac{39}{40}
            if int(m.group(2)) >= int(m.group(3)):
                return None
            v = int(m.group(1)) + Fraction(int(m.group(2)), int(m.group(3)))
        elif m := re.fullmatch(r'(\d+(?:\.\d*)?)(?:\\times|\\cdot|\*)10\^\{?([+-]?\d{1,3})\}?', t):
            v = Fraction(m.group(1)) * Fraction(10) ** int(m.group(2))
        else:
            return None
    except (ValueError, ZeroDivisionError):
        return None
    return -v if neg else v


def _num_equal(a, b):
    if a == b:
        return True
    if a.denominator == 1 and b.denominator == 1:
        return False  # integers compare exactly, however large
    return abs(a - b) <= Fraction(1, 10 ** 6) * max(abs(a), abs(b))


def _split_top(s):
    """Split on commas at bracket depth 0."""
    parts, depth, cur = [], 0, ''
    for ch in s:
        depth += ch in '([{'
        depth -= ch in ')]}'
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += ch
    return [p.strip() for p in parts + [cur]]


def _bracketed(s):
    """'(1,2]' -> ('(', ']', ['1', '2']) if one bracket pair wraps the whole string, else None."""
    if s.startswith('\\{') and s.endswith('\\}'):
        return '{', '}', _split_top(s[2:-2])
    if not s or s[0] not in '([' or s[-1] not in ')]':
        return None
    depth = 0
    for i, ch in enumerate(s):
        depth += ch in '([{'
        depth -= ch in ')]}'
        if depth == 0 and i < len(s) - 1:
            return None
    return s[0], s[-1], _split_top(s[1:-1])


def _answers(s):
    """Top-level answers of a list: '2, 1\\pm\\sqrt{3}' -> ['2', '1+\\sqrt{3}', '1-\\sqrt{3}']."""
    out = []
    for x in _split_top(s):
        m = x.count('\\pm') == 1 and re.fullmatch(r'([^()\[\]{}]*?)\\pm(.*)', x)
        out += [m.group(1) + '+' + m.group(2), m.group(1) + '-' + m.group(2)] if m else [x]
    return out


def _match_lists(xs, ys, ordered, deadline):
    if len(xs) != len(ys):
        return False
    if ordered:
        return all(_compare(x, y, deadline)[0] for x, y in zip(xs, ys))
    left = list(ys)
    for x in xs:  # greedy matching is exact here: equivalence is transitive
        j = next((j for j, y in enumerate(left) if _compare(x, y, deadline)[0]), None)
        if j is None:
            return False
        left.pop(j)
    return True


@functools.lru_cache(maxsize=1 << 18)
def _equiv(a, b, timeout=2.0):
    """(equal, method) for two raw answer strings, within about `timeout` seconds in all."""
    return _compare(a, b, time.monotonic() + timeout)


def _compare(a, b, deadline):
    """method: string / numeric / structure / sympy / timeout / none."""
    if max(len(a), len(b)) > 1000:  # no real answer is this long; keeps every regex below cheap
        return a.strip() == b.strip(), 'string'
    if time.monotonic() > deadline:  # long lists of items share one budget
        return False, 'timeout'
    a, b = _norm(a), _norm(b)
    if a == b:
        return True, 'string'
    if not a or not b:
        return False, 'none'
    if '\\cup' in a or '\\cup' in b:  # unions of intervals / sets: parts in any order
        return _match_lists(a.split('\\cup'), b.split('\\cup'), False, deadline), 'structure'
    xs, ys = _answers(a), _answers(b)
    if len(xs) > 1 or len(ys) > 1:  # several answers, in any order
        return _match_lists(xs, ys, False, deadline), 'structure'
    ta, tb = _bracketed(a), _bracketed(b)
    if ta and tb and (len(ta[2]) > 1 or len(tb[2]) > 1 or ta[0] != '(' or tb[0] != '('):
        # tuple / interval / set / matrix: same brackets, elements in order (sets in any order)
        xs, ys = (ta[2], tb[2]) if ta[0] != '{' else (_answers(','.join(ta[2])), _answers(','.join(tb[2])))
        return ta[:2] == tb[:2] and _match_lists(xs, ys, ta[0] != '{', deadline), 'structure'
    if (ta and len(ta[2]) > 1) or (tb and len(tb[2]) > 1):
        return False, 'structure'
    pa, pb = a.endswith('%'), b.endswith('%')
    na, nb = _num(a.rstrip('%')), _num(b.rstrip('%'))
    if na is not None and nb is not None:  # a percent also matches its fraction: 50% == 0.5
        ok = _num_equal(na, nb) or (pa != pb and _num_equal(na / (100 if pa else 1), nb / (100 if pb else 1)))
        return ok, 'numeric'
    if re.fullmatch(r'[A-Za-z ]{3,}', a) or re.fullmatch(r'[A-Za-z ]{3,}', b):
        return a.lower() == b.lower(), 'string'  # words: "Evelyn", "even" (sympy would read e*v*e*n)
    r = _sympy_call(a.rstrip('%'), b.rstrip('%'), deadline)
    if not r and re.sub(r'[{}]', '', a) == re.sub(r'[{}]', '', b):
        return True, 'string'  # last resort, for what sympy cannot read: "52_{8}" == "52_8"
    return (False, 'timeout') if r is None else (r, 'sympy')


def is_equiv(pred, gold, timeout=2.0):
    """True if two answer strings are mathematically the same answer."""
    if pred is None or gold is None:
        return False
    return _equiv(str(pred), str(gold), float(timeout))[0]


def answers_equal(a, b, timeout=2.0):
    """Symmetric, cached equivalence of two extracted answers (majority voting)."""
    if a is None or b is None:
        return a is None and b is None
    a, b = sorted((str(a), str(b)))
    return _equiv(a, b, float(timeout))[0]


def grade(text, gold, dataset, timeout=2.0):
    """-> dict(correct, answer, stage): stage is '<extraction rule>/<comparison method>'."""
    g = normalize_gold(gold, dataset)
    ans, stage = extract_answer(text)
    if ans is None:
        return dict(correct=False, answer=None, stage='none')
    start = time.monotonic()
    ok, method = _equiv(ans, g, float(timeout))
    if not ok and stage == 'boxed' and len(_split_top(_norm(g))) > 1:
        boxes = list(dict.fromkeys(_boxes(text)))  # several answers boxed one by one
        if len(boxes) > 1:  # what is left of the time budget
            ok, method = _equiv(', '.join(boxes), g, round(max(0.0, timeout - (time.monotonic() - start)), 1))
            ans = ', '.join(boxes) if ok else ans
    return dict(correct=bool(ok), answer=ans, stage=f'{stage}/{method}')

# -----------------------------------------------------------------------------
# sympy, in a worker process: parsing or simplifying can hang in C code (huge powers), and only
# killing a process is a time limit that always works. Normalised strings in, True/False out.

_FUNCS = {'sin', 'cos', 'tan', 'cot', 'sec', 'csc', 'arcsin', 'arccos', 'arctan', 'sinh', 'cosh', 'tanh',
          'log', 'ln', 'exp', 'sqrt', 'binomial', 'pi', 'oo'}
_GREEK = {'alpha', 'beta', 'gamma', 'delta', 'epsilon', 'theta', 'lambda', 'mu', 'phi', 'omega', 'rho',
          'sigma', 'tau', 'psi', 'xi', 'eta', 'zeta', 'nu', 'kappa', 'chi'}


def _tex_arg(s, i, depth):
    """One LaTeX argument at s[i] (brace group, command or single char) -> (python text, next index)."""
    while i < len(s) and s[i] == ' ':
        i += 1
    if i >= len(s):
        raise ValueError('missing argument')
    if s[i] == '{':
        g = _brace_group(s, i)
        if g is None:
            raise ValueError('unbalanced')
        return _tex_to_py(g[0], depth + 1), g[1]
    if s[i] == '\\':
        m = re.match(r'\\[a-zA-Z]+', s[i:])
        return _tex_to_py(m.group(0) if m else s[i:i + 2], depth + 1), i + (len(m.group(0)) if m else 2)
    return s[i], i + 1


def _tex_to_py(s, depth=0):
    """Small LaTeX -> python-expression converter for answer-sized math (\\frac, \\sqrt, ^, \\pi, ...)."""
    if depth > 20 or len(s) > 400:
        raise ValueError('too deep or long')
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == '\\':
            m = re.match(r'\\([a-zA-Z]+)', s[i:])
            if not m:
                raise ValueError('unsupported ' + s[i:i + 2])
            cmd, i = m.group(1), i + len(m.group(0))
            if cmd in ('frac', 'binom'):
                a, i = _tex_arg(s, i, depth)
                b, i = _tex_arg(s, i, depth)
                out.append(f'(({a})/({b}))' if cmd == 'frac' else f'binomial({a},{b})')
            elif cmd == 'sqrt':
                n = None
                if s[i:i + 1] == '[':
                    j = s.index(']', i)
                    n, i = _tex_to_py(s[i + 1:j], depth + 1), j + 1
                a, i = _tex_arg(s, i, depth)
                out.append(f'sqrt({a})' if n is None else f'(({a})**(1/({n})))')
            elif cmd in ('cdot', 'times'):
                out.append('*')
            elif cmd == 'div':
                out.append('/')
            elif cmd == 'infty':
                out.append('oo')
            elif cmd in _FUNCS or cmd in _GREEK:
                out.append(' ' + {'ln': 'log', 'arcsin': 'asin', 'arccos': 'acos', 'arctan': 'atan'}.get(cmd, cmd) + ' ')
            else:
                raise ValueError('unsupported \\' + cmd)
        elif c == '^':
            a, i = _tex_arg(s, i + 1, depth)
            out.append(f'**({a})')
        elif c == '_':
            a, i = _tex_arg(s, i + 1, depth)
            if not re.fullmatch(r'\w+', a) or not out or not re.search(r'[A-Za-z]\w*$', out[-1]):
                raise ValueError('subscript')
            out.append('_' + a)
        elif c == '{':
            a, i = _tex_arg(s, i, depth)
            out.append(f'({a})')
        elif c in '[]':
            out.append('(' if c == '[' else ')')
            i += 1
        elif c in '}!|&\'"#@;:<>?\\`':
            raise ValueError('unsupported ' + c)
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def _to_python(s):
    """Normalised answer -> checked python expression text for sympy's parse_expr (or ValueError)."""
    if not s.isascii():  # python folds unicode identifiers ('ｅｘｉｔ' is exit): ASCII only
        raise ValueError('non-ascii')
    py = _tex_to_py(s)
    py = re.sub(r'(\d)\s*(?=[A-Za-z(])', r'\1*', py)  # 2x, 3(x+1), 2sqrt(3)
    py = re.sub(r'\)\s*(?=[\w(])', ')*', py)  # (a+5)(b+2), (1/2)x
    py = re.sub(r'(\d)\*e\*?([+-]?\d)', r'\1e\2', py)  # undo 1.5e3 -> 1.5*e3
    py = re.sub(r'(?<![\d.])0+(?=\d)', '', py)  # "023": python rejects leading zeros
    if re.search(r'[^\w\s+\-*/().,]|\.(?!\d)|(?<!\d)\.|__', py):
        raise ValueError('characters')
    for name in re.findall(r'[A-Za-z_]\w*', py):  # whitelist: sympy parses with eval()
        if not (name in _FUNCS or name in _GREEK or name in ('asin', 'acos', 'atan')
                or re.fullmatch(r'[A-Za-z]{1,2}(_[A-Za-z0-9]+)?', name)):
            raise ValueError('name ' + name)
    return py


def _magnitude(e):
    """Upper bound on log10 of the digits an unevaluated expression needs; inf if astronomical."""
    if e.is_Rational:
        return max(int(e.p).bit_length(), int(e.q).bit_length()) * 0.302
    if e.is_Float:
        return max(0.0, (e._mpf_[2] + e._mpf_[3]) * 0.302)
    args = [_magnitude(x) for x in e.args]
    if e.is_Pow:
        return float('inf') if args[1] > 6 else max(args[0], 0.3) * 10 ** args[1]
    if type(e).__name__ in ('exp', 'binomial'):  # e^x and C(n, k) grow like powers too
        return float('inf') if args[0] > 6 else 10 ** args[0]
    return sum(args) + 1


def _sympy_equal(a, b):
    """Runs in the worker: are two normalised answers the same expression (or equation)? Unparseable -> False."""
    import sympy
    from sympy.parsing.sympy_parser import parse_expr, standard_transformations, implicit_multiplication_application
    T = standard_transformations + (implicit_multiplication_application,)
    names = {'__builtins__': {}}  # eval() sees sympy's constructors and these functions, nothing else
    names.update({n: getattr(sympy, n) for n in ('Integer', 'Float', 'Rational', 'Symbol', 'Function', 'Add', 'Mul', 'Pow',
                                           'sin', 'cos', 'tan', 'cot', 'sec', 'csc', 'asin', 'acos', 'atan',
                                           'sinh', 'cosh', 'tanh', 'log', 'exp', 'sqrt', 'binomial', 'pi', 'oo')})

    def parse(s):
        exprs = []
        sides = s.split('=')
        if len(sides) > 2:
            raise ValueError('chained =')
        for evaluate in (False, True):  # size check on the unevaluated tree before anything is computed
            e = [parse_expr(_to_python(x), local_dict={}, global_dict=dict(names), transformations=T,
                            evaluate=evaluate) for x in sides]
            if not evaluate and max(_magnitude(x) for x in e) > 1e4:
                raise ValueError('too large')
            exprs = e
        return exprs[0] - exprs[1] if len(exprs) == 2 else exprs[0], len(exprs) == 2

    try:
        (ea, eqa), (eb, eqb) = parse(a), parse(b)
    except Exception:
        return False
    if eqa != eqb or ea.has(sympy.nan, sympy.zoo) or eb.has(sympy.nan, sympy.zoo):
        return False
    if ea == eb:
        return True
    if ea.is_Rational and eb.is_Rational:
        return False
    exact = not (ea.has(sympy.Float) or eb.has(sympy.Float))  # decimals are approximations: 1e-6 relative
    syms = sorted(ea.free_symbols | eb.free_symbols, key=str)
    rng = random.Random(0)
    for _ in range(3 if syms else 1):  # equal at 3 random positive rational points (or as numbers)
        pt = {x: sympy.Rational(rng.randint(5, 60), rng.randint(5, 60)) for x in syms}
        ok = False
        for sign in ((1, -1) if eqa else (1,)):  # an equation may be written with sides swapped
            try:
                d = (ea - sign * eb).subs(pt)  # exact where it can be; evalf then gets the digits of d itself
                dv = 0.0 if d == 0 else abs(complex(d.evalf(50)))
                scale = max(1.0, abs(complex(ea.subs(pt).evalf(20))), abs(complex(eb.subs(pt).evalf(20))))
            except (TypeError, ValueError, OverflowError, ZeroDivisionError):
                continue
            ok = ok or dv <= (1e-30 if exact else 1e-6) * scale
        if not ok:
            return False
    return True


def _worker(conn):
    import warnings
    warnings.simplefilter('ignore')  # sympy deprecation noise on odd input
    while True:
        try:
            a, b = conn.recv()
        except EOFError:
            return
        try:
            r = _sympy_equal(a, b)
        except BaseException:  # RecursionError, MemoryError, ...: never kill the worker on bad input
            r = False
        conn.send(bool(r))


_pool = {'proc': None, 'conn': None}
_pool_lock = threading.Lock()
_sympy_cache = {}


def _sympy_call(a, b, deadline):
    """True/False from the worker, or None if it ran past the deadline (the worker is then killed)."""
    if (a, b) in _sympy_cache:
        return _sympy_cache[a, b]
    with _pool_lock:
        start = time.monotonic()  # starting a worker is not charged to the comparison
        if _pool['proc'] is None or not _pool['proc'].is_alive():
            import sympy.parsing.sympy_parser  # noqa: F401  imported before fork: a new worker is ready at once
            ctx = mp.get_context('fork' if 'fork' in mp.get_all_start_methods() else 'spawn')
            _pool['conn'], child = ctx.Pipe()
            _pool['proc'] = ctx.Process(target=_worker, args=(child,), daemon=True)
            _pool['proc'].start()
        timeout = deadline - start
        if timeout <= 0:
            return None
        try:
            _pool['conn'].send((a, b))
            if _pool['conn'].poll(timeout):
                r = _sympy_cache[a, b] = _pool['conn'].recv()
                return r
        except (EOFError, OSError):  # the worker died: treat like a timeout and start a new one next time
            pass
        _pool['proc'].kill()
        _pool['proc'].join()
        _pool['proc'] = None
        return None


# -----------------------------------------------------------------------------
# stage 2: LLM judge

JUDGE_PROMPT = ("Problem:\n{question}\n\nEnd of a student's solution:\n...{tail}\n\nReference answer: {gold}\n\n"
                "Is the student's final answer mathematically equivalent to the reference answer? "
                "Answer Yes or No.")


def load_judge(name, device='cpu'):
    """(model, tokenizer) for a local HF causal LM: 'smollm2' (embedded), a .gguf path, a folder or hub id."""
    from extract import load_generator
    return load_generator(name, device)


def judge_prompts(tok, items):
    """items: (question, candidate text, gold) -> prompt strings (chat template if the model has one)."""
    out = []
    for q, text, gold in items:
        msg = JUDGE_PROMPT.format(question=q.strip()[-1500:], tail=text.strip()[-600:], gold=gold)
        if getattr(tok, 'chat_template', None):
            msg = tok.apply_chat_template([{'role': 'user', 'content': msg}], tokenize=False, add_generation_prompt=True)
        else:
            msg += '\nAnswer:'
        out.append(msg)
    return out


def judge_decide(model, tok, prompts, batch_size=8):
    """One forward pass per batch; Yes if the next-token logit of Yes beats No. -> list[bool]"""
    import torch
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


def _summary(problems, labels, stage1):
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
            stages=dict(sorted(stages.items())))
    return out


def label_split(split_dir, judge_model=None, judge_batch_size=8, judge_scope='unresolved',
                sympy_timeout=2.0, device='cpu'):
    """Label {split_dir}/problems/*.pt -> {split_dir}/labels.json (atomic); returns the summary.
    judge_model: None (stage 1 only), a model name/path, or a (name, model, tokenizer) tuple."""
    import torch
    from tqdm import tqdm
    from model import atomic_write_json, problem_files
    if judge_scope not in ('unresolved', 'all'):
        raise ValueError(f"judge_scope={judge_scope!r} is unknown; fix: 'unresolved' or 'all'")
    problems, labels, stage1 = [], {}, {}
    for path in tqdm(problem_files(split_dir), desc=f'label {os.path.basename(split_dir.rstrip("/"))}', leave=False):
        d = torch.load(path, weights_only=True, mmap=True)  # mmap: the hidden states are never read
        p = dict(key=d['key'], dataset=d['dataset'], question=d['question'], gold=d['gold'],
                 texts=[c['text'] for c in d['candidates']])
        problems.append(p)
        labels[p['key']] = [grade(t, p['gold'], p['dataset'], sympy_timeout) for t in p['texts']]
        stage1[p['key']] = [r['correct'] for r in labels[p['key']]]
    if judge_model is not None:
        name, model, tok = judge_model if isinstance(judge_model, tuple) else (judge_model, *load_judge(judge_model, device))
        cache_path = os.path.join(split_dir, 'judge_cache.json')
        cache = {}
        if os.path.exists(cache_path):
            with open(cache_path) as f:
                cache = json.load(f)
        todo = []  # (problem, candidate index, cache key, item)
        for p in problems:
            gold = normalize_gold(p['gold'], p['dataset'])
            for j, (t, r) in enumerate(zip(p['texts'], labels[p['key']])):
                if judge_scope == 'all' or not r['correct']:
                    item = (p['question'], t, gold)
                    key = hashlib.sha256(json.dumps([JUDGE_PROMPT, name, p['question'], t.strip()[-600:], gold])
                                         .encode()).hexdigest()
                    todo.append((p, j, key, item))
        missing = list({k: it for _, _, k, it in todo if k not in cache}.items())
        step = judge_batch_size * 8
        for i in tqdm(range(0, len(missing), step), desc='judge', leave=False):
            chunk = missing[i:i + step]
            decisions = judge_decide(model, tok, judge_prompts(tok, [it for _, it in chunk]), judge_batch_size)
            cache.update({k: bool(v) for (k, _), v in zip(chunk, decisions)})
            atomic_write_json(cache, cache_path)  # resumable: decisions survive an interrupted run
        for p, j, key, _ in todo:
            r = labels[p['key']][j]
            r['correct'], r['stage'] = cache[key], 'judge'
    summary = _summary(problems, labels, stage1)
    atomic_write_json(dict(version=1, labels=labels, summary=summary), os.path.join(split_dir, 'labels.json'))
    return summary


def print_summary(split, summary):
    print(f'{split:6s} {"dataset":14s} {"probs":>6s} {"cands":>7s} {"acc":>6s} {"pass@N":>6s} {"mixed":>6s} '
          f'{"changed":>7s} {"i->c":>5s} {"c->i":>5s}  stages')
    for name, s in summary.items():
        print(f'{split:6s} {name:14s} {s["n_problems"]:6d} {s["n_candidates"]:7d} {s["accuracy"]:6.3f} '
              f'{s["pass_at_n"]:6.3f} {s["mixed"]:6.3f} {s["changed"]:7d} {s["incorrect_to_correct"]:5d} '
              f'{s["correct_to_incorrect"]:5d}  {s["stages"]}')

# -----------------------------------------------------------------------------


if __name__ == '__main__':
    config = configure(globals())  # config files, then --key=value, override the knobs above
    from model import atomic_write_json
    random.seed(seed)
    found = [s for s in splits if os.path.isdir(os.path.join(out_dir, s, 'problems'))]
    if not found:
        raise SystemExit(f"out_dir={out_dir!r} has none of splits={splits} with a problems/ folder; "
                         f"fix: run `python extract.py <config>` with this out_dir first")
    from model import resolve_device
    device = resolve_device(device)
    judge = (judge_model, *load_judge(judge_model, device)) if judge_model else None
    for split in found:
        split_dir = os.path.join(out_dir, split)
        summary = label_split(split_dir, judge, judge_batch_size, judge_scope, sympy_timeout, device)
        atomic_write_json(config, os.path.join(split_dir, 'label_config.json'))
        print_summary(split, summary)
