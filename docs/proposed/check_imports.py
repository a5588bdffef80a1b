"""Module import graph of src/headwater (all imports, function-level included): cycles and
upward imports between rooms."""
import ast, sys
from pathlib import Path
root = Path(sys.argv[1]) / "headwater"
ORDER = ["errors", "conf", "spark", "delta", "ingest", "messages", "lakehouse", "monitor",
         "pipeline", "top"]
def mod(p):
    parts = list(p.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__": parts = parts[:-1]
    return ".".join(parts)
def room(m):
    parts = m.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ORDER else "top"
mods = {mod(p): p for p in root.rglob("*.py")}
graph = {}
for m, p in mods.items():
    deps = set()
    for node in ast.walk(ast.parse(p.read_text())):
        names = []
        if isinstance(node, ast.Import): names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for n in names:
            if n in mods and n != m: deps.add(n)
    graph[m] = deps
up = [(m, d) for m, ds in graph.items() for d in ds
      if ORDER.index(room(d)) > ORDER.index(room(m))]
print("upward imports:", len(up))
for m, d in sorted(up): print("  ", m, "->", d)
# cycles (Tarjan SCC)
index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def sc(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in graph[v]:
        if w not in index: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
for v in graph:
    if v not in index: sc(v)
print("import cycles:", len(sccs))
for c in sccs: print("  ", c)
