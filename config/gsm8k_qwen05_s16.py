# The volume issue's 16-sample arm (config/gsm8k_qwen05_volume.py fixes its place in the headline: problems against
# samples at 16,000 candidates): the K = 1,000 problems (test 0-499, train.jsonl 0-499), samples 8-15 added. Each
# 8-sample split is copied as hard links (its files stay as they are: a grown problem is written as a new file) and
# grown to 16 by extract.py, which samples only samples 8-15 (first_sample: the counter draws of (seed, problem,
# sample) leave 0-7 as they were). Committed before any of its candidates was sampled.
#   for d in gsm8k_qwen05 gsm8k_qwen05_train2; do mkdir -p out/${d}_s16 && cp -al out/$d/train out/${d}_s16/train; done
#   python extract.py config/gsm8k_qwen05.py --eval_range=None --out_dir=out/gsm8k_qwen05_s16 --n_train_samples=16 \
#     && python label.py config/gsm8k_qwen05.py --eval_range=None --out_dir=out/gsm8k_qwen05_s16
#   a="config/gsm8k_qwen05.py config/gsm8k_qwen05_train2.py --out_dir=out/gsm8k_qwen05_train2_s16"
#   python extract.py $a --n_train_samples=16 && python label.py $a
# The table (after the K = 2,000 one): 1,000 x 16 against 2,000 x 8, the same 16,000 training-side candidates, paired
# over the cell's 819 evaluation problems and 3 seeds. Steps follow problems (the curve's rule: 20 passes over the
# problems with both labels), so x16 trains about half K = 2,000's steps; hsrm_x16_steps trains as many as K = 2,000
# (40 passes). The free side reads the 8-sample K = 2,000 cut, as config/gsm8k_qwen05_k2000.py's.
#   mkdir -p out/gsm8k_qwen05_s16t && ln -sfn $PWD/out/gsm8k_qwen05/train out/gsm8k_qwen05_s16t/train \
#     && ln -sfn $PWD/out/gsm8k_qwen05/eval out/gsm8k_qwen05_s16t/eval
#   python -m studies.curve config/gsm8k_qwen05.py config/gsm8k_qwen05_s16.py --threads=1
# Headline 5 of the volume config: hsrm_k2000 - hsrm_x16 (Bo8, AUROC); then hsrm_x16 - hsrm_k1000 (what 8 more
# samples of the same problems add) and hsrm_k2000 - hsrm_x16_steps.
out_dir = 'out/gsm8k_qwen05_s16t'
sizes = [500]
_k1000 = ['out/gsm8k_qwen05/train', 'out/gsm8k_qwen05_train2/train']
_k2000 = _k1000 + ['out/gsm8k_qwen05_vol1/train', 'out/gsm8k_qwen05_vol2/train']
_x16 = ['out/gsm8k_qwen05_s16/train', 'out/gsm8k_qwen05_train2_s16/train']
free_dirs = _k2000
answer_agreement = True
variants = {'hsrm_k1000': {'verifier_layers': [-1], 'train_dirs': _k1000},
            'hsrm_k2000': {'verifier_layers': [-1], 'train_dirs': _k2000},
            'hsrm_x16': {'verifier_layers': [-1], 'train_dirs': _x16},
            'hsrm_x16_steps': {'verifier_layers': [-1], 'train_dirs': _x16, 'epochs': 40}}
pairs = [('hsrm_k2000', 'hsrm_x16'), ('hsrm_x16', 'hsrm_k1000'), ('hsrm_k2000', 'hsrm_x16_steps')]
