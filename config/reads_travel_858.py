# Where a step is read on travel at the family's maximum (issue 44 item 2 at about 1,000 training problems): every
# training question below travel's numbers boundary, 0-857 x 8 (K = 858, about 686 train after the 80/20 grouped cut),
# scored on config/reads_travel.py's evaluation split (858-1107 x 8, the same candidates). Stacked on
# config/curve_shop.py and config/reads_travel.py: the same sampling, step kinds and split. Four arms: boundary
# (the paper's), mean, the mean read with step features, the features-only control. The least-likely-token read, which
# added nothing beyond the interval at K = 480, ran in draw 42 only (--variants with "'hsrm_least': {'step_read':
# 'least'}" added, pair ('hsrm_least', 'hsrm')), dropped from the other draws for time.
# Indices 0-479 are config/reads_travel.py's own training problems: an extraction is seeded per batch, so extending
# a copy of out/reads_travel (run 2026-11-26 as `cp -al out/reads_travel/{train,eval} out/reads_travel_858/`, then
# the commands below: 378 more problems, 19 minutes on 2 cores) samples exactly what a fresh run into an empty dir
# would.
#   python extract.py config/curve_shop.py config/reads_travel.py config/reads_travel_858.py
#   python label.py config/curve_shop.py config/reads_travel.py config/reads_travel_858.py
#   python -m studies.curve config/curve_shop.py config/reads_travel.py config/reads_travel_858.py --threads=1
# two more validation draws on the same extraction:
#   for v in 43 44; do mkdir -p out/reads_travel_858_v$v && ln -sfn $PWD/out/reads_travel_858/train \
#     out/reads_travel_858_v$v/train && ln -sfn $PWD/out/reads_travel_858/eval out/reads_travel_858_v$v/eval \
#     && python -m studies.curve config/curve_shop.py config/reads_travel.py config/reads_travel_858.py \
#     --out_dir=out/reads_travel_858_v$v --val_seed=$v --threads=1; done
out_dir = 'out/reads_travel_858'
train_range = (0, 857)
sizes = [858]
variants = {'hsrm': {}, 'hsrm_mean': {'step_read': 'mean'},
            'mean_stepfeat': {'step_read': 'mean', 'step_features': True},  # the best read of K = 480 with the features
            'stepfeat_only': {'verifier_layers': [], 'step_features': True}}  # the control: the features, no states
pairs = [('hsrm_mean', 'hsrm'), ('mean_stepfeat', 'hsrm'), ('mean_stepfeat', 'hsrm_mean'),
         ('mean_stepfeat', 'stepfeat_only')]
