#!/usr/bin/env python3
"""tools.part_writers: each part of the sender's group is written by the one file its comment names.

Reads src/group/group.h: the parts are the members of `struct wsync_group`, and each part's owner is
the first `<file>.cpp` in the comment right above its struct (a struct nested in a part, with a
comment naming another file, is that file's: `engines.returns`). Then, in every src/group/*.cpp, a
write to a part from another file fails, naming the file, the line and the owner. A write is:
  g->part.field = ... (also +=, -=, ++, --), g->part.field.push_back( (emplace_back, insert, erase,
  clear, resize, swap, reset, store, assign, pop_front), or a non-const reference taken to a part
  (`Type& x = g->part...`, `auto& x = g->part...`), through `g`, `g_` or `group`.
Reads through a part are anyone's; the owners write others' parts through the owners' functions.

Usage: check_part_writers.py [repository root]   (default: two folders above this script)
"""
import glob
import os
import re
import sys

WRITE = r"(?:=(?!=)|\+=|-=|\+\+|--|\.(?:push_back|emplace_back|insert|erase|clear|resize|swap|reset|store|assign|pop_front)\()"
CPP = re.compile(r"\b(\w+\.cpp)\b")


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def comment_above(lines, i):
    """The // comment lines right above line i, joined."""
    out = []
    j = i - 1
    while j >= 0 and lines[j].strip().startswith("//"):
        out.insert(0, lines[j].strip())
        j -= 1
    return " ".join(out)


def owners(header):
    """{(part, member or None): owner file} from group.h."""
    text = read(header)
    lines = text.splitlines()
    body = re.search(r"^struct wsync_group \{(.*?)^\};", text, re.S | re.M)
    if body is None:
        raise SystemExit(f"{header}: no 'struct wsync_group'")
    parts = re.findall(r"^\s*wsync::(\w+)\s+(\w+);", body.group(1), re.M)
    if not parts:
        raise SystemExit(f"{header}: struct wsync_group has no parts")
    starts = {m.group(1): text[: m.start()].count("\n") for m in re.finditer(r"^struct (\w+) \{", text, re.M)}
    result = {}
    for type_name, part in parts:
        if type_name not in starts:
            raise SystemExit(f"{header}: part '{part}' has type {type_name}, which is not a struct of this file")
        i = starts[type_name]
        found = CPP.search(comment_above(lines, i))
        if found is None:
            raise SystemExit(f"{header}:{i + 1}: the comment above struct {type_name} (part '{part}') names no "
                             "owner file (<file>.cpp)")
        result[(part, None)] = found.group(1)
        # Nested structs with an owner of their own, and the member of that type.
        depth, j = 0, i
        nested = {}
        while j < len(lines):
            line = lines[j]
            m = re.match(r"^\s+struct (\w+) \{", line)
            if m and depth == 1:
                sub = CPP.search(comment_above(lines, j))
                if sub is not None:
                    nested[m.group(1)] = sub.group(1)
            m = re.match(r"^\s+(\w+) (\w+);", line)
            if m and depth == 1 and m.group(1) in nested:
                result[(part, m.group(2))] = nested[m.group(1)]
            depth += line.count("{") - line.count("}")
            if depth == 0 and j > i:
                break
            j += 1
    return result


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    own = owners(os.path.join(root, "src/group/group.h"))
    names = "|".join(sorted({p for p, _ in own}))
    direct = re.compile(r"\b(?:g|g_|group)->(%s)\b((?:\.\w+|\[[^\]]*\])*)\s*%s" % (names, WRITE))
    ref = re.compile(r"([\w:<>, ]+)&\s*\w+\s*=\s*(?:g|g_|group)->(%s)\b((?:\.\w+)*)" % names)
    bad = []
    for path in sorted(glob.glob(os.path.join(root, "src/group/*.cpp"))):
        file = os.path.basename(path)
        for n, line in enumerate(read(path).splitlines(), 1):
            code = line.split("//", 1)[0]
            found = [(m.group(1), m.group(2)) for m in direct.finditer(code)]
            found += [(m.group(2), m.group(3)) for m in ref.finditer(code) if not re.search(r"\bconst\b", m.group(1))]
            for part, rest in found:
                member = re.match(r"\.(\w+)", rest or "")
                owner = own.get((part, member.group(1) if member else None), own[(part, None)])
                if file != owner:
                    bad.append(f"src/group/{file}:{n}: writes part '{part}{rest}', which {owner} owns: "
                               f"ask {owner} through a function\n    {line.strip()}")
    if bad:
        print("\n".join(bad))
        print(f"tools.part_writers: {len(bad)} write(s) to a part from outside its owner (src/group/group.h)")
        return 1
    print(f"tools.part_writers: {len(own)} parts and owners in src/group/group.h; every write is the owner's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
