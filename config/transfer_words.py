# Leave-one-family-out transfer over config/words.py's four word-problem families, each extracted once (as its
# header says: shop 640 problems x 8 and eval 48 x 32, the others 320 x 8 and eval 144 x 8) and reused by every fold:
# (two cores: two parts in parallel; the last call reuses them for the report)
#   python -m studies.transfer config/transfer_words.py --folds="['shop', 'travel']" --threads=1 &
#   python -m studies.transfer config/transfer_words.py --folds="['bake', 'share']" --threads=1; wait
#   python -m studies.transfer config/transfer_words.py
out_dir = 'out/transfer_words'
families = {'shop': 'out/words_shop', 'travel': 'out/words_travel', 'bake': 'out/words_bake',
            'share': 'out/words_share'}
variants = {
    'hsrm': {},                                              # hidden states alone (the paper's verifier)
    'hsrm_residual': {'residual': 'auto', 'step_features': True},  # the best free scorer on validation + a correction
                                                                   # (+ each step's log-prob, entropy, DeepConf
                                                                   # confidence: {'step_features': True} alone adds
                                                                   # them)
    'hsrm_combo': {'residual': 'combo', 'step_features': True},    # every free scorer, weights learned on the training
                                                                   # families (train.combo_fit) + a correction
}
in_domain = ['hsrm', 'hsrm_residual']  # also trained on the held-out family itself: the in-domain reference
seeds = [42, 123, 456]
train_overrides = {'epochs': 20, 'eval_interval': 25}  # steps scale with each fold's data, as the curve's
