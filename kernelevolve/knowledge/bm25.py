"""A small Okapi BM25 ranker over short technical documents."""

from __future__ import annotations

import math
import re
from collections import Counter

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by for from has have in into is it its of on or that the this to was "
    "were will with when which while not no can do does use used using than then so if".split()
)


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric runs, stop words dropped, a plural `s` folded away."""
    out = []
    for tok in _TOKEN.findall(text.lower()):
        if tok in _STOP:
            continue
        if len(tok) > 3 and tok.endswith("s") and not tok.endswith("ss"):
            tok = tok[:-1]
        out.append(tok)
    return out


class BM25:
    """Index token lists once; score a query against every document."""

    def __init__(self, docs: list[list[str]], k1: float = 1.5, b: float = 0.75):
        self.k1, self.b = k1, b
        self.freqs = [Counter(d) for d in docs]
        self.lengths = [len(d) for d in docs]
        self.avg_len = (sum(self.lengths) / len(docs)) if docs else 0.0
        df: Counter = Counter()
        for f in self.freqs:
            df.update(f.keys())
        n = len(docs)
        # The "+1" form keeps idf positive even for terms present in most documents.
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    def scores(self, query: list[str]) -> list[float]:
        terms = Counter(query)
        out = []
        for freq, length in zip(self.freqs, self.lengths):
            norm = self.k1 * (1 - self.b + self.b * length / self.avg_len) if self.avg_len else self.k1
            s = 0.0
            for term, qcount in terms.items():
                tf = freq.get(term, 0)
                if tf:
                    s += qcount * self.idf[term] * tf * (self.k1 + 1) / (tf + norm)
            out.append(s)
        return out
