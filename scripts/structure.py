"""The code's shape, counted: modules and their sizes, imports between the package's folders
(top-level and function-local, from the AST) and the cycles among them, and which modules name a
run-folder file. Usage: python scripts/structure.py"""

import ast
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "grpo_lab"
RUN_FILES = re.compile(r"^(summary\.json|heartbeat\.json|metrics\.jsonl|events\.jsonl|completions\.jsonl|"
                       r"checkpoint\.pt|config\.json|result-|attempt-|problems-)")


def folder(module: str) -> str:
    """grpo_lab.execution.runners.local -> execution; grpo_lab.views -> views."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def names_run_files(path: Path) -> bool:
    """A string in the code (not a docstring) that is, or starts, a run-folder file name. Model
    folders have a config.json too: grpo_lab/models and model_cards are left out."""
    tree = ast.parse(path.read_text())
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs and RUN_FILES.match(n.value)
               for n in ast.walk(tree))


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("grpo_lab"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("grpo_lab")}
    return found


def main() -> None:
    files = sorted(p for p in PACKAGE.rglob("*.py") if "bundled" not in p.parts)
    sizes = {p: len(p.read_text().splitlines()) for p in files}
    print(f"modules: {len(files)}; lines: median {statistics.median(sizes.values()):.0f}, "
          f"max {max(sizes.values())} ({max(sizes, key=sizes.get).relative_to(ROOT)})")
    over = [f"{p.relative_to(ROOT)} ({n})" for p, n in sizes.items() if n > 400]
    print(f"over 400 lines: {len(over)}" + (f": {', '.join(over)}" if over else ""))
    edges = defaultdict(set)
    for p in files:
        module = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for target in imports(p):
            a, b = folder(module), folder(target)
            if a != b:
                edges[a].add(b)
    cycles = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges.get(b, ())})
    print(f"folder pairs importing each other: {len(cycles)}" + (f": {cycles}" if cycles else ""))
    readers = sorted(str(p.relative_to(ROOT)) for p in files
                     if "models" not in p.parts and p.name != "model_cards.py" and names_run_files(p))
    print(f"modules naming run-folder files: {len(readers)}: {', '.join(readers)}")
    sys.exit(0)


if __name__ == "__main__":
    main()
