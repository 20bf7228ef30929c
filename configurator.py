"""
Config overrides, nanoGPT style, without exec of the stage. Every stage file starts with its knobs (plain
`name = default` assignments, lowercase, before the first def; a knob whose default is None declares the type it
takes: `epochs: int | float = None`) and ends with

    if __name__ == '__main__':
        config = configure(globals())   # config files, then --key=value, override the knobs above

    python train.py config/gsm8k_1p7b.py --seed=123 --out_dir=out/x

A positional argument is a config file (plain Python assignments); several stack left to right, and
`--key=value` overrides come last whatever their position. Values are parsed with ast.literal_eval
(falling back to the raw string). Compared to nanoGPT:
- values may contain '=' (`--prompt_suffix=a=b`): only the first '=' splits;
- an int is accepted where the default is a float; a None default takes its declared type (or None);
- bool defaults accept True/False/true/false/1/0;
- an unknown --key is an error naming the key and the closest known keys, and another stage's knob names that stage;
- a config file may set keys of any stage (one file serves extract, label, train, evaluate and baselines): keys of
  another stage are left to the stage that owns them, a key no stage knows is an error naming the file, the key and
  the closest known keys (every stage's knobs are read from STAGE_FILES with ast: a stage imports only earlier ones);
- a config file that does not run (a syntax error, a name it does not define) is one line with its file and line.
"""
import ast
import difflib
import functools
import os
import sys
import traceback
import types


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
_TYPES = {t.__name__: t for t in (int, float, str, bool, list, tuple, dict)}  # what a knob's annotation may name


def _declared(node, where):
    """The types an annotation names (`int`, `int | float`) as a tuple."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _declared(node.left, where) + _declared(node.right, where)
    if isinstance(node, ast.Name) and node.id in _TYPES:
        return (_TYPES[node.id],)
    raise SystemExit(f"{where}: the annotation {ast.unparse(node)!r} names no type configurator checks; fix: one or "
                     f"more of {' | '.join(_TYPES)}")


@functools.lru_cache(maxsize=1)
def stage_knobs():
    """{stage file: {knob: its declared types (a tuple) or None}} of every stage in STAGE_FILES: the top-level
    lowercase assignments before its first def, read with ast (an early stage cannot import the later ones)."""
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
                out[name][target.id] = (_declared(node.annotation, f'{name} line {node.lineno}')
                                        if isinstance(node, ast.AnnAssign) else None)
    return out


def declared_type(key):
    """The types a knob whose default is None takes, as its stage declares them (the same name means the same thing in
    every stage); None where no stage declares one."""
    found = [t[key] for t in stage_knobs().values() if t.get(key)]
    return tuple(dict.fromkeys(x for t in found for x in t)) or None


def _type_name(types):
    return ' or '.join(t.__name__ for t in types)


def _a(types):
    """'an int', 'a str or list'."""
    return ('an ' if types[0] is int else 'a ') + _type_name(types)


def _fix(key, value, source):
    """How to set key where source set it: on the command line, or in the config file named."""
    on_line = source == 'command line' or not source.endswith('.py')
    return f'--{key}={value}' if on_line else f'{key} = {value} in {source}'


def _check_declared(key, value, types, source):
    """value for a knob whose default is None: None or one of its declared types (an int where float is declared; a
    list for a tuple and back, converted to the declared one; 'true' / 'false' where bool is)."""
    seq = [t for t in types if t in (list, tuple)]
    if bool in types and isinstance(value, str) and value.lower() in ('true', 'false'):
        return value.lower() == 'true'
    if isinstance(value, (list, tuple)) and seq:
        return value if type(value) in seq else seq[0](value)
    if isinstance(value, bool) and bool not in types or not isinstance(value, types) and not (
            float in types and isinstance(value, int) and not isinstance(value, bool)):
        fix = _fix(key, f'<{_type_name(types)}>', source)
        raise SystemExit(f"config error ({source}): {key}={value!r} is {_a((type(value),))}, but {key} takes "
                         f"{_a(types)} (default None); fix: {fix}, or leave it unset")
    return value


def _check_type(key, value, default, source):
    if value is None:
        return value
    if default is None:
        types = declared_type(key)
        return value if types is None else _check_declared(key, value, types, source)
    if isinstance(default, bool):
        if isinstance(value, str) and value.lower() in ('true', 'false', '1', '0'):
            return value.lower() in ('true', '1')
        if isinstance(value, int) and value in (0, 1) and not isinstance(value, bool):
            return bool(value)
        if not isinstance(value, bool):
            raise SystemExit(f"config error ({source}): {key}={value!r} must be True or False; fix: "
                             f"{_fix(key, 'True', source)} (or False)")
        return value
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)):
        return type(default)(value)
    if type(value) is not type(default):
        fix = _fix(key, f'<{type(default).__name__}>', source)
        raise SystemExit(f"config error ({source}): {key}={value!r} is {_a((type(value),))}, but {key} takes "
                         f"{_a((type(default),))} (default {default!r}); fix: {fix}")
    return value


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
        raise SystemExit(f"config error: config file '{path}' not found; fix: pass a path like config/demo.py")
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
    left to the stage that owns it (stage_knobs); a key no stage knows is an error."""
    mine = dict(defaults) if defaults is not None else knobs(g)
    files = [a for a in argv if not a.startswith('--')]
    flags = [a for a in argv if a.startswith('--')]
    for arg in files:
        for k, v in read_config_file(arg).items():
            if k in mine:
                g[k] = _check_type(k, v, mine[k], arg)
            elif not any(k in ks for ks in stage_knobs().values()):
                _unknown(k, set(mine).union(*stage_knobs().values()), arg)
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
    with that one line instead of a traceback; anything else is a bug and keeps its traceback."""
    try:
        return run(config)
    except (ValueError, FileNotFoundError) as e:
        if 'fix:' not in str(e):
            raise
        raise SystemExit(f'{name}: {e}') from None
