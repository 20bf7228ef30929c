# Problems or samples (issue 44 item 3): at a fixed budget of 8,000 extracted training candidates on synthetic level 2
# (grouped split: train indices 0-1224, eval 1225-1898 share no operand multiset), does HSRM need more problems or more
# samples of each? Three extractions of the train split, each 8,000 candidates, one shared eval split (674 x 8):
#   this out_dir:             problems 0-999 x 8   (+ the eval split)   sampling seed 1337
#   out/samples_synth2_x32:   problems 0-249 x 32                       sampling seed 1338
#   out/samples_synth2_x64:   problems 0-124 x 64                       sampling seed 1339
# (the order runs round-robin over the 110 training multisets, so 0-124 already covers all of them; each extraction
# has its own sampling seed, so no two share random draws). curve.py trains each variant on its own extraction
# (train_dirs) at every K its extraction holds, K counting training + validation problems (cut 80/20 by multiset),
# and pairs the cells of equal cost over the same eval problems and seeds.
#   python extract.py config/samples_synth2.py && python label.py config/samples_synth2.py
#   for n in 32 64; do python extract.py config/samples_synth2.py --out_dir=out/samples_synth2_x$n --eval_range=None \
#     --train_range="(0, $((8000 / n - 1)))" --n_train_samples=$n --seed=$((1337 + n / 32)) \
#     && python label.py config/samples_synth2.py --out_dir=out/samples_synth2_x$n; done
#   python curve.py config/samples_synth2.py --threads=1
# As run 2026-11-26 (RESULTS.md "Problems or samples"; extraction 31 + 33 + 63 minutes on 2 cores), the runs in two
# parts at once, then the call that reports (it reuses every run):
#   python curve.py config/samples_synth2.py --sizes="[1000]" --variants="{'hsrm_x8': {}}" --pairs="[]" --threads=1 &
#   python curve.py config/samples_synth2.py --sizes="[125, 250]" --pairs="[]" --threads=1; wait
out_dir = 'out/samples_synth2'
model = 'smollm2'
dataset = 'synth'
synth_level = 2
train_range = (0, 999)
eval_range = (1225, 1898)
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 64  # config/curve_synth2.py's sampling
temperature = 0.8
top_p = 0.95
batch_size = 128
layers = [-1]  # the paper's read only: a third of the disk and time of curve_synth2's four layers
# curve.py: K = 125, 250, 1,000 problems; every variant at every K its extraction holds (x64: 125; x32: 125, 250)
sizes = [125, 250, 1000]
variants = {'hsrm_x8': {}, 'hsrm_x32': {'train_dirs': ['out/samples_synth2_x32/train']},
            'hsrm_x64': {'train_dirs': ['out/samples_synth2_x64/train']}}
seeds = [42, 123, 456]
train_overrides = {'epochs': 20, 'eval_interval': 25}
pairs = [('hsrm_x32@250', 'hsrm_x8@1000'), ('hsrm_x64@125', 'hsrm_x8@1000'), ('hsrm_x64@125', 'hsrm_x32@250'),
         ('hsrm_x64@125', 'hsrm_x8@125'), ('hsrm_x32@250', 'hsrm_x8@250')]  # equal cost; then the same problems, more samples
