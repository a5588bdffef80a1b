"""Import rules anyone can check: `python tools/check_imports.py` (also run by `bash dev.sh lint`).

1. Rooms import only downward: the layers contract in pyproject.toml ([tool.importlinter]),
   checked by import-linter, including imports inside functions.
2. No import cycles anywhere, between rooms or between modules of one room (import-linter's
   layers contract does not look inside a layer): strongly connected components of grimp's
   module graph, imports under ``if TYPE_CHECKING:`` left out (they never run).
3. No cycles of types either: the same graph with the ``if TYPE_CHECKING:`` imports in. A
   helper that takes its caller as an argument names what it needs in a ``Protocol`` (as
   ``pipeline/snapshot.py`` does for the graph), so modules can be read bottom-up.

Exit code 1 and each broken rule printed when one fails.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

PACKAGE = "headwater"


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module, or a self-import."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for module in sorted(graph.modules):
        if module.startswith(PACKAGE) and module not in index:
            visit(module)
    return found


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    layers = subprocess.run([str(Path(sys.executable).with_name("lint-imports")),
                             "--config", str(root / "pyproject.toml"), "--no-cache"],
                            capture_output=True, text=True, cwd=root)
    ok = layers.returncode == 0
    if not ok:
        print(layers.stdout[layers.stdout.find("Broken contracts"):] or layers.stdout)
        print(layers.stderr)
    graph = grimp.build_graph(PACKAGE, exclude_type_checking_imports=True)
    found = cycles(graph)
    for component in found:
        print("import cycle: " + " <-> ".join(component))
    typed = cycles(grimp.build_graph(PACKAGE, exclude_type_checking_imports=False))
    for component in typed:
        print("type-level import cycle (TYPE_CHECKING imports in): " + " <-> ".join(component))
    print(f"layers: {'kept' if ok else 'BROKEN'}; cycles: {len(found)}, type-level: "
          f"{len(typed)} ({len(graph.modules)} modules)")
    return 0 if ok and not found and not typed else 1


if __name__ == "__main__":
    sys.exit(main())
