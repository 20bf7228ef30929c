# Verifier-steered search against best-of-N at equal generated tokens (issue 19), on the 'shop' word family
# (3 steps and an answer line per solution). The best-of-N pool is config/words.py's shop cell (48 problems x 32);
# each shop verifier (seed s) steers its own search runs on the same 48 problems, with its seed:
#   python extract.py config/words.py --out_dir=out/words_shop --n_eval_samples=32 && python label.py config/words.py --out_dir=out/words_shop
#   python train.py config/words.py --out_dir=out/words_shop
#   for s in 42 123 456; do for n in 4 8; do d=out/search_shop/beam_n${n}_seed$s
#     python extract.py config/search_shop.py --search=beam --n_eval_samples=$n --seed=$s --out_dir=$d \
#       --search_ckpt=out/words_shop/verifiers/hsrm_seed$s/ckpt.pt && python label.py config/search_shop.py --out_dir=$d; done; done
#   (DVTS: --search=dvts; N = 16: --n_eval_samples=16)
#   python steer.py config/search_shop.py
out_dir = 'out/search_shop'
model = 'smollm2'
dataset = 'words'
word_family = 'shop'
train_range = None
eval_range = (1000, 1047)
n_eval_samples = 4
max_new_tokens = 128
temperature = 0.8
top_p = 0.95
batch_size = 64
search = 'beam'
search_width = 4
