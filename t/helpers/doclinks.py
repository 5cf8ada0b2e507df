#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""doclinks.py ROOT FILE.md...: check the relative links of Markdown files.

Every link [text](target) that is not a URL (scheme:) must name a file or
directory that exists, relative to the Markdown file; a #anchor into a
Markdown file must name one of its headings (GitHub's slugs: lowercase,
punctuation dropped, spaces to '-').  Links inside fenced or indented code
are not links.  Prints one line per broken link; exits 1 if there is any.
(t/0000-lint.t)"""
import os
import re
import sys

LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r'[^\w\- ]', '', s)  # drops `, (, ), :, ., /, ...
    return s.replace(' ', '-')


def prose_lines(text):
    """The lines of text outside code blocks, with their numbers."""
    fence = None
    prev_blank = True
    in_indent = False
    for n, line in enumerate(text.split('\n'), 1):
        m = re.match(r'^\s*(```+|~~~+)', line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        if line.startswith('    ') or line.startswith('\t'):
            if prev_blank or in_indent:
                in_indent = True
                continue
        elif line.strip():
            in_indent = False
        prev_blank = not line.strip()
        if in_indent and not line.strip():
            continue
        # inline code is not a link either
        yield n, re.sub(r'`[^`]*`', '``', line)


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        out = set()
        with open(path, encoding='utf-8') as f:
            fence = None
            for line in f:
                m = re.match(r'^\s*(```+|~~~+)', line)
                if fence:
                    if m:
                        fence = None
                    continue
                if m:
                    fence = m.group(1)
                    continue
                h = re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
                if h:
                    s = slug(h.group(1))
                    k = seen.get(s, 0)
                    seen[s] = k + 1
                    out.add(s if k == 0 else '%s-%d' % (s, k))
                for a in re.findall(r'<a\s+(?:name|id)="([^"]+)"', line):
                    out.add(a)
        cache[path] = out
    return cache[path]


def main():
    root = sys.argv[1]
    bad = 0
    for md in sys.argv[2:]:
        with open(md, encoding='utf-8') as f:
            text = f.read()
        rel = os.path.relpath(md, root)
        for n, line in prose_lines(text):
            for target in LINK.findall(line):
                if re.match(r'^[a-zA-Z][a-zA-Z0-9+.-]*:', target):
                    continue  # https:, mailto:
                path, _, frag = target.partition('#')
                dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                if not os.path.exists(dest):
                    print('%s:%d: %s: no such file' % (rel, n, target))
                    bad += 1
                    continue
                if frag and dest.endswith('.md') and frag not in anchors(dest):
                    print('%s:%d: %s: no heading #%s in %s' % (rel, n, target, frag,
                                                            os.path.relpath(dest, root)))
                    bad += 1
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
