#!/usr/bin/env python3
"""tools.include_layers: the core's directories include each other in one direction only, and no
files include (or, in a plugin, call) each other round a loop.

Reads the two tables of docs/ARCHITECTURE.md's "## Include layers" and fails, naming the files,
  - when a file of src/<dir>/ includes a file of another directory its row does not name (a back
    arrow), or src/ has a directory the table lacks (or the table one that src/ lacks), or a row
    names a directory that is not a row above it;
  - on an include cycle among the files of src/, or among the files of one plugin directory
    (resolved the way the plugins' build resolves them: the file's folder, plugins/common,
    plugins/adapter_http_common, include/);
  - on a call loop in a plugin directory: .c files that call each other's non-static functions round
    a loop (the files share one header, so the loop does not show in the includes), unless the
    second table names exactly that loop; a row that no longer matches fails too.

Usage: check_include_layers.py [repository root]   (default: two folders above this script)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def tables(root):
    """(layers: dir -> allowed dirs, known loops: plugin -> frozenset of files) from the doc."""
    text = read(os.path.join(root, "docs/ARCHITECTURE.md"))
    head = text.find("\n## Include layers\n")
    if head < 0:
        raise SystemExit("docs/ARCHITECTURE.md: no '## Include layers' section")
    end = text.find("\n## ", head + 5)
    section = text[head:end if end > 0 else len(text)]
    layers, loops, kind = {}, {}, None
    for line in section.splitlines():
        if not line.startswith("|"):
            kind = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or set(cells[0]) <= set("-: "):
            continue
        if kind is None:  # a table's header row says which table it is
            kind = {"directory": "layers", "plugin": "loops"}.get(cells[0])
            if kind is None:
                raise SystemExit(f"docs/ARCHITECTURE.md: '## Include layers' has a table headed '{cells[0]}'")
            continue
        key = cells[0].strip("`")
        names = frozenset(re.findall(r"`([^`]+)`", cells[1]))
        (layers if kind == "layers" else loops)[key] = names
    if not layers:
        raise SystemExit("docs/ARCHITECTURE.md: '## Include layers' has no directory table")
    return layers, loops


def cycles(graph):
    """The strongly connected components of `graph` that are loops (2+ nodes, or a self-edge)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):  # iterative Tarjan: no recursion limit to meet
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1 or node in graph.get(node, ()):
                    out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def loop_path(graph, comp):
    """The shortest loop from the component's first node back to it, as [a, b, ..., a]."""
    members, start = set(comp), comp[0]
    came_from, queue = {start: None}, [start]
    while queue:
        node = queue.pop(0)
        for w in sorted(graph.get(node, ())):
            if w == start:
                path = [node]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                return list(reversed(path)) + [start]
            if w in members and w not in came_from:
                came_from[w] = node
                queue.append(w)
    return [start, start]  # unreachable for a loop


def loop_text(graph, comp):
    text = " -> ".join(loop_path(graph, comp))
    return text if len(comp) <= 2 else f"{text} (one loop among {', '.join(comp)})"


def src_checks(root, layers, problems):
    above = []
    for d, allowed in layers.items():  # the table is the order: a row names only rows above it
        for a in sorted(allowed - set(above)):
            problems.append(f"docs/ARCHITECTURE.md \"Include layers\": row {d} names {a}, which is not a row "
                            f"above it (the directories would include each other round a loop)")
        above.append(d)
    src = os.path.join(root, "src")
    dirs = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for d in dirs:
        if d not in layers:
            problems.append(f"src/{d}/: not in the table of docs/ARCHITECTURE.md \"Include layers\"")
    for d in sorted(set(layers) - set(dirs)):
        problems.append(f"src/{d}/: named in docs/ARCHITECTURE.md \"Include layers\" but does not exist")
    graph = {}
    for d in dirs:
        for name in sorted(os.listdir(os.path.join(src, d))):
            if not name.endswith((".cpp", ".h")):
                continue
            rel = f"{d}/{name}"
            graph.setdefault(rel, set())
            for inc in INCLUDE.findall(read(os.path.join(src, rel))):
                target = inc if "/" in inc else f"{d}/{inc}"
                if not os.path.isfile(os.path.join(src, target)):
                    continue  # include/, a system or generated header
                graph[rel].add(target)
                to = target.split("/")[0]
                if to != d and to not in layers.get(d, frozenset()):
                    allowed = ", ".join(sorted(layers.get(d, ()))) or "nothing of the other directories"
                    problems.append(f"src/{rel} includes \"{inc}\": a back arrow ({d} -> {to}); {d} may include "
                                    f"{allowed} (docs/ARCHITECTURE.md \"Include layers\")")
    for comp in cycles(graph):
        problems.append("include cycle in src/: " + loop_text(graph, comp))
    return len(graph)


def resolve_plugin_include(root, folder, inc):
    for base in (folder, "plugins/common", "plugins/adapter_http_common", "include"):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def strip_c(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"'(\\.|[^'\\\n])*'", "''", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


# A function definition at the start of a line: return type, name, parameters, then the body's brace.
DEFINITION = re.compile(r"^(?!static\b|typedef\b|struct\b|enum\b|union\b|extern\b)[A-Za-z_][\w \t\*]*?\b(\w+)\s*"
                        r"\([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*\)\s*\{", re.M)


def plugin_checks(root, loops, problems):
    plugins = os.path.join(root, "plugins")
    folders = sorted(d for d in os.listdir(plugins) if os.path.isdir(os.path.join(plugins, d)))
    for name in sorted(set(loops) - set(folders)):
        problems.append(f"plugins/{name}/: named in docs/ARCHITECTURE.md \"Include layers\" but does not exist")
    files_seen = 0
    for d in folders:
        folder = f"plugins/{d}"
        names = sorted(n for n in os.listdir(os.path.join(root, folder)) if n.endswith((".c", ".h", ".cpp")))
        files_seen += len(names)
        # Includes, among this folder's files and the shared ones they reach.
        graph, pending = {}, [f"{folder}/{n}" for n in names]
        while pending:
            f = pending.pop()
            if f in graph:
                continue
            graph[f] = set()
            for inc in INCLUDE.findall(read(os.path.join(root, f))):
                target = resolve_plugin_include(root, os.path.dirname(f), inc)
                if target and target.startswith("plugins/"):
                    graph[f].add(target)
                    pending.append(target)
        for comp in cycles(graph):
            problems.append(f"include cycle in {folder}/: " + loop_text(graph, comp))
        # Calls between the folder's .c files.
        sources = [n for n in names if n.endswith(".c")]
        texts = {n: strip_c(read(os.path.join(root, folder, n))) for n in sources}
        defined = {}
        for n in sources:
            for m in DEFINITION.finditer(texts[n]):
                defined.setdefault(m.group(1), n)
        calls = {n: set() for n in sources}
        why = {}
        for n in sources:
            words = set(re.findall(r"\b\w+\b", texts[n]))
            for fn, home in defined.items():
                if home != n and fn in words:
                    calls[n].add(home)
                    why.setdefault((n, home), fn)
        known = loops.get(d)
        found = [frozenset(c) for c in cycles(calls)]
        for comp in found:
            if comp == known:
                continue
            path = loop_path(calls, sorted(comp))
            steps = ", ".join(f"{a} calls {why[(a, b)]} ({b})" for a, b in zip(path, path[1:]))
            among = f" (files in loops: {', '.join(sorted(comp))})" if len(comp) > 2 else ""
            problems.append(f"call loop in {folder}/: {' -> '.join(path)}: {steps}{among}; move the function "
                            f"that closes the loop to the file it belongs with (docs/ARCHITECTURE.md "
                            f"\"Include layers\")")
        if known is not None and known not in found:
            now = "; ".join(", ".join(sorted(c)) for c in found) or "none"
            problems.append(f"plugins/{d}/: docs/ARCHITECTURE.md \"Include layers\" lists the loop "
                            f"{', '.join(sorted(known))}, but the loops now are: {now}; update the row")
    return files_seen


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..")
    root = os.path.abspath(root)
    layers, loops = tables(root)
    problems = []
    n_src = src_checks(root, layers, problems)
    n_plugin = plugin_checks(root, loops, problems)
    for p in problems:
        print("FAIL " + p)
    if problems:
        print(f"{len(problems)} problem(s)")
        return 1
    print(f"include layers hold: {n_src} files of src/ in {len(layers)} directories, {n_plugin} plugin files, "
          f"{len(loops)} known call loop(s) unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
