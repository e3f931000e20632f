"""A flame graph as a static SVG (no script, like the rest of the page): each box a function on the
stacks through it, its width proportional to their samples or bytes, callers below callees; the
program's own frames coloured apart from the runtime's and the kernel's. Every box has a <title>
(the browser shows it on hover) with its full name, value and share; a label is drawn where the
box has room for it. Formatting only: the tree comes from stacks.merge."""
from __future__ import annotations

from xml.sax.saxutils import escape as _xml_escape

from memsleuth.analysis.stacks import Node
from memsleuth.textsafe import visible

WIDTH = 1200.0
ROW = 17.0
FONT = 11.0
CHAR = 6.4                  # px per character at FONT (a monospace estimate): labels are cut to fit
MIN_SHARE = 0.001           # boxes narrower than this share of the whole are left out (a thin line says nothing)
MAX_DEPTH = 64
COLOURS = {"program": ("#e8743b", "#f5b48a"), "runtime": ("#6b8cae", "#a9bfd6"), "kernel": ("#5f9e6e", "#9fcca9"),
           "root": ("#9aa4ad", "#c9cfd4")}
LEGEND = (("program", "the program's own code"), ("runtime", "libraries, allocator, runtime"),
          ("kernel", "kernel"))


def escape(text: str) -> str:
    """Text for the SVG: control and bidirectional characters as visible escapes (XML 1.0 forbids
    most controls outright), then XML's own metacharacters."""
    return _xml_escape(visible(text))


def _value_text(v: float, unit: str) -> str:
    from memsleuth.units import fmt_bytes, fmt_si
    if unit == "bytes":
        return fmt_bytes(v)
    if unit == "nanoseconds":
        return f"{v / 1e6:,.1f} ms"
    return fmt_si(v)


def svg(root: Node, title: str, unit: str) -> str:
    """The tree as an SVG flame graph: the root at the bottom, callees above their callers."""
    total = root.value or 1.0
    depth = min(root.depth, MAX_DEPTH)
    height = (depth + 2) * ROW + 8
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH:.0f} {height:.0f}" '
           f'width="{WIDTH:.0f}" height="{height:.0f}" font-family="ui-monospace, monospace" font-size="{FONT:.0f}">',
           f'<title>{escape(title)}</title>']
    x = 4.0
    for kind, words in LEGEND:
        out.append(f'<rect x="{x:.0f}" y="4" width="10" height="10" fill="{COLOURS[kind][0]}"/>'
                   f'<text x="{x + 14:.0f}" y="13">{escape(words)}</text>')
        x += 26 + CHAR * len(words)

    def box(node: Node, x: float, level: int, shade: int) -> None:
        w = node.value / total * WIDTH
        if w < WIDTH * MIN_SHARE or level >= MAX_DEPTH:
            return
        y = height - (level + 1) * ROW
        fill = COLOURS.get(node.kind, COLOURS["runtime"])[shade % 2]
        share = node.value / total
        tip = f"{node.name}: {_value_text(node.value, unit)} ({share:.1%})"
        out.append(f'<g><title>{escape(tip)}</title><rect x="{x:.1f}" y="{y:.1f}" width="{max(w - 0.5, 0.5):.1f}" '
                   f'height="{ROW - 1:.0f}" fill="{fill}" rx="1"/>')
        room = int((w - 6) / CHAR)
        if room >= 3:
            label = node.name if len(node.name) <= room else node.name[:room - 2] + ".."
            out.append(f'<text x="{x + 3:.1f}" y="{y + ROW - 5:.1f}">{escape(label)}</text>')
        out.append("</g>")
        cx = x
        for k, child in enumerate(sorted((node.children or {}).values(), key=lambda c: c.name)):
            box(child, cx, level + 1, shade + k + 1)
            cx += child.value / total * WIDTH

    box(root, 0.0, 0, 0)
    out.append("</svg>")
    return "".join(out)
