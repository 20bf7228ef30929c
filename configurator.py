"""
Config overrides, nanoGPT style: `python train.py config/gsm8k_1p7b.py --seed=123`. A stage starts with its knobs
(`name = default`; a None default declares its type: `epochs: int | float = None`) and runs `config =
configure(globals())` under __main__. Config files (Python assignments) stack left to right, then `--key=value`
(literal_eval, else the string), each checked against its knob's default and annotation; another stage's key is
checked as its owner takes it and left to it. Every error is one line naming the key, the value and the fix.
"""
import ast
import difflib
import functools
import importlib
import os
import shlex
import sys
import traceback
import types
import typing


class Knobs(dict):  # a stage's {knob: default}, with .types: {knob: its annotation} (what a None default takes)
    types = {}


def knobs(g):
    """The Knobs in g, a stage's globals right after its knobs: its lowercase names but modules, functions, classes."""
    out = Knobs({k: v for k, v in g.items() if not k.startswith('_') and k.islower() and not callable(v)
                 and not isinstance(v, types.ModuleType)})
    out.types = {k: t for k, t in g.get('__annotations__', {}).items() if k in out}
    return out


# every stage file, in pipeline order, then sample.py and the studies: their knobs are the keys a config file may set
STAGE_FILES = ('extract.py', 'label.py', 'train.py', 'baselines.py', 'evaluate.py', 'sample.py', 'studies/policy.py',
               'studies/steer.py', 'studies/transfer.py', 'studies/curve.py')
STEERS, NONE = 'studies/policy.py', type(None)  # STEERS runs extract.py or sample.py under its knobs (search, prune)
GIVEN = {}  # what the config files on this process's command line set (configure fills it): a fix names these values


@functools.lru_cache(maxsize=1)
def stage_knobs():
    """{stage file: its Knobs}, imported here, not at the top: a stage imports configurator (and runs nothing)."""
    return {f: importlib.import_module(f[:-3].replace('/', '.')).DEFAULTS for f in STAGE_FILES}


def _name(*ts, a=0):  # 'int or float', 'list[int]'; a=1: 'an int'
    return ('an ' if ts[0] is int else 'a ') * a + ' or '.join('None' if t is NONE else str(t) if typing.get_origin(t)
                                                                else t.__name__ for t in ts)


def _is(x, t):  # an int is a float, a bool is no number
    return not (t in (int, float) and isinstance(x, bool)) and isinstance(x, (int, float) if t is float else t)


def _fix(key, value, source, quote=False):  # how to set key where source set it: command line or config file
    on_line = source == 'command line' or not source.endswith('.py')
    return f'--{key}={shlex.quote(value) if quote else value}' if on_line else f'{key} = {value} in {source}'


def _check_type(key, value, default, source, declared=None):
    """value as the knob of this default and annotation (declared) takes it, else SystemExit naming the key, the value
    and the fix; a list's elements as declared (list[int]) or as the default's, a tuple's per position, a range in order
    (*_range)."""
    declared = typing.get_args(declared) if isinstance(declared, types.UnionType) else (declared,) if declared else ()
    if value is None and (default is None or NONE in declared) or default is None and not declared:
        return value
    ts = (type(default),) if default is not None else tuple(t for t in declared if t is not NONE)
    plain = tuple(typing.get_origin(t) or t for t in ts)
    seq = [t for t in plain if t in (list, tuple)]
    if bool in plain and (isinstance(value, str) and value.lower() in ('true', 'false', '1', '0')
                          or type(value) is int and value in (0, 1)):
        value = value.lower() in ('true', '1') if isinstance(value, str) else bool(value)
    elif float in plain and int not in plain and type(value) is int:
        value = float(value)
    elif isinstance(value, (list, tuple)) and seq and type(value) not in seq:
        value = seq[0](value)
    if value is None or not any(_is(value, t) for t in plain):
        if isinstance(default, bool) and value is not None:
            raise SystemExit(f"config error ({source}): {key}={value!r} must be True or False; fix: "
                             f"{_fix(key, 'True', source)} (or False)")
        what = '' if value is None else f' is {_name(type(value), a=1)}'
        raise SystemExit(f"config error ({source}): {key}={value!r}{what}, but {key} takes {_name(*ts, a=1)} (default "
                         f"{default!r}); fix: {_fix(key, f'<{_name(*ts)}>', source)}"
                         + (', or leave it unset' if default is None or value is None else ''))
    if value == '' and key.endswith('_dir') and default:  # '' is the current folder: a run's files would land there
        raise SystemExit(f"config error ({source}): {key}='' is empty, no folder; fix: "
                         f"{_fix(key, GIVEN.get(key) or default, source)}")
    if not isinstance(value, (list, tuple)):
        return value
    spec = next((typing.get_args(t) for t in declared if typing.get_origin(t) is type(value)), None)
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
                raise SystemExit(f"config error ({source}): {key}={value!r} holds {x!r}, {_name(type(x), a=1)}, but "
                                 f"{key} takes {what}; fix: {_fix(key, form, source, quote=True)}")
    if key.endswith('_range') and len(value) == 2 and all(_is(x, int) for x in value) and value[0] > value[1]:
        raise SystemExit(f"config error ({source}): {key}={value!r} is reversed (an inclusive range is (lo, hi)); fix: "
                         f"{_fix(key, repr(type(value)(value[::-1])), source, quote=True)}")
    return value


def check_key(key, value, mine, source, others=True):
    """(value as the stage whose Knobs are mine takes key, []), or where key is another stage's knob (others: look),
    (value, the stages that own it), checked as each takes it; a key none knows names the closest known ones."""
    if key in mine:
        return _check_type(key, value, mine[key], source, getattr(mine, 'types', {}).get(key)), []
    owners = [s for s, ks in stage_knobs().items() if key in ks] if others else []
    if not owners:
        close = difflib.get_close_matches(key, sorted(set(mine).union(*stage_knobs().values()) if others else mine),
                                          n=3, cutoff=0.5)
        raise SystemExit(f"config error ({source}): unknown key '{key}'; " + (
            f"did you mean {', '.join(close)}?" if close else f"known keys: {', '.join(sorted(mine))}"))
    for s in owners:
        _check_type(key, value, stage_knobs()[s][key], source, stage_knobs()[s].types.get(key))
    return value, owners


def check_keys(d, defaults, source):
    """A dict knob of another stage's knobs (defaults: its Knobs; the studies' train_overrides) checked as keys are."""
    if not isinstance(d, dict):
        raise SystemExit(f"config error ({source}): {d!r} must be a dict of knobs; fix: e.g. {{'max_iters': 300}}")
    for k, v in d.items():
        check_key(k, v, defaults, source, others=False)


def read_config_file(path):
    """{key: value} a config file assigns but _names, functions, modules; missing or failing: one line, the fix."""
    if not os.path.isfile(path):  # the nearest config files of its folder (misspelt too: the project's config/)
        folder = next(f for f in (os.path.dirname(path), os.path.relpath(os.path.join(os.path.dirname(
            os.path.abspath(__file__)), 'config'))) if os.path.isdir(f or '.'))
        near = [os.path.join(folder, f) for f in difflib.get_close_matches(os.path.basename(path), sorted(
            f for f in os.listdir(folder or '.') if f.endswith('.py')), n=3, cutoff=0.7)]
        raise SystemExit(f"config error: config file '{path}' not found; " + (
            f"did you mean {', '.join(near)}? fix: {near[0]}" if near else "fix: pass a path like config/demo.py"))
    ns, fix = {}, "fix: plain Python assignments, one `key = value` a line"
    try:
        with open(path, 'rb') as f:
            exec(compile(f.read(), path, 'exec'), {}, ns)  # a config file is plain Python assignments
    except SyntaxError as e:
        raise SystemExit(f"config error ({path}, line {e.lineno}): {e.msg}: {(e.text or '').strip()!r}; {fix}") from e
    except Exception as e:  # noqa: BLE001 (anything the file's own code raises is the file's error)
        line = next((fr.lineno for fr in reversed(traceback.extract_tb(e.__traceback__)) if fr.filename == path), '?')
        raise SystemExit(f"config error ({path}, line {line}): {type(e).__name__}: {e}; {fix}") from None
    return {k: v for k, v in ns.items() if not k.startswith('_') and not callable(v) and type(v).__name__ != 'module'}


def apply_config(g, argv, defaults=None):
    """Apply config files, then --key=value overrides, in argv to the dict g; returns the config dict. defaults: the
    Knobs of the knobs g holds (None: knobs(g)). Another stage's key is checked and left to it (a flag: with a note)."""
    mine = knobs(g) if defaults is None else defaults
    for arg in [a for a in argv if not a.startswith('--')]:
        for k, v in read_config_file(arg).items():
            v, owners = check_key(k, v, mine, arg)
            g.update({} if owners else {k: v})
    for arg in [a for a in argv if a.startswith('--')]:
        key, eq, val = arg[2:].partition('=')
        if not eq:
            raise SystemExit(f"config error: '{arg}' must look like --key=value")
        try:
            value = ast.literal_eval(val)
        except (SyntaxError, ValueError):
            value = val  # a bare string such as --model=Qwen/Qwen3-1.7B
        value, owners = check_key(key, value, mine, 'command line')
        g.update({} if owners else {key: value})
        me = os.path.relpath(sys.argv[0], os.path.dirname(__file__)) if sys.argv[0].endswith('.py') else 'this stage'
        if 'train.py' in owners and 'train_overrides' in mine:  # a study's runs take train.py's knobs from that dict
            raise SystemExit(f"config error (command line): --{key} is train.py's knob, which {me} takes in its "
                             f"train_overrides; fix: --train_overrides=\"{ {**g['train_overrides'], key: value} }\"")
        if owners == [STEERS] and me in ('extract.py', 'sample.py'):  # what it asks of this stage needs the policy's
            raise SystemExit(f"config error (command line): --{key} is not a knob of {me}, it is {STEERS}'s, which "
                             f"steers its sampling; fix: python -m studies.policy {me} <config> --{key}=...")
        if owners:
            print(f"note: --{key} is {' and '.join(owners)}'s knob; {me} does not read it")
    return {k: g[k] for k in mine}


def split_argv(argv, own, *others):
    """(argv less the flags only others (Knobs) take, each other's config from argv): for a stage that also runs or
    reads part of another (baselines.py trains as train.py; evaluate.py and sample.py find train.py's runs)."""
    key, theirs = lambda a: a[2:].split('=', 1)[0] if a.startswith('--') else None, set().union(*others) - set(own)
    return ([a for a in argv if key(a) not in theirs], *(apply_config(dict(o), [
        a for a in argv if key(a) is None or key(a) in o], o) for o in others))


def configure(g, argv=None, defaults=None):
    """The stage's config: its knobs in g (defaults: their Knobs; None: knobs(g)) overridden by sys.argv (config files
    and --key=value). GIVEN then holds what the config files set, for the fixes that name a value."""
    argv = sys.argv[1:] if argv is None else argv
    GIVEN.clear()
    GIVEN.update({k: v for a in argv if not a.startswith('--') for k, v in read_config_file(a).items()})
    return apply_config(g, argv, defaults)
