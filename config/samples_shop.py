# Problems or samples (issue 44 item 3): at a fixed number of extracted candidates, does HSRM (the paper's read) need
# more problems or more samples of each? On shop's reads extraction (config/reads_shop.py: 480 training problems x 8,
# 250 evaluation problems x 8), stacked on config/curve_shop.py: K problems (80% train, 20% validate) x the first
# n_candidates of each (train.py), so the cells on one diagonal cost the same: 120 x 8 = 240 x 4 = 480 x 2 (960
# candidates) and 240 x 8 = 480 x 4 (1,920): the question below 8 samples; 8 to 64 at 8,000: config/samples_synth2.py.
#   mkdir -p out/samples_shop && ln -sfn $PWD/out/reads_shop/train out/samples_shop/train \
#     && ln -sfn $PWD/out/reads_shop/eval out/samples_shop/eval
#   python -m studies.curve config/curve_shop.py config/samples_shop.py --threads=1
out_dir = 'out/samples_shop'
dataset = 'words'  # as config/curve_shop.py: named here too, so this file read alone is a words config
train_range = (0, 479)  # config/reads_shop.py's splits (this study extracts nothing of its own)
eval_range = (1250, 1499)
sizes = [120, 240, 480]
variants = {'hsrm': {}, 'hsrm_n4': {'n_candidates': 4}, 'hsrm_n2': {'n_candidates': 2}}
pairs = [('hsrm_n4@240', 'hsrm@120'), ('hsrm_n2@480', 'hsrm_n4@240'), ('hsrm_n2@480', 'hsrm@120'),
         ('hsrm_n4@480', 'hsrm@240')]  # more problems, fewer samples each - fewer problems, more samples: same budget
