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
# Amended 2026-11-29, while samples 8-15 were being extracted and before any x16 verifier was trained: the volume
# config fixes for every table the state variant chosen on validation (among hsrm_mean, hsrm_l12, hsrm_l12_mean, its
# rule) and stepfeat_only beside hsrm, each with its weighted vote, and 3 validation draws; this file lacked them.
# Added: hsrm_mean_x16, hsrm_l12_x16, hsrm_l12_mean_x16, stepfeat_only_x16, and the draws. hsrm_k1000 and hsrm_k2000
# are the same runs as the K = 2,000 table's of the same draw (same config, same data: train.py skips a finished run
# whose config and data are the same), so each draw links them from there instead of training them again:
#   for v in 42 43 44; do k=out/gsm8k_qwen05_k2000$([ $v = 42 ] || echo _v$v); o=out/gsm8k_qwen05_s16t$([ $v = 42 ] \
#     || echo _v$v); mkdir -p $o/curve/K500 && ln -sfn $PWD/out/gsm8k_qwen05/train $o/train && ln -sfn \
#     $PWD/out/gsm8k_qwen05/eval $o/eval && for a in hsrm_k1000 hsrm_k2000; do [ -d $o/curve/K500/$a ] \
#     || [ ! -d $k/curve/K500/$a ] || cp -al $k/curve/K500/$a $o/curve/K500/; done && python -m studies.curve \
#     config/gsm8k_qwen05.py config/gsm8k_qwen05_s16.py --out_dir=$o --val_seed=$v --threads=1 || break; done
# Amended 2026-11-30 (the command only, before cuts 43 and 44 ran): where the K = 2,000 cut's runs are not on the disk
# (lost with out/ on 2026-11-29, RESULTS), the loop no longer stops at the link: studies.curve trains hsrm_k1000 and
# hsrm_k2000 in place, the same config and data.
# The three cuts side by side (HSRM here is hsrm_x16; item 5 first):
#   python -m studies.cuts --reports="['out/gsm8k_qwen05_s16t/curve.json', 'out/gsm8k_qwen05_s16t_v43/curve.json', \
#     'out/gsm8k_qwen05_s16t_v44/curve.json']" --hsrm=hsrm_x16 --chosen_among="['hsrm_mean_x16', 'hsrm_l12_x16', \
#     'hsrm_l12_mean_x16']" --base=stepfeat_only_x16 --previous=hsrm_k1000 --more_pairs="[('hsrm_k2000', 'hsrm_x16'), \
#     ('hsrm_k2000', 'hsrm_x16_steps')]" --out=assets/cuts_gsm8k_qwen05_s16
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
            'hsrm_x16_steps': {'verifier_layers': [-1], 'train_dirs': _x16, 'epochs': 40},
            'hsrm_mean_x16': {'verifier_layers': [-1], 'step_read': 'mean', 'train_dirs': _x16},
            'hsrm_l12_x16': {'verifier_layers': [12], 'train_dirs': _x16},
            'hsrm_l12_mean_x16': {'verifier_layers': [12], 'step_read': 'mean', 'train_dirs': _x16},
            'stepfeat_only_x16': {'verifier_layers': [], 'step_features': True, 'train_dirs': _x16}}
pairs = [('hsrm_k2000', 'hsrm_x16'), ('hsrm_x16', 'hsrm_k1000'), ('hsrm_k2000', 'hsrm_x16_steps'),
         ('hsrm_x16', 'stepfeat_only_x16')]
