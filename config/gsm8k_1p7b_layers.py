# GSM8K x Qwen3-1.7B (28 layers) with ten layers stored, for the layer sweep (Figure "Layer ablation", 3 seeds)
# and the input-modality table (top-4 layers, text, hybrid). Same splits and sampling as gsm8k_1p7b.py; its
# own out_dir because the stored states differ (about 10x the disk of the one-layer cell). HSRM reads the
# final layer unless verifier_layers says otherwise:
#   for l in 4 8 12 16 20 24 -4 -3 -2 -1; do python train.py config/gsm8k_1p7b_layers.py --verifier_layers=[$l]; done
out_dir = 'out/gsm8k_1p7b_layers'
model = 'Qwen/Qwen3-1.7B'
dataset = 'gsm8k'
train_range = (0, 499)
eval_range = (500, 1318)
max_new_tokens = 1024
batch_size = 256  # rows per forward on one 80 GB GPU: the most that fit both splits by the memory model (5% headroom)
layers = [4, 8, 12, 16, 20, 24, -4, -3, -2, -1]  # hidden_states indices: 0 = embeddings, -1 = final (after norm)
verifier_layers = [-1]
seeds = [42, 123, 456]
