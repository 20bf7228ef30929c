"""
Config overrides, nanoGPT style, without exec of the stage. Every stage file starts with its knobs (plain
`name = default` assignments, lowercase, before the first def; a knob whose default is None declares the type it
takes: `epochs: int | float = None`, one that also takes None names it: `seeds: list | None = [42]`, a list whose
default is empty or None its elements' type: `train_dirs: list[str] = None`) and ends with

    if __name__ == '__main__':
        config = configure(globals())   # config files, then --key=value, override the knobs above

    python train.py config/gsm8k_1p7b.py --seed=123 --out_dir=out/x

A positional argument is a config file (plain Python assignments); several stack left to right, and
`--key=value` overrides come last whatever their position. Values are parsed with ast.literal_eval
(falling back to the raw string). Compared to nanoGPT:
- values may contain '=' (`--prompt_suffix=a=b`): only the first '=' splits;
- an int is accepted where the default is a float; a None default takes its declared type (or None); None is refused
  where the default is not None unless the annotation names it;
- a list's or tuple's elements are checked too (their declared type, else the default's: seeds [42, 'x'] is refused), a
  tuple default's length (a range is a pair), and a range (a knob named *_range) in order: (9, 3) is "reversed";
- bool defaults accept True/False/true/false/1/0;
- an unknown --key is an error naming the key and the closest known keys, and another stage's knob names that stage;
- a config file may set keys of any stage (one file serves extract, label, train, evaluate and baselines): every key
  is type-checked by every stage against the stage that owns it (epochs = 'x' stops extract.py, not only train.py after
  the extraction), a key no stage knows is an error naming the file, the key and the closest known keys (every stage's
  knobs and literal defaults are read from STAGE_FILES with ast: a stage imports only earlier ones);
- a config file that does not run (a syntax error, a name it does not define) is one line with its file and line; one
  that is missing names the nearest config files.
"""
import ast
import copy
import difflib
import functools
import os
import shlex
import sys
import tempfile
import traceback
import types
import typing


def knobs(g):
    """{name: default} of the stage whose module globals are g, called right after its knobs: every public lowercase
    name bound so far that is not a module, function or class (the imports above the knobs bind only those)."""
    return {k: v for k, v in g.items() if not k.startswith('_') and k.islower() and not callable(v)
            and not isinstance(v, types.ModuleType)}


# every stage file, in pipeline order, then sample.py and the studies: their knobs are the keys a config file may set
# (stage_knobs)
STAGE_FILES = ('extract.py', 'label.py', 'train.py', 'baselines.py', 'evaluate.py', 'sample.py', 'studies/policy.py',
               'studies/steer.py', 'studies/transfer.py', 'studies/curve.py')
STEERS = 'studies/policy.py'  # runs extract.py or sample.py under its knobs: python -m studies.policy extract.py ...
NONE = type(None)
_TYPES = {t.__name__: t for t in (int, float, str, bool, list, tuple, dict)}  # what a knob's annotation may name (and
                                                                              # None, list[int], tuple[int, int])


def _declared(node, where):
    """The types an annotation names as a tuple: `int | float` -> (int, float), `list | None` -> (list, NoneType);
    `list[int]` / `tuple[int, int]` name a list's or tuple's element types (a tuple's per position)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _declared(node.left, where) + _declared(node.right, where)
    if isinstance(node, ast.Constant) and node.value is None:
        return (NONE,)
    if isinstance(node, ast.Name) and node.id in _TYPES:
        return (_TYPES[node.id],)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in ('list', 'tuple'):
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if all(isinstance(a, ast.Name) and a.id in _TYPES for a in args) and (node.value.id == 'tuple'
                                                                              or len(args) == 1):
            return (_TYPES[node.value.id][tuple(_TYPES[a.id] for a in args)],)
    raise SystemExit(f"{where}: the annotation {ast.unparse(node)!r} names no type configurator checks; fix: one or "
                     f"more of {' | '.join(_TYPES)} | None, list[<type>], tuple[<type>, ...]")


_UNREAD = object()  # a default that is not a literal (system_prompt = MATH_SYSTEM): its stage checks it


@functools.lru_cache(maxsize=1)
def _stages():
    """{stage file: {knob: (its declared types (a tuple) or None, its default where a literal, else _UNREAD)}} of every
    stage in STAGE_FILES: the top-level lowercase assignments before its first def, read with ast (an early stage
    cannot import the later ones)."""
    here, out = os.path.dirname(os.path.abspath(__file__)), {}
    for name in STAGE_FILES:
        with open(os.path.join(here, name)) as f:
            tree = ast.parse(f.read())
        out[name] = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                break
            target = node.target if isinstance(node, ast.AnnAssign) else \
                node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            if isinstance(target, ast.Name) and target.id.islower() and not target.id.startswith('_'):
                try:
                    default = ast.literal_eval(node.value)
                except ValueError:
                    default = _UNREAD
                out[name][target.id] = (_declared(node.annotation, f'{name} line {node.lineno}')
                                        if isinstance(node, ast.AnnAssign) else None, default)
    return out


def stage_defaults(name):
    """{knob: default} of the stage file `name` (one of STAGE_FILES) as _stages reads it: another stage's knobs without
    importing that stage (evaluate.py reads train.py's, sample.py evaluate.py's). A default that is not a literal
    (system_prompt = MATH_SYSTEM) is left out."""
    return copy.deepcopy({k: d for k, (_, d) in _stages()[name].items() if d is not _UNREAD})


@functools.lru_cache(maxsize=1)
def stage_knobs():
    """{stage file: {knob: its declared types (a tuple) or None}} of every stage in STAGE_FILES (_stages)."""
    return {s: {k: d for k, (d, _) in ks.items()} for s, ks in _stages().items()}


def declared_type(key):
    """The types a knob takes as its stage declares them (the same name means the same thing in every stage): what a
    knob whose default is None takes, None where a knob whose default is not None also takes it, a list's elements;
    None where no stage declares one."""
    found = [t[key] for t in stage_knobs().values() if t.get(key)]
    return tuple(dict.fromkeys(x for t in found for x in t)) or None


def _name(t):
    return 'None' if t is NONE else str(t) if typing.get_origin(t) else t.__name__


def _type_name(types):
    return ' or '.join(map(_name, types))


def _a(types):
    """'an int', 'a str or list'."""
    return ('an ' if types[0] is int else 'a ') + _type_name(types)


def _fix(key, value, source, quote=False):
    """How to set key where source set it: on the command line (quote: the value quoted for the shell), or in the
    config file named."""
    on_line = source == 'command line' or not source.endswith('.py')
    return f'--{key}={shlex.quote(value) if quote else value}' if on_line else f'{key} = {value} in {source}'


def _check_declared(key, value, types, source):
    """value for a knob whose default is None: None or one of its declared types (an int where float is declared; a
    list for a tuple and back, converted to the declared one; 'true' / 'false' where bool is)."""
    types = tuple(t for t in types if t is not NONE)
    plain = tuple(typing.get_origin(t) or t for t in types)
    seq = [t for t in plain if t in (list, tuple)]
    if bool in plain and isinstance(value, str) and value.lower() in ('true', 'false'):
        return value.lower() == 'true'
    if isinstance(value, (list, tuple)) and seq:
        return value if type(value) in seq else seq[0](value)
    if isinstance(value, bool) and bool not in plain or not isinstance(value, plain) and not (
            float in plain and isinstance(value, int) and not isinstance(value, bool)):
        fix = _fix(key, f'<{_type_name(types)}>', source)
        raise SystemExit(f"config error ({source}): {key}={value!r} is {_a((type(value),))}, but {key} takes "
                         f"{_a(types)} (default None); fix: {fix}, or leave it unset")
    return value


def _is(x, t):
    """x is a t as a knob takes it: an int is a float, a bool is no int."""
    if t in (int, float) and isinstance(x, bool):
        return False
    return isinstance(x, (int, float) if t is float else t)


def _check_items(key, value, declared, default, source):
    """A list's or tuple's elements: their declared types (list[int], tuple[int, int]), else the default's where it
    holds elements of one type (a tuple's per position, so a range is a pair); a range (*_range) in order."""
    if not isinstance(value, (list, tuple)):
        return value
    spec = next((typing.get_args(t) for t in declared or () if typing.get_origin(t) is type(value)), None)
    if spec is None and isinstance(default, type(value)) and default:
        kinds = tuple(bool if isinstance(x, bool) else type(x) for x in default)
        spec = kinds if isinstance(default, tuple) else kinds[:1] if len(set(kinds)) == 1 else None
    if spec:
        form = f"({', '.join(f'<{_name(t)}>' for t in spec)})" if isinstance(value, tuple) \
            else f'[<{_name(spec[0])}>, ...]'
        if isinstance(value, tuple) and len(value) != len(spec):
            raise SystemExit(f"config error ({source}): {key}={value!r} holds {len(value)} values, but {key} takes "
                             f"{len(spec)}: {form}; fix: {_fix(key, form, source, quote=True)}")
        for x, t in zip(value, spec) if isinstance(value, tuple) else ((x, spec[0]) for x in value):
            if not _is(x, t):
                what = f'a tuple {form}' if isinstance(value, tuple) else f'a list of {_name(spec[0])}'
                raise SystemExit(f"config error ({source}): {key}={value!r} holds {x!r}, {_a((type(x),))}, but {key} "
                                 f"takes {what}; fix: {_fix(key, form, source, quote=True)}")
    if key.endswith('_range') and len(value) == 2 and all(_is(x, int) for x in value) and value[0] > value[1]:
        fix = _fix(key, repr(type(value)(value[::-1])), source, quote=True)
        raise SystemExit(f"config error ({source}): {key}={value!r} is reversed (an inclusive range is (lo, hi)); fix: "
                         f"{fix}")
    return value


def _check_type(key, value, default, source):
    declared = declared_type(key)
    if value is None:
        if default is None or NONE in (declared or ()):
            return value
        fix = _fix(key, f'<{type(default).__name__}>', source)
        raise SystemExit(f"config error ({source}): {key}=None, but {key} takes {_a((type(default),))} (default "
                         f"{default!r}); fix: {fix}, or leave it unset")
    if default is None:
        value = value if declared is None else _check_declared(key, value, declared, source)
    elif isinstance(default, bool):
        if isinstance(value, str) and value.lower() in ('true', 'false', '1', '0'):
            return value.lower() in ('true', '1')
        if isinstance(value, int) and value in (0, 1) and not isinstance(value, bool):
            return bool(value)
        if not isinstance(value, bool):
            raise SystemExit(f"config error ({source}): {key}={value!r} must be True or False; fix: "
                             f"{_fix(key, 'True', source)} (or False)")
    elif isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    elif isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)):
        value = type(default)(value)
    elif type(value) is not type(default):
        fix = _fix(key, f'<{type(default).__name__}>', source)
        raise SystemExit(f"config error ({source}): {key}={value!r} is {_a((type(value),))}, but {key} takes "
                         f"{_a((type(default),))} (default {default!r}); fix: {fix}")
    return _check_items(key, value, declared, default, source)


def _unknown(key, known, source):
    close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known keys: {', '.join(sorted(known))}"
    raise SystemExit(f"config error ({source}): unknown key '{key}'{hint}")


def check_keys(d, defaults, source):
    """A dict knob that holds another stage's knobs (curve.py / transfer.py's variants and train_overrides: train.py's)
    checked as top-level keys are: an unknown key names the closest known ones, a value of the wrong type its type."""
    if not isinstance(d, dict):
        raise SystemExit(f"config error ({source}): {d!r} must be a dict of knobs; fix: e.g. {{'verifier_layers': "
                         f"[-1]}}")
    for k, v in d.items():
        if k not in defaults:
            _unknown(k, defaults, source)
        _check_type(k, v, defaults[k], source)


GIVEN = {}  # what the config files on this process's command line set (configure fills it): a fix names these values


def check_positive(cfg, defaults, keys):
    """ValueError naming the key and the fix where a count or size that must be a positive int is not (0 rows per batch
    or samples per problem divide by zero, or loop doing nothing); None passes where it is the knob's 'unset'. The fix
    is the config files' own value (GIVEN) where they set a good one, else the knob's default."""
    good = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1  # noqa: E731
    for k in keys:
        v = cfg.get(k)
        if not (v is None and defaults.get(k) is None or good(v)):
            fix = GIVEN[k] if good(GIVEN.get(k)) else defaults.get(k) or 1
            raise ValueError(f"{k}={v!r} must be a positive int; fix: --{k}={fix}")


def check_between(cfg, defaults, bounds):
    """ValueError naming the key, the value and the fix where a number is outside its interval: bounds {key: (lo, hi,
    why)}, open at lo and closed at hi (None: no bound), e.g. top_p in (0, 1]; why: what the value would do, said in the
    line. None passes where it is the knob's 'unset'. The fix as check_positive's: the config files' own value (GIVEN)
    where good, else the knob's default."""
    def good(v, lo, hi):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and (lo is None or v > lo) and (
            hi is None or v <= hi)
    for k, (lo, hi, why) in bounds.items():
        v = cfg.get(k)
        if not (v is None and defaults.get(k) is None or good(v, lo, hi)):
            fix = GIVEN[k] if good(GIVEN.get(k), lo, hi) else defaults.get(k)
            where = f'> {lo}' if hi is None else f'in ({lo}, {hi}]'
            raise ValueError(f"{k}={v!r} must be {where}{f' ({why})' if why else ''}; fix: --{k}={fix}")


def check_distinct(cfg, keys):
    """ValueError naming the key, the value and the fix where a list knob whose values each name a run (seeds, sizes)
    repeats one: the two runs would be one folder, trained twice at once."""
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, (list, tuple)) and len(set(v)) < len(v):
            twice = sorted({x for x in v if v.count(x) > 1})
            raise ValueError(f"{k}={list(v)!r} repeats {', '.join(map(repr, twice))}: each value is a run of its own "
                             f"folder, trained once; fix: --{k}={shlex.quote(repr(list(dict.fromkeys(v))))}")


def check_writable(key, *paths):
    """SystemExit in one line, naming the path and the fix, unless files can be written in each of paths (folders,
    made later where missing): the nearest existing folder on the way is tried with a temporary file, removed at once.
    A stage calls it before its work, so a read-only place is named at the start, not after an hour. key: the knob (or
    environment variable) that names the place."""
    for path in paths:
        p = os.path.abspath(path)
        while not os.path.exists(p):
            p = os.path.dirname(p)
        fix = "HSRM_CACHE=<a folder you can write> before the command" if key == 'HSRM_CACHE' else \
            f"--{key}=<a folder you can write>"
        if not os.path.isdir(p):
            raise SystemExit(f"{key}: {path} cannot be made, {p} is a file, not a folder; fix: {fix}")
        try:
            tempfile.TemporaryFile(dir=p).close()
        except OSError as e:
            raise SystemExit(f"{key}: {path} cannot be written ({p}: {e.strerror}); fix: {fix}, or make {p} writable") \
                from None


def command(stage):
    """How a stage file runs from the repo's root: 'python train.py', 'python -m studies.curve'."""
    return f"python -m {stage[:-3].replace('/', '.')}" if '/' in stage else f'python {stage}'


def _owner(key, source):
    """A command-line key that is another stage's knob (sample.py --lr): name the stage that owns it and what to do."""
    here = os.path.dirname(os.path.abspath(__file__))
    me = os.path.relpath(os.path.abspath(sys.argv[0]), here) if sys.argv[0].endswith('.py') else 'this stage'
    owners = [s for s, ks in stage_knobs().items() if key in ks and s != me]
    if owners == [STEERS] and me in ('extract.py', 'sample.py'):
        raise SystemExit(f"config error ({source}): --{key} is not a knob of {me}, it is {STEERS}'s, which steers its "
                         f"sampling; fix: {command(STEERS)} {me} <config> --{key}=...")
    if owners:
        raise SystemExit(f"config error ({source}): --{key} is not a knob of {me}, it is {' and '.join(owners)}'s; "
                         f"fix: set it there ({command(owners[0])} <config> --{key}=...), then run {me} on what it "
                         f"writes" + (" (--ckpt=<the new run's ckpt.pt>)" if me == 'sample.py' and 'train.py' in owners
                                      else ''))


def read_config_file(path):
    """{key: value} a config file assigns (names starting with '_', functions and modules left out). A file that is
    missing or does not run (a syntax error, a name it does not define) is one line naming the file, line and fix."""
    if not os.path.isfile(path):
        folder = os.path.dirname(path)
        if not os.path.isdir(folder or '.'):  # the folder misspelt too: the project's config files
            folder = os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'config'))
        near = difflib.get_close_matches(os.path.basename(path), sorted(
            f for f in os.listdir(folder or '.') if f.endswith('.py')), n=3, cutoff=0.7)
        near = [os.path.join(folder, f) for f in near]
        raise SystemExit(f"config error: config file '{path}' not found; " + (
            f"did you mean {', '.join(near)}? fix: {near[0]}" if near else "fix: pass a path like config/demo.py"))
    ns = {}
    try:
        with open(path, 'rb') as f:
            code = compile(f.read(), path, 'exec')
        exec(code, {}, ns)  # a config file is plain Python assignments
    except SyntaxError as e:
        raise SystemExit(f"config error ({path}, line {e.lineno}): {e.msg}: {(e.text or '').strip()!r}; fix: plain "
                         f"Python assignments, one `key = value` a line") from None
    except Exception as e:  # noqa: BLE001 (anything the file's own code raises is the file's error)
        line = next((fr.lineno for fr in reversed(traceback.extract_tb(e.__traceback__)) if fr.filename == path), '?')
        raise SystemExit(f"config error ({path}, line {line}): {type(e).__name__}: {e}; fix: plain Python assignments, "
                         f"one `key = value` a line") from None
    return {k: v for k, v in ns.items() if not k.startswith('_') and not callable(v) and type(v).__name__ != 'module'}


def apply_config(g, argv, defaults=None):
    """Apply config files, then --key=value overrides, in argv to the dict g; returns the config dict.
    defaults: {key: default} of the knobs g holds (None: knobs(g)). A config file's key that is not one of them is
    type-checked against the stage that owns it (_stages) and left to it; a key no stage knows is an error."""
    mine = dict(defaults) if defaults is not None else knobs(g)
    files = [a for a in argv if not a.startswith('--')]
    flags = [a for a in argv if a.startswith('--')]
    for arg in files:
        for k, v in read_config_file(arg).items():
            if k in mine:
                g[k] = _check_type(k, v, mine[k], arg)
            elif not any(k in ks for ks in stage_knobs().values()):
                _unknown(k, set(mine).union(*stage_knobs().values()), arg)
            else:  # another stage's key: checked as that stage checks it, before this stage's work
                for ks in _stages().values():
                    if ks.get(k, (None, _UNREAD))[1] is not _UNREAD:
                        _check_type(k, v, ks[k][1], arg)
    for arg in flags:
        if '=' not in arg:
            raise SystemExit(f"config error: '{arg}' must look like --key=value")
        key, val = arg[2:].split('=', 1)
        if key not in mine:
            _owner(key, 'command line')
            _unknown(key, mine, 'command line')
        try:
            value = ast.literal_eval(val)
        except (SyntaxError, ValueError):
            value = val  # a bare string such as --model=Qwen/Qwen3-1.7B
        g[key] = _check_type(key, value, mine[key], 'command line')
    return {k: g[k] for k in mine}


def split_argv(argv, own, other):
    """(argv for the stage whose defaults are `own`, the config of another stage whose defaults are `other`), for a
    stage that also runs part of another (baselines.py trains as train.py; steer.py --prune reads a run as
    evaluate.py): the other's defaults updated by the same config files and by the --key=value flags of its keys;
    a flag that only the other stage knows is left out of our argv."""
    key = lambda a: a[2:].split('=', 1)[0] if a.startswith('--') else None  # noqa: E731
    files = [a for a in argv if key(a) is None]
    theirs = [a for a in argv if key(a) in other]
    ours = [a for a in argv if key(a) not in set(other) - set(own)]
    return ours, apply_config(dict(other), files + theirs, other)


def configure(g, argv=None):
    """The stage's config: its knobs in g overridden by sys.argv (config files and --key=value). GIVEN then holds what
    the config files set, for the fixes that name a value."""
    argv = sys.argv[1:] if argv is None else argv
    GIVEN.clear()
    for arg in argv:
        if not arg.startswith('--'):
            GIVEN.update(read_config_file(arg))
    return apply_config(g, argv)


# -----------------------------------------------------------------------------
# the command line: bad input as one line


def cli(run, config, name):
    """Run a stage's CLI. Bad input (a ValueError / FileNotFoundError whose message says 'fix:') exits
    with that one line instead of a traceback, and so does Ctrl-C (what finished is written whole: the same command goes
    on from there); anything else is a bug and keeps its traceback."""
    try:
        return run(config)
    except KeyboardInterrupt:
        print(file=sys.stderr)  # off a progress bar's line
        raise SystemExit(f"{name}: interrupted; what it finished is kept, written whole; fix: the same command goes on "
                         f"from there") from None
    except (ValueError, FileNotFoundError) as e:
        if 'fix:' not in str(e):
            raise
        raise SystemExit(f'{name}: {e}') from None


def read_flags(argv, known, name):
    """{key: value} of a command line of --key=value flags and bare --key switches (the benches, which have no knobs):
    an unknown one is refused in one line naming the closest known one, before any work. known: {key: True where it
    takes a value, False for a switch}; name: the command, as a user types it."""
    out, every = {}, ', '.join(f'--{k}' + '=' * v for k, v in known.items())
    for arg in argv:
        key, eq, val = arg[2:].partition('=') if arg.startswith('--') else (arg, '', '')
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.5)
            fix = f"--{close[0]}{eq}{val} (its flags: {every})" if close else f'one of {every}'
            raise SystemExit(f"{name}: unknown flag {arg!r}; fix: {fix}")
        if known[key] != bool(eq):
            raise SystemExit(f"{name}: {arg!r} {'takes a value' if known[key] else 'is a switch'}; fix: "
                             f"--{key}{'=<value>' if known[key] else ''}")
        out[key] = val if eq else True
    return out
