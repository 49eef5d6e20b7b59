"""Mutation testing: does a one-line bug in the package make its tests fail?

For one module, every candidate mutant is a single change to one line of `contrastive_nb/<module>.py`: a comparison
flipped (`<` to `<=`, `==` to `!=`), an arithmetic operator swapped (`+` to `-`, `*` to `/`), a boolean constant or a
small integer changed, `and`/`or` exchanged, a `not` dropped, a `return` value replaced by `None`, or a statement
deleted. Each mutant is written into a copy of the package in a temporary folder, and the module's tests (the files
named on the command line, or by default `tests/test_<module>.py` and the module's entries in
`tests/test_bad_input.py`) run against that copy. A mutant is *killed* when the tests
fail; one that survives is a bug the tests would miss, or a change that does not alter behaviour (say which, and
why, when you report it).

Usage:
    python scripts/mutate.py MODULE [--tests tests/test_x.py ...] [--sample N] [--seed S] [--timeout SECONDS]
                                    [--functions NAME ...]

`--sample N` runs a random sample of N mutants (the kill rate then carries a standard error, printed).
`--functions` keeps the mutants inside the named functions and classes (a part of a module, such as clip's SigLIP
code). A mutant whose tests run past `--timeout` is counted apart: a timeout is neither a kill nor a survivor (a
mutant that makes a loop endless is caught, but not by an assertion). The working tree is never modified: other
work can go on while this runs.
"""
from __future__ import annotations

import argparse, ast, io, math, os, random, re, shutil, subprocess, sys, tempfile, time, tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / 'contrastive_nb'

SWAPS = {'<': '<=', '<=': '<', '>': '>=', '>=': '>', '==': '!=', '!=': '==', '+': '-', '-': '+', '*': '/',
         '/': '*', '//': '/', '**': '*', 'and': 'or', 'or': 'and', 'True': 'False', 'False': 'True',
         'is': 'is not', 'in': 'not in', '0': '1', '1': '0', '2': '3'}

@dataclass(frozen=True)
class Mutant:
    "One single-line change: the line number (1-based), what the line was and what it becomes."
    line: int
    before: str
    after: str
    kind: str

def _code_lines(source: str, within: set[str] | None = None) -> set[int]:
    "Line numbers that hold executable statements inside functions (not docstrings, signatures or imports)."
    lines, tree = set(), ast.parse(source)
    if within is not None:  # only inside the named top-level functions and classes
        tree = ast.Module([n for n in tree.body if getattr(n, 'name', None) in within], [])
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if (node.body and isinstance(node.body[0], ast.Expr)
                                     and isinstance(node.body[0].value, ast.Constant)) else node.body
            for stmt in body:
                for sub in ast.walk(stmt):
                    if isinstance(sub, ast.stmt) and not isinstance(sub, (ast.Import, ast.ImportFrom)):
                        lines.add(sub.lineno)
    return lines

def _token_mutants(source: str, lineno: int, text: str) -> list[Mutant]:
    "Operator, keyword and constant swaps on one line, one token at a time (strings and comments untouched)."
    out = []
    try: tokens = list(tokenize.generate_tokens(io.StringIO(text + '\n').readline))
    except (tokenize.TokenError, IndentationError): return out
    for tok in tokens:
        if tok.type not in (tokenize.OP, tokenize.NAME, tokenize.NUMBER) or tok.string not in SWAPS: continue
        (_, start), (_, end) = tok.start, tok.end
        new = text[:start] + SWAPS[tok.string] + text[end:]
        out.append(Mutant(lineno, text, new, f'{tok.string} -> {SWAPS[tok.string]}'))
    if re.search(r'\bnot\s', text):
        out.append(Mutant(lineno, text, re.sub(r'\bnot\s+', '', text, count=1), 'drop not'))
    return out

def mutants(source: str, within: set[str] | None = None) -> list[Mutant]:
    "Every candidate mutant of a module (or of the named functions and classes) that still compiles."
    lines, found = source.splitlines(), []
    for lineno in sorted(_code_lines(source, within)):
        text = lines[lineno - 1]
        stripped, indent = text.strip(), text[:len(text) - len(text.lstrip())]
        candidates = _token_mutants(source, lineno, text)
        if stripped.startswith('return ') and stripped != 'return None':
            candidates.append(Mutant(lineno, text, indent + 'return None', 'return None'))
        if not stripped.startswith(('return', 'raise', 'if ', 'elif ', 'else', 'for ', 'while ', 'with ', 'try',
                                    'except', 'def ', 'class ', '@')) and not stripped.endswith((':', '(', '[', ',')):
            candidates.append(Mutant(lineno, text, indent + 'pass', 'delete statement'))
        for m in candidates:
            mutated = lines[:lineno - 1] + [m.after] + lines[lineno:]
            try: compile('\n'.join(mutated), '<mutant>', 'exec')
            except SyntaxError: continue
            found.append(m)
    return found

def run_tests(checkout: Path, tests: list[str], timeout: float) -> str:
    "'killed', 'survived' or 'timeout' for the copy of the project in `checkout`."
    # Run from the copy: its folder comes first on sys.path, before the editable install of the real package.
    env = dict(os.environ, PYTHONPATH=str(checkout), PYTHONDONTWRITEBYTECODE='1')
    cmd = [sys.executable, '-m', 'pytest', '-x', '-q', '-p', 'no:cacheprovider', '--no-header', *tests]
    try: r = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired: return 'timeout'
    return 'survived' if r.returncode == 0 else 'killed'

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('module')
    ap.add_argument('--tests', nargs='+')
    ap.add_argument('--sample', type=int)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--timeout', type=float, default=300)
    ap.add_argument('--functions', nargs='+', help='mutate only inside these top-level functions and classes')
    args = ap.parse_args()
    source_path = PACKAGE / f'{args.module}.py'
    # By default the module's own tests and its entries in the bad-input registry (-k selects both by name).
    tests = args.tests or [f'tests/test_{args.module}.py', 'tests/test_bad_input.py', '-k', args.module]
    source = source_path.read_text()
    within = set(args.functions) if args.functions else None
    todo = mutants(source, within)
    if within and not todo:
        print(f'No mutant inside {sorted(within)}: are they top-level names of {args.module}?', file=sys.stderr)
        return 2
    total = len(todo)
    if args.sample and args.sample < total: todo = random.Random(args.seed).sample(todo, args.sample)
    with tempfile.TemporaryDirectory() as tmp:
        checkout = Path(tmp)
        for name in ('contrastive_nb', 'tests', 'scripts', 'data', 'nbs', 'examples', 'benchmarks', 'README.md',
                     'pyproject.toml'):  # what the tests read: the README's commands, the example method, benchmarks
            src = ROOT / name
            if src.is_dir(): shutil.copytree(src, checkout / name, ignore=shutil.ignore_patterns('__pycache__'))
            else: shutil.copy(src, checkout / name)
        copy = checkout / 'contrastive_nb'
        if run_tests(checkout, tests, args.timeout) != 'survived':
            print(f'The tests fail on the unmutated package: fix them first ({" ".join(tests)})', file=sys.stderr)
            return 2
        lines, survivors, killed, timeouts, start = source.splitlines(), [], 0, [], time.perf_counter()
        for i, m in enumerate(todo, 1):
            (copy / source_path.name).write_text('\n'.join(lines[:m.line - 1] + [m.after] + lines[m.line:]) + '\n')
            outcome = run_tests(checkout, tests, args.timeout)
            killed += outcome == 'killed'
            if outcome == 'survived': survivors.append(m)
            if outcome == 'timeout': timeouts.append(m)
            print(f'[{i}/{len(todo)}] line {m.line} {m.kind}: {outcome}', flush=True)
        (copy / source_path.name).write_text(source)
    n = len(todo) - len(timeouts)  # the rate is over the mutants whose tests finished
    rate = killed / n if n else 1.0
    se = math.sqrt(rate * (1 - rate) / n) * math.sqrt(1 - n / total) if n and total > 1 else 0.0
    print(f'\n{args.module}: {killed} of {n} mutants killed ({rate:.1%}'
          + (f' ± {se:.1%} SE, a sample of {n} of {total}' if n < total else '')
          + f') in {time.perf_counter() - start:.0f} s'
          + (f'; {len(timeouts)} more timed out (counted apart)' if timeouts else ''))
    for m in timeouts: print(f'  timed out: line {m.line} ({m.kind}): {m.before.strip()}  =>  {m.after.strip()}')
    for m in survivors: print(f'  survived: line {m.line} ({m.kind}): {m.before.strip()}  =>  {m.after.strip()}')
    return 0

if __name__ == '__main__': sys.exit(main())
