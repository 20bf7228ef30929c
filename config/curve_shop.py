# The data-need curve on a GSM8K-style word family: shop (tasks.py; 1,749 distinct problems, grouped by numbers plus
# answer: no evaluation question has a training one's numbers and answer, but 346 of the 499 use a training question's
# numbers in another arrangement, with another answer; curve.py reports them apart). Train indices 0-1249 x 8, eval
# 1250-1748 x 8 (every problem of the family). K = max_train_problems draws nested subsets of the training split (each
# then cut 80/20 by group into train / validation), so K = 1250 trains on 1,000 problems. Its training range holds
# config/words.py's shop evaluation questions (1000-1143): never score its verifiers on out/words_shop/eval.
#   python extract.py config/curve_shop.py && python label.py config/curve_shop.py
#   python -m studies.curve config/curve_shop.py --threads=1
# two more validation draws on the same extraction (as for config/curve_synth2.py), without the two controls:
#   for v in 43 44; do mkdir -p out/curve_shop_v$v && ln -sfn $PWD/out/curve_shop/train out/curve_shop_v$v/train \
#     && ln -sfn $PWD/out/curve_shop/eval out/curve_shop_v$v/eval && python -m studies.curve config/curve_shop.py \
#     --out_dir=out/curve_shop_v$v --val_seed=$v --threads=1 --variants="{'hsrm': {'verifier_layers': [-1]}, \
#     'residual': {'residual': 'auto', 'verifier_layers': [-1]}, 'hsrm_stepfeat': {'verifier_layers': [-1], \
#     'step_features': True}}"; done
out_dir = 'out/curve_shop'
model = 'smollm2'
dataset = 'words'
word_family = 'shop'
train_range = (0, 1249)
eval_range = (1250, 1748)
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 128
temperature = 0.8
top_p = 0.95
batch_size = 128
layers = [-1, -2, -3, -4]
verifier_layers = [-1]
sizes = [80, 160, 320, 640, 1250]
variants = {'hsrm': {'verifier_layers': [-1]}, 'residual': {'residual': 'auto', 'verifier_layers': [-1]},
            'hsrm_steps1000': {'verifier_layers': [-1], 'epochs': None, 'max_iters': 1000},
            'hsrm_stepfeat': {'verifier_layers': [-1], 'step_features': True},  # the sweep's pick
                                                                                # (curve_shop_variants.py)
            'stepfeat_only': {'verifier_layers': [], 'step_features': True}}    # its control: the step features, no
                                                                                # states
seeds = [42, 123, 456]
train_overrides = {'epochs': 20, 'eval_interval': 25}
