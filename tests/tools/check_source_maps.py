#!/usr/bin/env python3
"""tools.source_maps: the maps of the source tree cannot lag behind it.

Fails, naming the file, when
  - a src/*/*.cpp or src/*/*.h is not in docs/ARCHITECTURE.md's source map (the first code block
    under "## Source layout"), or the map lists a file or a plugin directory that does not exist;
  - a plugins/<dir>/ is not in that map;
  - a src/group/*.cpp is not in the file map at the top of src/group/group_internal.h, or a
    src/receiver/*.cpp not in the one at the top of src/receiver/receiver.h (or they list a .cpp
    that is gone).

The source map's form: a directory line starts at column 0 ("src/common/   what it is"), and each
file of it is an entry line indented by two spaces whose first word names it: "bytes.h",
"socket.{h,cpp}" (both files). Longer descriptions continue on deeper-indented lines. A header
map is the comment block that opens the header; an entry is a comment line whose first word is
a .cpp file name ("//   group_api.cpp   the exported ...").

Usage: check_source_maps.py [repository root]   (default: two folders above this script)
"""
import os
import re
import sys

HEADER_MAPS = [("src/group", "src/group/group_internal.h"), ("src/receiver", "src/receiver/receiver.h")]


def expand(token):
    """'socket.{h,cpp}' -> ['socket.h', 'socket.cpp']; 'bytes.h' -> ['bytes.h']."""
    m = re.fullmatch(r"(.*)\{([^{}]*)\}(.*)", token)
    if not m:
        return [token]
    return [m.group(1) + alt + m.group(3) for alt in m.group(2).split(",")]


def source_map(root):
    """(files listed as 'src/<dir>/<file>', plugin dirs listed as 'plugins/<dir>') of the map."""
    path = os.path.join(root, "docs/ARCHITECTURE.md")
    text = open(path, encoding="utf-8").read()
    head = text.find("\n## Source layout\n")
    if head < 0:
        raise SystemExit("docs/ARCHITECTURE.md: no '## Source layout' section")
    start = text.find("```\n", head)
    end = text.find("```\n", start + 4)
    if start < 0 or end < 0:
        raise SystemExit("docs/ARCHITECTURE.md: '## Source layout' has no code block")
    files, plugin_dirs, current = set(), set(), None
    for line in text[start + 4:end].splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            word = line.split()[0]
            current = word if re.fullmatch(r"src/[\w]+/", word) else None
            if word.startswith("src/") and current is None:
                files.add(word)  # a file of src/ itself (CMakeLists.txt, libwsync.map)
            m = re.fullmatch(r"plugins/([\w]+)/", word)
            if m:
                plugin_dirs.add("plugins/" + m.group(1))
            continue
        m = re.match(r"  (\S+)", line)
        if current and m and not line.startswith("   "):
            for name in expand(m.group(1)):
                files.add(current + name)
    return files, plugin_dirs


def header_map(root, header):
    """The .cpp names in the comment block that opens `header`."""
    names = set()
    for line in open(os.path.join(root, header), encoding="utf-8"):
        if not line.startswith("//"):
            break
        m = re.match(r"//\s+([\w.]+\.cpp)\b", line)
        if m:
            names.add(m.group(1))
    return names


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..")
    root = os.path.abspath(root)
    problems = []

    on_disk = set()
    for d in sorted(os.listdir(os.path.join(root, "src"))):
        full = os.path.join(root, "src", d)
        if not os.path.isdir(full):
            continue
        for dirpath, _, names in os.walk(full):
            for n in names:
                if n.endswith((".cpp", ".h")):
                    on_disk.add(os.path.relpath(os.path.join(dirpath, n), root))
    plugins_on_disk = {"plugins/" + d for d in os.listdir(os.path.join(root, "plugins"))
                       if os.path.isdir(os.path.join(root, "plugins", d))}

    listed, listed_plugins = source_map(root)
    for f in sorted(on_disk - listed):
        problems.append(f"{f}: missing from the source map of docs/ARCHITECTURE.md (\"## Source layout\")")
    for f in sorted(listed):
        if not os.path.exists(os.path.join(root, f)):
            problems.append(f"{f}: listed in the source map of docs/ARCHITECTURE.md but does not exist")
    for d in sorted(plugins_on_disk - listed_plugins):
        problems.append(f"{d}/: plugin directory missing from the source map of docs/ARCHITECTURE.md")
    for d in sorted(listed_plugins - plugins_on_disk):
        problems.append(f"{d}/: listed in the source map of docs/ARCHITECTURE.md but does not exist")

    for folder, header in HEADER_MAPS:
        cpps = {n for n in os.listdir(os.path.join(root, folder)) if n.endswith(".cpp")}
        named = header_map(root, header)
        for n in sorted(cpps - named):
            problems.append(f"{folder}/{n}: missing from the file map at the top of {header}")
        for n in sorted(named - cpps):
            problems.append(f"{folder}/{n}: listed in the file map at the top of {header} but does not exist")

    for p in problems:
        print("FAIL " + p)
    if problems:
        print(f"{len(problems)} problem(s): add each file to its map with its one-line job (the file's own top "
              "comment), or drop the entry of a file that is gone")
        return 1
    print(f"source maps complete: {len(on_disk)} files of src/, {len(plugins_on_disk)} plugin directories, "
          + ", ".join(h for _, h in HEADER_MAPS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
