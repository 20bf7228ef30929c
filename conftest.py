"""The fixtures test_all.py and studies/test_studies.py share (pytest hands them to any test here that names them);
their plain helpers are in testkit.py."""
import pytest
import torch

import capture
import evaluate as E
import extract
from capture import step_table
from generator import load_generator
from tasks import load_problems
import train as T
from testkit import SAMPLE_TRAIN, plant_labels, tiny_model, tiny_tokenizer


@pytest.fixture
def one_thread_eval():
    # the machine's 2 cores are shared: one torch thread is 3x faster here than two fighting for them
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope='module')
def sample_run(tmp_path_factory):
    """A tiny run as the main job leaves it: a random Qwen3 saved as a folder (the generator), a training split (20
    problems x 8) and an evaluation split (6 x 4) extracted by extract.run_split with the config.json extract.py
    writes, labels planted by the token ids (the grader would mark every candidate of a random model wrong), and two
    trained HSRM seeds. -> (out_dir, generator, tokenizer)"""
    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = str(tmp_path_factory.mktemp('sample') / 'run')
    tok = tiny_tokenizer()
    tiny_model('qwen3', len(tok), newline_ids=step_table(tok).nonzero()[:, 0]).save_pretrained(f'{out}/gen')
    tok.save_pretrained(f'{out}/gen')
    model, tok = load_generator(f'{out}/gen', dtype='float32')
    cfg = {**extract.DEFAULTS, 'out_dir': out, 'model': f'{out}/gen', 'max_new_tokens': 16, 'batch_size': 16,
           'weights_dtype': 'float32', 'train_range': (0, 19), 'eval_range': (1225, 1230),  # the ranges extracted
           'temperature': 0.8, 'top_p': 0.95, 'd_gen': 64, 'num_hidden_layers': 3, 'has_chat_template': False,
           'step_rule': capture.STEP_RULE}
    for split, (lo, hi), n in (('train', (0, 19), 8), ('eval', (1225, 1230), 4)):  # the level's evaluation part
        c = {**cfg, 'split': split, 'n_samples': n}
        extract.atomic_write_json(c, f'{out}/{split}/config.json')
        extract.run_split(split, load_problems('synth', lo, hi), n, c, model, tok, step_table(tok))
        plant_labels(f'{out}/{split}')
    T.run({**T.DEFAULTS, **SAMPLE_TRAIN, 'out_dir': out})
    yield out, model, tok
    torch.set_num_threads(n_threads)


@pytest.fixture(scope='module')
def pools_run(sample_run):
    """sample_run's table, written by evaluate.py with its pools: (out_dir, results dict)."""
    out = sample_run[0]
    return out, E.run({'out_dir': out, 'n_eval': 4, 'n_scaling': [2, 4], 'plots': False, 'n_boot': 200})
