"""The seed system's keyword engine, for the side-by-side keyword benchmark.

rank_bm25's BM25Okapi over the same chunk texts, tokenised as the seed did (lower
case, split on non-word characters). Times get_scores + top-k per query over the
query set, several rounds, and prints "p50_ms p95_ms" on one line.
Usage: python3 rank_bm25_baseline.py CHUNKS_JSONL GOLDEN_JSONL ROUNDS
"""
import json
import re
import sys
import time

import numpy as np
from rank_bm25 import BM25Okapi

chunks_path, queries_path, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
tokenize = lambda t: re.findall(r"\w+", t.lower())
corpus = [tokenize(json.loads(line)["text"]) for line in open(chunks_path)]
bm25 = BM25Okapi(corpus)
# The golden set's answerable queries (JSON Lines, docs/eval.md), as the Rust side reads them.
golden = [json.loads(line) for line in open(queries_path) if line.strip() and not line.startswith("#")]
queries = [q["query"] for q in golden if q.get("expected")]
times = []
for _ in range(rounds):
    for q in queries:
        t = time.perf_counter()
        scores = bm25.get_scores(tokenize(q))
        top = np.argsort(-scores)[:5]
        times.append((time.perf_counter() - t) * 1000)
times.sort()
print(f"{times[len(times) // 2]:.3f} {times[min(len(times) - 1, len(times) * 95 // 100)]:.3f}")
