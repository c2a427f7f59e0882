"""The plain embedding loop Atlas is measured against.

Python onnxruntime + tokenizers on the same model and chunk texts: batches of 32 in
chunk order (or, with `sorted`, by token length), each padded to its longest member,
every chunk truncated to the model's 256 tokens as a plain embedder does. Prints
`tokens seconds tokens/s` on one line.
Usage: python3 embed_baseline.py MODEL_DIR CHUNKS_JSONL THREADS [sorted]
"""
import json
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

model_dir, chunks_path, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
tok = Tokenizer.from_file(model_dir + "/tokenizer.json")
tok.no_padding()
tok.enable_truncation(256)
opts = ort.SessionOptions()
opts.intra_op_num_threads = threads
sess = ort.InferenceSession(model_dir + "/model.onnx", opts, providers=["CPUExecutionProvider"])
texts = [json.loads(line)["text"] for line in open(chunks_path, encoding="utf-8")]
by_length = len(sys.argv) > 4 and sys.argv[4] == "sorted"

start = time.perf_counter()
all_encs = tok.encode_batch(texts)
if by_length:
    all_encs.sort(key=lambda e: len(e.ids))
tokens = 0
for i in range(0, len(all_encs), 32):
    encs = all_encs[i : i + 32]
    n = max(len(e.ids) for e in encs)
    ids = np.zeros((len(encs), n), dtype=np.int64)
    mask = np.zeros((len(encs), n), dtype=np.int64)
    for r, e in enumerate(encs):
        ids[r, : len(e.ids)] = e.ids
        mask[r, : len(e.ids)] = 1
        tokens += len(e.ids)
    out = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    pooled = (out * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
secs = time.perf_counter() - start
print(f"{tokens} {secs:.3f} {tokens / secs:.0f}")
