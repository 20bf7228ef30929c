# The data-need curve: how HSRM and the free scorers grow with the number of training problems.
# Synthetic level 2 (1,899 distinct questions on 165 operand multisets), split by multiset (tasks.py): train
# indices 0-1224 x 8 (110 multisets), eval 1225-1898 x 8 (674 problems on the 55 others: no evaluation question
# shares its numbers with a training one). K = max_train_problems draws nested subsets of the training split (each
# then cut 80/20 by multiset into train / validation), so K = 1225 trains on about 980 problems.
out_dir = 'out/curve_synth2'
model = 'smollm2'
dataset = 'synth'
synth_level = 2
train_range = (0, 1224)
eval_range = (1225, 1898)
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 64
temperature = 0.8
top_p = 0.95
batch_size = 128
layers = [-1, -2, -3, -4]
verifier_layers = [-1]
# curve.py: sizes K (training + validation problems; K = 1225 trains on about 980), variants, 3 seeds, epochs
sizes = [80, 160, 320, 640, 1225]
variants = {'hsrm': {'verifier_layers': [-1]}, 'hsrm_top4': {'verifier_layers': [-1, -2, -3, -4]},
            'residual': {'residual': 'auto', 'verifier_layers': [-1]}}
seeds = [42, 123, 456]
train_overrides = {'epochs': 20, 'eval_interval': 25}
