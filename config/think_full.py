# Thinking-mode ablation (paper: Table "Thinking-mode extraction ablation"): thinking on, step states over the
# whole trace. Stacks on a paper cell, with its own out_dir (the states differ from the non-thinking cell's):
#   for s in extract label train evaluate; do python $s.py config/math500_1p7b.py config/think_full.py --out_dir=out/math500_1p7b_think_full; done
# The paper gives no generation limit for thinking traces: ours is 8192 new tokens (a trace cut there keeps
# finish='length' and is labelled like any other).
enable_thinking = True
think_extract = 'full'
max_new_tokens = 8192
