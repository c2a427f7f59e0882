#!/usr/bin/env python3
"""Writes a golden set's questions in British spelling, everything else as it was: the
check that a question's spelling does not change what Atlas finds (docs/search.md,
"spelling"). The corpora write American English.

    python3 xtask/eval/british.py IN.jsonl OUT.jsonl

Rewrites plain words only (not identifiers, paths or quoted names): -ize/-ization →
-ise/-isation, -yze → -yse, behavior/color/neighbor/favorite/honor/labor/flavor →
-our, center/meter/fiber/liter → -re, catalog/dialog/analog → -ogue, a doubled l in
modeling/canceled/labeled/traveled/signaled/leveled/fueled/channeled/tunneled. Prints
how many words it changed.
"""
import json
import re
import sys

RULES = [
    (r"^(.{2,})iz(e|ed|es|ing|er|ers|ation|ations|able)$", r"\1is\2"),
    (r"^(.{2,})yz(e|ed|ing|er|ers)$", r"\1ys\2"),
    (r"^(behavi|col|neighb|fav|hon|lab|flav)or(s|ed|ing|ite|ites|al)?$", r"\1our\2"),
    (r"^(cent|met|fib|lit)er(s?)$", r"\1re\2"),
    (r"^(catal|dial|anal)og(s?)$", r"\1ogue\2"),
    (r"^(model|cancel|label|travel|signal|level|fuel|channel|tunnel)(ed|ing|er|ers)$", r"\1l\2"),
]
# Words ending in -ize that British English writes the same way.
SAME = {"size", "sized", "sizes", "sizing", "resize", "resized", "resizing", "prize", "seize", "citizen"}


def british(word):
    low = word.lower()
    if low in SAME or (word != low and word != low.capitalize()):
        return word
    out = low
    for pattern, repl in RULES:
        out = re.sub(pattern, repl, out)
    if out == low:
        return word
    return out if word == low else out.capitalize()


def main():
    src, dst = sys.argv[1], sys.argv[2]
    changed = 0
    with open(dst, "w") as f:
        for line in open(src):
            if line.strip() and not line.startswith("#"):
                q = json.loads(line)

                def sub(m):
                    nonlocal changed
                    b = british(m.group(0))
                    changed += b != m.group(0)
                    return b

                q["query"] = re.sub(r"(?<![\w`.:-])[A-Za-z]+(?![\w`(:-])", sub, q["query"])
                f.write(json.dumps(q) + "\n")
            else:
                f.write(line)
    print(f"{src}: {changed} words respelt")


if __name__ == "__main__":
    main()
