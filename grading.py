"""
The grader: where a candidate's final answer is, and whether it equals the gold answer. The one place to change
grading; label.py (stage 1), sample.py, the majority vote (bestofn.py, evaluate.py, curve.py, steer.py,
transfer.py) and bench.py all use it.

Find the final answer span with this project's rules (boxes, answer statements, GSM8K '####', the final line's
marked number, the last math span or number), then compare it with the gold answer (a percent by the rule in
_percent): plain numbers exactly here (fast path), everything else with
Hugging Face's Math-Verify (`parse` + `verify`, pinned in requirements.txt) in a worker process that is killed
past the timeout. Results are cached per (answer, gold) pair, so a pool whose 64 candidates repeat a few answers
costs a few comparisons.
"""
import re
import threading
import time
import functools
import multiprocessing as mp
from fractions import Fraction

# -----------------------------------------------------------------------------
# answer extraction: where the final answer is (Math-Verify then reads the math inside it)

STAGES = ('boxed', 'answer_is', 'answer_stmt', 'final_line', 'last_math', 'last_number', 'none')
_BOX = re.compile(r'\\(?:boxed|fbox)(?![A-Za-z])')
_FINAL_IS = re.compile(r'final\s+answer\s+is\s*:?(?=[^\n]{0,300}?I\s+hope)', re.I)  # Minerva: "...is $x$. I hope it is
                                                                                    # correct"
_ANSWER_IS = re.compile(r'the\s+(?:final\s+)?answer\s+is\s*:?', re.I)
_ANSWER_STMT = re.compile(r'(?:\b(?:final\s+)?answer\s*\**\s*[:：]|####)\s*\**', re.I)
# 1,234 | 1 234 | 2,74 (decimal comma) | .4 | 3/4
_LAST_NUM = re.compile(r'(?<![\w.])-?(?:[1-9]\d{0,2}(?:,\d{3})+(?!\d)|[1-9]\d{0,2}(?: '
                       r'\d{3})+(?![\d.])|(?:0|\d+(?=,\d{1,2}(?![\d,])))(?:,\d+)?|\d*)(?:(?<=\d)/\d+|\.\d+)?(?<=\d)')
# an answer-like number: $18, \$1,200, -3.5, 3/4, 25%, 25\%, 25 percent (atomic: "1,234" never backs off to "1")
_ANS_NUM = r'(?>-?(?:\\?\$\s*)?(?:[1-9]\d{0,2}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?(?:\s*(?:\\?%|percent\b))?)'
# words that carry a number on into more of the answer: "3 and 4", "5 times 3", "10 choose 3", "25% of 80"
_GOES_ON = r'(?!(?:and|or|to|plus|minus|times|divided|multiplied|over|out|of|by|equals|choose|mod|pi)\b)[A-Za-z]{2}'
# the final line's marked number: bold ("**$18**", "**18 dollars.**"), or the right side of an "=" that ends a
# computation and runs on in words ("9 * 2 = $18 every day": not "= 9 * 2", "= 2^3", "= 2 n + 1", "x = -3, y")
_MARK = re.compile(r'(?<![\w*])\*\*\s*(' + _ANS_NUM + r')(?:\s+[A-Za-z]+){0,3}\s*\.?\s*\*\*|(?<![<>!=])=(?!=)\s*'
                   r'(?:\*\*)?\s*(' + _ANS_NUM + r')(?=(?:\s*(?:\$\$?|\\\)|\\\]))?(?:\s*(?:$|\*\*)|'
                   r'\s+(?:\\text\s*\{\s*)?' + _GOES_ON + '))', re.I)
# a number that only remarks on the '=' result before it: "(3 steps)", "from her 16 eggs", "for 7 days" (a
# parenthesis with words; "(7, 6)" is none)
_REMARK = re.compile(r'\((?=[^()]*[A-Za-z]{2})[^()]*\)|'
                     r'\b(?:from|for|with|in|at|after|over|per|each|on|across|during|within)\s+'
                     r'(?:(?:her|his|their|its|the|a|all|each|every|these|those)\s+)?(?:\\\(|\$)?\s*(?:\\?\$\s*)?'
                     r'[\d.,/]*\d', re.I)
# after an answer statement, its leading number where prose with a later number follows ("42 (after 3 steps)",
# "8 apples and she ate 2"), unless the words go on with the answer (_GOES_ON)
_LEAD = re.compile(_ANS_NUM + r'(?=\s*(?:\(|' + _GOES_ON + r').*\d)', re.I)
_MATH = re.compile(r'\$\$(.+?)\$\$|(?<![\\$])\$((?:\\\$|[^$\n])+?)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]|'
                   r'(-?\\[dt]?frac\{\d+\}\{\d+\})', re.S)  # $..$, $$..$$, \(..\), \[..\], a bare \frac{10}{9}
_JOIN = re.compile(r'\s*(?:,\s*and|,\s*or|and|or|,)\s*')  # "$1$, $2$ and $3$": one answer list
# between two boxes of one answer: "\boxed{1}, \boxed{2}", "\boxed{6} \text{ and } \boxed{8}", "\boxed{1} papers and"
_BOX_GAP = re.compile(r'(?:[\s,;$]|\\[()\[\]]|\\q?quad|\\text\{[^{}.]{0,30}\})*(?:\w+\s+)?(?:and|or|,|;)?'
                      r'(?:[\s,;$]|\\[()\[\]]|\\q?quad|\\text\{[^{}.]{0,30}\})*(?:[A-Za-z]\w*(?:_\{?\w+\}?)?\s*=\s*)?')


def _boxes(text):
    """[(start, end, content)] of all well-formed \\boxed{...} / \\boxed 5 / \\fbox{...}, in order."""
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
            out.append((m.start(), close[i] + 1, text[i + 1:close[i]].strip()))
        elif i > m.end() and text[i:i + 1] != '{':  # "\\boxed 5": the token after the space
            tok = re.match(r'[^\s$]+', text[i:])
            if tok:
                out.append((m.start(), i + tok.end(), tok.group(0)))
    return [b for k, b in enumerate(out) if k == 0 or b[0] >= out[k - 1][1]]  # nested boxes: the outer one


def _last_boxes(text, boxes):
    """The last box, with the boxes just before it that are one answer list ('\\boxed{1} and \\boxed{2}')."""
    run = [boxes[-1]]
    for b in reversed(boxes[:-1]):
        gap = text[b[1]:run[0][0]]
        if len(gap) > 60 or not _BOX_GAP.fullmatch(gap):
            break
        run.insert(0, b)
    return ', '.join(dict.fromkeys(c for _, _, c in run))


def _clip(span):
    """The answer inside the text after 'the answer is' / 'Answer:': its math spans or one sentence."""
    span = re.sub(r'^(?:[\s*:"]|\\")+', '', span)  # 'The final answer is \\"$12$ and $13$\\"'
    m = re.match(r'\$[^$\n]+\$(?:\s*(?:,|and|or)\s*\$[^$\n]+\$)*(?=\s*(?:[.,;!]|\n|$|I hope))', span)  # "$69$, $84$."
    if m and not span.startswith('$$'):
        return ', '.join(x.strip() for x in re.findall(r'\$([^$\n]+)\$', m.group(0))) or None
    for open_, close in (('$$', '$$'), ('\\[', '\\]'), ('\\(', '\\)')):
        j = span.find(close, len(open_))
        if span.startswith(open_) and j > 0:
            return span[len(open_):j].strip() or None
    line = re.sub(r'<<[^<>]*>>', '', span.strip().split('\n')[0])  # GSM8K calculator annotations
    line = re.split(r'\.(?=\s|$)|\*\*|\s+(?:because|since|which|so)\s|\s+I hope', line)[0]
    line = re.sub(r'^(?:therefore|thus|then|simply|just|equal to)\s+', '', line.split('=')[-1].strip(), flags=re.I)
    line = line.strip(' "')
    lead = _LEAD.match(line)  # "42 (after 3 steps)": Math-Verify would read the sentence's last number
    return (lead.group(0) if lead else line) or None


def extract_answer(text):
    """-> (answer string or None, stage): the model's final answer and which rule found it.
    Order: the last box, unless a later 'final answer is' statement overrides it; the last 'the answer is' /
    'Answer:' / '####' statement (its leading number where prose with another number follows it: "The answer is 42
    (after 3 steps)" is 42); the final line's last marked number (bold, '**$18**', or the right side of an '=',
    '9 * 2 = 18 dollars') where a later number follows it on that line ("= $18 every day from her 16 eggs" is 18);
    else the later of the last math span ($...$, \\(...\\), \\[...\\]) and the last number."""
    if not text:
        return None, 'none'
    boxes = _boxes(text)
    final = list(_FINAL_IS.finditer(text))
    if final and (not boxes or final[-1].start() > boxes[-1][1]):  # "\boxed{200} ... The final answer is $10{,}455$. I
                                                                   # hope"
        ans = _clip(text[final[-1].end():])
        if ans:
            return ans, 'answer_is'
    if boxes:
        return _last_boxes(text, boxes), 'boxed'
    for pattern, stage in ((_ANSWER_IS, 'answer_is'), (_ANSWER_STMT, 'answer_stmt')):
        for m in reversed(list(pattern.finditer(text))):
            ans = _clip(text[m.end():])
            if ans:
                return ans, stage
    tail = text[-5000:]
    last = tail.rstrip().rsplit('\n', 1)[-1]
    m = ([None] + list(_MARK.finditer(last)))[-1]
    later = last[m.end():] if m else ''
    if re.search(r'\d', later) and (m.group(1) or not re.search(r'\d', _REMARK.sub('', later))):
        return m.group(1) or m.group(2), 'final_line'  # bold beats any later number on the line, '=' only remarks
    nums = list(_LAST_NUM.finditer(tail))
    maths = [m for m in _MATH.finditer(tail) if not nums or re.search(r'\d', m.group(0))]  # "$n$" is no answer
    if maths and (not nums or nums[-1].start() < maths[-1].end()):  # "...is $\frac{2}{3}$." not its "3"
        run = [maths[-1]]
        for m in reversed(maths[:-1]):  # "$1$, $2$ and $3$"
            if not _JOIN.fullmatch(tail[m.end():run[0].start()]):
                break
            run.insert(0, m)
        return ', '.join(next(g for g in m.groups() if g is not None).strip() for m in run), 'last_math'
    if nums:  # a decimal comma is read here, in running text: "Soucis : 2,74 $" is 2.74
        n = nums[-1].group()
        return (n.replace(',', '.') if re.fullmatch(r'-?\d+,\d+', n) and not re.fullmatch(r'-?[1-9]\d{0,2}(,\d{3})+', n)
                else n), 'last_number'
    return None, 'none'


def normalize_gold(gold, dataset):
    """The gold answer as stored by extract.py -> one answer string (lists are joined with ', ')."""
    if isinstance(gold, (list, tuple)):  # olympiadbench final_answer list; multiple answers are ', '-joined
        return ', '.join(g.replace('$', '').strip() for g in gold)
    gold = str(gold).strip()
    if dataset == 'gsm8k':
        return gold.split('####')[-1].strip().replace(',', '')
    if dataset in ('aime', 'synth', 'words') and re.fullmatch(r'[+-]?\d+', gold):
        return str(int(gold))  # AIME "025" == 25
    return gold

# -----------------------------------------------------------------------------
# project rules before Math-Verify: each one is here because of the case in its comment


_WORDS = {w: str(i) for i, w in enumerate(
    'zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen '
    'sixteen seventeen eighteen nineteen twenty'.split())}
_UNITS = set('m cm mm km g kg mg s h min hr sec l ml in ft yd mi lb oz mph kph'.split())
_TOWER = re.compile(r'\^\s*\{[^{}]*\^|\^\s*\(?\s*\w+\s*(?:\^|\*\*)|\*\*\s*\w+\s*\*\*|\d{5,}\s*!')  # 2^{2^{10}},
                                                                                                   # 9**9**9, 10^{6}!
_BASE = re.compile(r'[0-9A-Z]+_\{?\d+\}?')  # a number in base b: 52_8, 4210_{5}
_NUM = re.compile(r'[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d{1,3})?')


def _norm(s, unit=None):
    """Surface clean-up Math-Verify does not do (or does wrongly); the result is still LaTeX."""
    s = str(s).strip().replace('\n', ' ')
    if unit:  # olympiadbench `unit`: "5 km" against gold 5 with unit "km"
        s = re.sub(r'\s*(?:\\text\{\s*|\\mathrm\{\s*)?' + re.escape(unit.strip('$ ')) + r'\s*\}?\s*$', '', s)
    s = re.sub(r'\\\$|\\(?:dollars?|textdollar)\b', '', s)  # "\$10" is 10 (Math-Verify reads \$ as a symbol)
    if s.count('$') == 1 or re.fullmatch(r'\$[^$]*\$', s):  # "$10" (currency), "$\frac12$" (one math span)
        s = s.replace('$', '')
    s = re.sub(r',\\!\s*|\{,\}', ',', s)  # "10,\! 080", "14{,}916": a LaTeX thousands separator
    s = re.sub(r'(?<!\\)\\[!,;:> ]|\\q?quad\b|~|\\(?:left|right)(?![a-zA-Z])\.?|\\(?:text|mbox|mathrm)\s*\{\s*\}', ' ',
               s).strip().rstrip('.').strip()
    s = re.sub(r'^\\text(?:bf|it|rm|normal)?\s*\{([^{}]*)\}$', r'\1', s).strip()  # "\textbf{033}"
    s = re.sub(r'^\((-?\w+)\)$', r'\1', s)  # "(023)", "(C)": one item in parentheses is that item
    s = re.sub(r'\\%|\s*(?:percent(?:age)?|pct)\b', '%', s)  # "28 percent", "28\%"
    if re.fullmatch(r'-?[1-9]\d{0,2}(,\d{3})+(\.\d+)?|-?[1-9]\d{0,2}( \d{3})+(\.\d+)?', s):
        s = s.replace(',', '').replace(' ', '')  # "1,100" and "1 100" are 1100, but "1, 100" is a list of two
    m = re.fullmatch(r'(.*?[\d}%])\s*(?:\\(?:text|mbox|mathrm|textnormal)\s*\{\s*)?'
                     r'([a-zA-Z]+(?:[\s.]+[a-zA-Z]+)*\.?)\s*\}?(?:\^\{?\d\}?)?(?:/[a-zA-Z]+)?', s)
    if m and (len(m.group(2).split()[0]) > 2 or m.group(2).split()[0].rstrip('.').lower() in _UNITS):
        s = m.group(1)  # "5.4 cents", "864 inches^2", "13 \text{coins}": a number with a unit
    return _WORDS.get(s.lower(), s)


def _num(s):
    """Plain number (int, decimal, a/b, \\frac{a}{b}, \\frac12) -> Fraction, else None: the fast path's grammar."""
    neg = s.startswith('-')
    t = s[1:].strip() if neg else s
    try:
        if _NUM.fullmatch(t):
            v = Fraction(t)
        elif m := re.fullmatch(r'(\d+)\s*/\s*(\d+)|\\[dt]?frac(?:\{(\d+)\}|(\d))(?:\{(\d+)\}|(\d))', t):
            a, b = (m.group(1), m.group(2)) if m.group(1) else (m.group(3) or m.group(4), m.group(5) or m.group(6))
            v = Fraction(int(a), int(b))
        else:
            return None
    except (ValueError, ZeroDivisionError):
        return None
    return -v if neg else v


def _num_equal(a, b, approx, tol=None):
    """Exact, unless a decimal was written (approx): then rounded to 6 places as Math-Verify does.
    tol: an absolute tolerance (OlympiadBench's official scorer: |gold - pred| <= error * 1.01)."""
    if a == b:
        return True
    if tol is not None:
        return abs(a - b) <= Fraction(tol) * Fraction(101, 100)
    return approx and round(a, 6) == round(b, 6)


def _fast(a, b, tol=None):
    """(equal, method) decided here for plain numbers, or None: Math-Verify decides."""
    if a == b or re.sub(r'\s+', '', a) == re.sub(r'\s+', '', b):  # spaces do not matter in math mode: "t( 0, 4]"
        return True, 'string'
    if not a or not b:
        return False, 'none'
    if _BASE.fullmatch(a) or _BASE.fullmatch(b):  # "52_8" is not 52 (Math-Verify drops the base)
        return re.sub(r'[{}]', '', a) == re.sub(r'[{}]', '', b), 'string'
    if (re.fullmatch(r'-?\d+,\d+', a) and not re.fullmatch(r'-?[1-9]\d{0,2}(,\d{3})+', a)
            and re.fullmatch(r'-?\d*\.\d+', b)):
        return _num(a.replace(',', '.')) == _num(b), 'numeric'  # a predicted "2,74" is the gold 2.74; a gold "1,3" is a
                                                                # list
    na, nb = _num(a), _num(b)
    if na is not None and nb is not None:
        return _num_equal(na, nb, '.' in a or '.' in b, tol), 'numeric'
    if re.fullmatch(r'(?:\\text\{)?[A-Za-z][A-Za-z ]{2,}\}?',
                    a) and re.fullmatch(r'(?:\\text\{)?[A-Za-z][A-Za-z ]{2,}\}?', b):
        # words: "Evelyn", "even" (Math-Verify would read e*v*e*n)
        return re.sub(r'\\text\{|\}', '', a).strip().lower() == re.sub(r'\\text\{|\}', '', b).strip().lower(), 'string'
    return None


def _percent(a, b, tol=None):
    """The percent rule, the one place a percent sign is read (after _norm, '\\%', 'percent' and 'pct' are '%'):
    a percent is compared by its number, so '25%' and 25 are one answer and '2500%' and 25 are not (GSM8K's gold for
    'what percent ...' is the number, 25); Math-Verify, which reads % as /100 and so finds 2500% == 25, never sees one.
    A percent is also its fraction (25% == 0.25 == 1/4; OlympiadBench's gold '62.5%' against 0.625) where the other
    side is a plain number that is not a whole number: a whole number is the percent's own number (100% is not 1).
    Two percents: their numbers. -> (a, b) less their percent signs, and True where the fraction reading makes them
    equal."""
    if '%' not in a and '%' not in b:
        return a, b, False
    pa, pb = a.endswith('%'), b.endswith('%')
    a, b = re.sub(r'\s*%', '', a).strip(), re.sub(r'\s*%', '', b).strip()
    if pa != pb:
        na, nb = _num(a), _num(b)
        if na is not None and nb is not None and (nb if pa else na).denominator != 1:
            return a, b, _num_equal(na / (100 if pa else 1), nb / (100 if pb else 1), '.' in a or '.' in b, tol)
    return a, b, False


@functools.lru_cache(maxsize=1 << 18)
def _equiv(pred, gold, timeout=2.0, unit=None, tol=None):
    """(equal, method) for a predicted and a gold answer string: 'string' / 'numeric' / 'math_verify' / 'timeout'."""
    if max(len(pred), len(gold)) > 2000:  # no real answer is this long; keeps every regex below cheap
        return pred.strip() == gold.strip(), 'string'
    a, b, fraction = _percent(_norm(pred, unit), _norm(gold, unit), tol)
    if fraction:
        return True, 'numeric'
    r = _fast(a, b, tol)
    if r is not None:
        return r
    if _TOWER.search(a) or _TOWER.search(b):  # sympy would evaluate 9^{9^{9^9}} while parsing: strings only
        return ''.join(a.split()) == ''.join(b.split()), 'string'
    ok = _mv_call(a, b, time.monotonic() + timeout, tol)
    return (False, 'timeout') if ok is None else (ok, 'math_verify')


def is_equiv(pred, gold, timeout=2.0):
    """True if two answer strings are mathematically the same answer (gold second: Math-Verify is asymmetric)."""
    if pred is None or gold is None:
        return False
    return _equiv(str(pred), str(gold), float(timeout))[0]


def answers_equal(a, b, timeout=2.0):
    """Symmetric, cached equivalence of two extracted answers (majority voting)."""
    if a is None or b is None:
        return a is None and b is None
    a, b = sorted((str(a), str(b)))
    return _equiv(a, b, float(timeout))[0]


def grade(text, gold, dataset, timeout=2.0, finish=None, meta=None, truncated_policy='incorrect'):
    """-> dict(correct, answer, stage): stage is '<extraction rule>/<comparison method>'.
    finish: the candidate's 'eos' | 'length' | 'pruned' (extract.py); with truncated_policy='incorrect' a
    candidate cut at the length limit with no box or answer statement is wrong, whatever its last number
    ('.../truncated'). A candidate stopped by online pruning never reached its answer: wrong, no answer ('pruned').
    meta: extract.py's problem meta; OlympiadBench's `unit` and `error` (absolute tolerance) are used."""
    if truncated_policy not in ('incorrect', 'grade'):
        raise ValueError(f"truncated_policy={truncated_policy!r} is unknown; fix: 'incorrect' or 'grade'")
    if finish == 'pruned':  # a partial solution's last number is no answer; it must not vote either
        return dict(correct=False, answer=None, stage='pruned')
    meta = meta or {}
    g = normalize_gold(gold, dataset)
    ans, stage = extract_answer(text)
    if ans is None:
        return dict(correct=False, answer=None, stage='none')
    if finish == 'length' and stage in ('final_line', 'last_math', 'last_number') and truncated_policy == 'incorrect':
        return dict(correct=False, answer=ans, stage=f'{stage}/truncated')  # "...the original total of 13 coins"
    tol = float(meta['error']) if meta.get('error') not in (None, '') else None
    ok, method = _equiv(ans, g, float(timeout), meta.get('unit') or None, tol)
    return dict(correct=bool(ok), answer=ans, stage=f'{stage}/{method}')

# -----------------------------------------------------------------------------
# Math-Verify, in a worker process: parsing or simplifying can hang in C code (huge powers), and only
# killing a process is a time limit that always works (Math-Verify's own signal timeouts are off).


def _mv_input(s):
    """An answer string as text for Math-Verify's parse: bare LaTeX goes inside $...$; a sentence
    ("The largest $n$ is 34", "Sphere 3 hours ago") is left to Math-Verify's extraction."""
    if re.search(r'\$|\\\(|\\\[|\\boxed', s) or (re.search(r'[A-Za-z]{3,}\s+[A-Za-z]{2,}', s) and '\\' not in s):
        return s
    return f'${s}$'


def _mv_equal(pred, gold, tol, parsed):
    """Runs in the worker: Math-Verify's verdict on two normalised answers. `parsed`: the worker's parse cache.
    tol: OlympiadBench's absolute tolerance, also for numbers written as expressions (7.1 \\cdot 10^{35})."""
    import sympy
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
    cfg = (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())
    for s in (pred, gold):
        if s not in parsed:
            if len(parsed) > 20000:
                parsed.clear()
            parsed[s] = parse(_mv_input(s), cfg, parsing_timeout=None)
    # allow_set_relation_comp: a gold "x \in [-2,7]" also accepts "-2 \le x \le 7"
    ok = verify(parsed[gold], parsed[pred], float_rounding=6, strict=True, allow_set_relation_comp=True,
                timeout_seconds=None)
    g, p = parsed[gold][:1], parsed[pred][:1]
    if ok and g and p and all(isinstance(x[0], sympy.Expr) and x[0].is_number and not x[0].has(sympy.Float)
                              for x in (g, p)):
        # exact numbers must agree exactly: Math-Verify's 6-decimal rounding finds 1/2004! == 1/2006!
        d, scale = abs((g[0] - p[0]).evalf(30)), max(abs(g[0].evalf(30)), abs(p[0].evalf(30)))
        ok = bool(d == 0 or d <= 1e-20 * scale)
    if not ok and tol is not None and g and p and all(isinstance(x[0], sympy.Expr) and x[0].is_number for x in (g, p)):
        ok = bool(abs((g[0] - p[0]).evalf(30)) <= tol * 1.01)
    return ok


def _worker(conn):
    import logging
    import warnings
    warnings.simplefilter('ignore')  # sympy deprecation noise on odd input
    logging.getLogger('math_verify').setLevel(logging.ERROR)  # "timeout is disabled": ours is the process kill
    parsed = {}
    while True:
        try:
            a, b, tol = conn.recv()
        except EOFError:
            return
        try:
            r = _mv_equal(a, b, tol, parsed)
        except BaseException:  # RecursionError, MemoryError, ...: never kill the worker on bad input
            r = False
        conn.send(bool(r))


_pool = {'proc': None, 'conn': None}
_pool_lock = threading.Lock()
_mv_cache = {}
_stats = {'calls': 0, 'timeouts': 0}


def _mv_call(a, b, deadline, tol=None):
    """True/False from the worker, or None if it ran past the deadline (the worker is then killed)."""
    if (a, b, tol) in _mv_cache:
        return _mv_cache[a, b, tol]
    with _pool_lock:
        start = time.monotonic()  # starting a worker is not charged to the comparison
        if _pool['proc'] is None or not _pool['proc'].is_alive():
            import math_verify  # noqa: F401  imported before fork: a new worker is ready at once
            ctx = mp.get_context('fork' if 'fork' in mp.get_all_start_methods() else 'spawn')
            _pool['conn'], child = ctx.Pipe()
            _pool['proc'] = ctx.Process(target=_worker, args=(child,), daemon=True)
            _pool['proc'].start()
            child.close()
        timeout = deadline - start
        _stats['calls'] += 1
        try:
            if timeout > 0:
                _pool['conn'].send((a, b, tol))
                if _pool['conn'].poll(timeout):
                    r = _mv_cache[a, b, tol] = _pool['conn'].recv()
                    return r
        except (EOFError, OSError):  # the worker died: treat like a timeout and start a new one next time
            pass
        _stats['timeouts'] += 1
        stop_worker()
        return None


def stop_worker():
    """Kill the Math-Verify worker (a new one starts on the next comparison)."""
    if _pool['proc'] is not None:
        _pool['proc'].kill()
        _pool['proc'].join()
        _pool['conn'].close()
        _pool['proc'] = _pool['conn'] = None
