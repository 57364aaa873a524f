#!/usr/bin/env python3
"""Top-level module import graph of crates/nandlab/src: for each top-level
module, the `crate::X` it names in non-comment lines. With --no-tests, code
after a `#[cfg(test)]` line in a file is left out (test modules sit at the
end of files in this crate; files named tests.rs are left out entirely)."""
import os, re, sys
root = sys.argv[1]
no_tests = '--no-tests' in sys.argv
mods = sorted(f[:-3] if f.endswith('.rs') else f for f in os.listdir(root) if f != 'lib.rs' and (f.endswith('.rs') or os.path.isdir(os.path.join(root, f))))
graph = {}
for m in mods:
    files = []
    p = os.path.join(root, m)
    if os.path.isdir(p):
        for d, _, fs in os.walk(p):
            files += [os.path.join(d, f) for f in fs if f.endswith('.rs')]
    else:
        files = [p + '.rs']
    deps = set()
    for f in files:
        if no_tests and os.path.basename(f) in ('tests.rs',) :
            continue
        for line in open(f):
            if no_tests and line.strip().startswith('#[cfg(test)]'):
                break
            s = line.strip()
            if s.startswith('//'):
                continue
            for x in re.findall(r'crate::([a-z_]+)', s):
                if x != m and x in mods:
                    deps.add(x)
    graph[m] = sorted(deps)
for m in mods:
    print(f"{m}: {' '.join(graph[m])}")
# cycles: strongly connected components (Tarjan)
idx, low, on, st, comps, n = {}, {}, set(), [], [], [0]
def sc(v):
    idx[v] = low[v] = n[0]; n[0] += 1; st.append(v); on.add(v)
    for w in graph[v]:
        if w not in idx:
            sc(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        c = []
        while True:
            w = st.pop(); on.discard(w); c.append(w)
            if w == v: break
        if len(c) > 1: comps.append(sorted(c))
for v in mods:
    if v not in idx: sc(v)
print("cycles:", comps if comps else "none")
