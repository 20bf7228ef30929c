import json
import os
import subprocess
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
import extract  # noqa: E402
from extract import (build_prompt, load_generator, load_problems, newline_table, reencode,  # noqa: E402
                     sample_with_capture, step_positions, synth_problem)

DATA = os.path.join(REPO, '..', 'shared', 'data')

TEXT = ("Step 1: 23 + 15 = 38.\nStep 2: 38 - 7 = 31.\n\nThe answer is 31.\n"
        "First, we compute the total:\n\n12 * 3 = 36\nSo the answer is 36.\n") * 20


def tiny_tokenizer():
    """A real byte-level BPE tokenizer trained here on math-like text (small vocab, so that a random
    model emits newline tokens often)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator([TEXT], trainers.BpeTrainer(vocab_size=300, special_tokens=['<eos>'],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=t, eos_token='<eos>', pad_token='<eos>')


def tiny_model(kind, vocab):
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config
    torch.manual_seed(0)
    args = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=512, eos_token_id=0, pad_token_id=0)
    cfg = Qwen3Config(head_dim=16, **args) if kind == 'qwen3' else LlamaConfig(**args)
    return AutoModelForCausalLM.from_config(cfg).eval()


@pytest.fixture(scope='module')
def smollm():
    return load_generator('smollm2')


def test_step_positions_rule():
    # tokens: a b \n c \n \n d <- the run of two newlines is one boundary; the last token closes the final step
    assert step_positions([0, 0, 1, 0, 1, 1, 0]) == [1, 3, 6]
    assert step_positions([1, 0, 0]) == [2]  # a leading newline closes nothing
    assert step_positions([0, 0, 1]) == [1, 2]  # a trailing newline: its own state is the final one
    assert step_positions([0]) == [0]
    many = step_positions([0, 1] * 150)  # 150 boundaries + the final token: the last 100 are kept
    assert len(many) == 100 and many[-1] == 299 and many[0] == 2 * 51 and len(step_positions([0, 1] * 150, max_steps=7)) == 7
    assert step_positions([0, 1, 0, 1, 0, 1, 0], think_end=3) == [4, 6]


def test_newline_table_uses_decoded_text(smollm):
    _, tok = smollm
    nl = newline_table(tok)
    assert nl.sum() > 100  # SmolLM2 has 129 tokens containing a newline, merged in many forms
    ids = tok('x.\n\ny:\nz', add_special_tokens=False).input_ids
    assert any(nl[i] for i in ids) and all(nl[i] == ('\n' in tok.decode([i])) for i in ids)


def _check_against_teacher_forcing(model, tok, prompts, n, layers, max_new_tokens=40, batched_reencode=True):
    """Sample (batched, left-padded prompts), then compare with teacher-forced passes: one per candidate
    (unbatched) and one over all candidates of all prompts at once (ragged, left-padded)."""
    nl = newline_table(tok)
    res = sample_with_capture(model, tok, prompts, n, layers, max_new_tokens, temperature=1.0, top_p=1.0, seed=0, nl=nl)
    flat = [(p, c) for p, cands in zip(prompts, res) for c in cands]
    ids, fins = [c['token_ids'].tolist() for _, c in flat], [c['finish'] for _, c in flat]
    refs = [reencode(model, tok, [p], [i], layers, [f], nl)[0] for (p, _), i, f in zip(flat, ids, fins)]
    pairs = list(zip([c for _, c in flat], refs))
    if batched_reencode:
        pairs += list(zip([c for _, c in flat], reencode(model, tok, [p for p, _ in flat], ids, layers, fins, nl)))
    n_steps = 0
    for c, r in pairs:
        assert c['step_pos'].tolist() == r['step_pos'].tolist()
        assert c['states'].dtype == torch.float16 and c['states'].shape[-1] == len(layers) * model.config.hidden_size
        torch.testing.assert_close(c['states'].float(), r['states'].float(), rtol=4e-3, atol=4e-3)
        torch.testing.assert_close(c['logprobs'], r['logprobs'], rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(c['entropies'], r['entropies'], rtol=1e-3, atol=1e-3)
        assert c['step_pos'][-1] == len(c['token_ids']) - 1  # the final token closes the last step
        n_steps += len(c['step_pos'])
    return res, n_steps


@pytest.mark.parametrize('kind', ['qwen3', 'llama'])
def test_capture_equals_teacher_forcing_tiny(kind):
    tok = tiny_tokenizer()
    model = tiny_model(kind, len(tok))
    prompts = ['Step 1: 23 + 15 = 38.\n', 'First, we compute the total:\n\n12 * 3 = 36\nSo']  # different lengths
    res, n_steps = _check_against_teacher_forcing(model, tok, prompts, 3, [-1, 1], max_new_tokens=48)
    assert n_steps > len(prompts) * 3  # boundaries inside completions were exercised, not just final tokens
    # unbatched: one prompt, one sample
    _check_against_teacher_forcing(model, tok, prompts[1:], 1, [-1], max_new_tokens=48, batched_reencode=False)


def test_capture_equals_teacher_forcing_embedded(smollm):
    model, tok = smollm
    probs = [synth_problem(i, 2, 1337) for i in range(2)] + [load_problems('synth', 5, 5, synth_level=3)[0]]
    prompts = [build_prompt(tok, p, None, False) for p in probs]
    res, n_steps = _check_against_teacher_forcing(model, tok, prompts, 2, [-1, -4], max_new_tokens=40)
    assert n_steps >= 2 * 3 * 2
    _check_against_teacher_forcing(model, tok, prompts[:1], 1, [-1], max_new_tokens=40, batched_reencode=False)


def test_length_limit_and_finish(smollm):
    model, tok = smollm
    prompt = build_prompt(tok, synth_problem(0, 2, 1337), None, False)
    c = sample_with_capture(model, tok, [prompt], 2, [-1], max_new_tokens=5, seed=1)[0]
    assert all(x['finish'] == 'length' and len(x['token_ids']) == 5 and x['step_pos'][-1] == 4 for x in c)


def test_loaders_on_shared_data():
    if not os.path.isdir(DATA):
        pytest.skip('../shared/data is not beside the checkout')
    g = load_problems('gsm8k', 0, 1, DATA)
    assert g[0]['gold'] == '18' and 'Janet' in g[0]['question']
    assert load_problems('math500', 0, 0, DATA)[0]['gold'] == '\\left( 3, \\frac{\\pi}{2} \\right)'
    a = load_problems('aime', 20, 89, DATA)
    assert len(a) == 70 and all(p['gold'].isdigit() for p in a)
    o = load_problems('olympiadbench', 150, 672, DATA)
    assert len(o) == 523 and isinstance(o[0]['gold'], list) and 'answer_type' in o[0]['meta']


def test_bad_input_errors(tmp_path):
    with pytest.raises(SystemExit, match='dataset=.*unknown'):
        load_problems('gsm9k', 0, 1, DATA)
    with pytest.raises(SystemExit, match='not found'):
        load_problems('gsm8k', 0, 1, str(tmp_path))
    bad = tmp_path / 'gsm8k'
    bad.mkdir()
    (bad / 'test.jsonl').write_text(json.dumps({'question': 'q', 'ans': '1'}) + '\n' + json.dumps({'question': ' ', 'answer': '#### 1'}) + '\n')
    with pytest.raises(SystemExit, match="lacks field 'answer'"):
        load_problems('gsm8k', 0, 0, str(tmp_path))
    with pytest.raises(SystemExit, match='empty question'):
        load_problems('gsm8k', 1, 1, str(tmp_path))
    with pytest.raises(SystemExit, match='does not fit'):
        load_problems('gsm8k', 0, 5, str(tmp_path))
    tok = tiny_tokenizer()
    with pytest.raises(SystemExit, match='layers=.*out of range'):
        extract.check_layers(tiny_model('llama', len(tok)), [-1, 7])
    with pytest.warns(UserWarning, match='no chat template'):
        build_prompt(tok, synth_problem(0, 2, 1), None, False, warn=[True])


def _run(*args):
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_extract_cli_resume_and_reencode(tmp_path):
    out = str(tmp_path / 'run')
    common = ['--train_range=(0,1)', '--eval_range=None', '--n_train_samples=2', '--max_new_tokens=24', f'--out_dir={out}']
    r = _run('extract.py', 'config/demo.py', *common)
    assert r.returncode == 0, r.stderr
    files = sorted(os.listdir(os.path.join(out, 'train', 'problems')))
    assert files == ['000000.pt', '000001.pt']
    cfg = json.load(open(os.path.join(out, 'train', 'config.json')))
    assert cfg['n_samples'] == 2 and cfg['d_gen'] == 576 and cfg['layers'] == [-1]
    p = torch.load(os.path.join(out, 'train', 'problems', files[0]), weights_only=True)
    assert p['key'] == '000000' and len(p['candidates']) == 2 and p['gold'] == synth_problem(0, 2, 1337)['gold']
    mtime = os.path.getmtime(os.path.join(out, 'train', 'problems', files[0]))
    # a re-run skips finished problems; a larger range only adds the new ones
    r = _run('extract.py', 'config/demo.py', *common[1:], '--train_range=(0,2)')
    assert r.returncode == 0 and '2 done already, 1 to go' in r.stdout, r.stdout + r.stderr
    assert os.path.getmtime(os.path.join(out, 'train', 'problems', files[0])) == mtime
    # another generator/layer setting in the same dir is refused
    r = _run('extract.py', 'config/demo.py', *common, '--layers=[-2]')
    assert r.returncode != 0 and 'layers' in r.stderr
    # re-encode the sampled pool from its text: same boundaries, same states
    pool = tmp_path / 'pool.jsonl'
    pool.write_text(''.join(json.dumps({'index': 0, 'text': c['text'], 'finish': c['finish']}) + '\n' for c in p['candidates']))
    out2 = str(tmp_path / 're')
    r = _run('extract.py', 'config/demo.py', '--mode=reencode', f'--candidates_file={pool}', '--train_range=(0,0)',
             '--eval_range=None', f'--out_dir={out2}')
    assert r.returncode == 0, r.stderr
    q = torch.load(os.path.join(out2, 'train', 'problems', '000000.pt'), weights_only=True)
    for a, b in zip(p['candidates'], q['candidates']):
        if a['token_ids'].tolist() == b['token_ids'].tolist():  # text round trip kept the tokenization
            torch.testing.assert_close(a['states'].float(), b['states'].float(), rtol=4e-3, atol=4e-3)
        assert a['text'] == b['text']


def test_config_errors():
    r = _run('extract.py', 'config/demo.py', '--n_sample=3')
    assert r.returncode != 0 and "unknown key 'n_sample'" in r.stderr and 'n_train_samples' in r.stderr
    r = _run('extract.py', '--temperature=hot')
    assert r.returncode != 0 and 'temperature' in r.stderr
    r = _run('extract.py', '--device=cuda', '--train_range=(0,0)', '--eval_range=None', '--out_dir=/tmp/never')
    if not torch.cuda.is_available():
        assert r.returncode != 0 and 'CUDA is not available' in r.stderr
