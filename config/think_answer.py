# Thinking-mode ablation, answer-only: thinking on, only the step states after </think> (a trace cut before
# </think> keeps its final token). Stacks on a paper cell, with its own out_dir:
#   for s in extract label train evaluate; do python $s.py config/math500_1p7b.py config/think_answer.py --out_dir=out/math500_1p7b_think_answer; done
enable_thinking = True
think_extract = 'answer'
max_new_tokens = 8192
