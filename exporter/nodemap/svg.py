"""The node map drawn as one self-contained SVG document: layout, colours, text.

Boxes per NUMA node (physical cores with their hardware threads, CPUs held through DRA without
ids, memory bars, device chips),
then what spans NUMA nodes, what has no NUMA node, the containers straddling NUMA nodes, the
shapes' answers and a legend of the pods. Every CPU cell, device chip, memory bar and box
carries ``data-*`` attributes naming what it shows, so a browser test (or a script) can read
the picture back. Every string from the kubelet, sysfs or a configuration file goes through
:func:`escape`: pod names and device ids are treated as hostile.
"""

from __future__ import annotations

import html
import re
import time

from .picture import (
    Chip,
    ChipState,
    Cpu,
    CpuMode,
    CpuState,
    DraCpus,
    Holder,
    MemoryBar,
    NodeMap,
    NumaBox,
)

# XML 1.0 allows no other control characters, not even escaped; a string of odd bytes must
# not make the document unreadable
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
MAX_TEXT = 200  # characters of one kubelet string shown; longer ones are cut

CELL_W, CELL_H, CORE_PAD, CORE_GAP = 22, 18, 2, 4
BOX_W, BOX_PAD, BOX_GAP, MARGIN = 460, 10, 12, 16
CHIP, CHIP_GAP = 13, 3
BAR_W, BAR_H = BOX_W - 2 * BOX_PAD, 12
LINE = 15  # one line of 11px text
CHAR_W = 6.1  # the mean width of a character of that text, for wrapping
CHECK, CROSS = "\u2713", "\u2717"

STYLE = """
svg.nodemap{font-family:'DejaVu Sans',Verdana,sans-serif;font-size:11px;fill:#222}
.nodemap .title{font-size:17px;font-weight:bold}
.nodemap .head{font-size:12.5px;font-weight:bold}
.nodemap .dim{fill:#666}
.nodemap .small{font-size:10px}
.nodemap .warn{fill:#b45309}
.nodemap .bad{fill:#b91c1c}
.nodemap .good{fill:#15803d}
.nodemap .box{fill:#fff;stroke:#9ca3af;stroke-width:1}
.nodemap .span-box{fill:#f8fafc;stroke:#64748b;stroke-dasharray:6 3}
.nodemap .core{fill:#eef0f3;stroke:#c5cad3}
.nodemap .cpu{stroke:#fff;stroke-width:1}
.nodemap .cpu.free{fill:#dcfce7;stroke:#16a34a}
.nodemap .cpu.reserved{fill:#9ca3af}
.nodemap .cpu.shared{fill:#cbd5e1}
.nodemap .cpu.unknown{fill:#fff;stroke:#9ca3af;stroke-dasharray:2 2}
.nodemap .straddle{stroke:#111;stroke-width:2.2;stroke-dasharray:4 2}
.nodemap .conflict{stroke:#dc2626;stroke-width:2.5}
.nodemap .cpu-id{font-size:8.5px;pointer-events:none;text-anchor:middle}
.nodemap .on-dark{fill:#fff}
.nodemap .chip{stroke:#374151;stroke-width:.6}
.nodemap .chip.free{fill:#fff;stroke:#16a34a;stroke-width:1.2}
.nodemap .chip.unavailable{stroke:#dc2626;stroke-width:2.4}
.nodemap .chip.tainted{fill:url(#hatch-taint);stroke:#d97706;stroke-width:1.2}
.nodemap .chip.dra{rx:6}
.nodemap .bar-free{fill:#e2e8f0}
.nodemap .bar-used{fill:#2563eb}
.nodemap .bar-group{fill:url(#hatch-group)}
.nodemap .bar-frame{fill:none;stroke:#64748b}
"""

_DEFS = ('<defs><pattern id="hatch-group" width="6" height="6" patternUnits="userSpaceOnUse" '
         'patternTransform="rotate(45)"><rect width="6" height="6" fill="#93c5fd"/>'
         '<rect width="2.5" height="6" fill="#1d4ed8"/></pattern>'
         '<pattern id="hatch-taint" width="5" height="5" patternUnits="userSpaceOnUse" '
         'patternTransform="rotate(45)"><rect width="5" height="5" fill="#fff7ed"/>'
         '<rect width="2" height="5" fill="#fb923c"/></pattern></defs>')


def escape(text: object, limit: int = MAX_TEXT) -> str:
    """Text or attribute value, safe in SVG and HTML alike."""
    value = _NOT_XML.sub("\ufffd", str(text))
    if len(value) > limit:
        value = value[:limit - 1] + "\u2026"
    return html.escape(value, quote=True)


def pod_colour(index: int) -> str:
    """A pod's colour: hues a golden angle apart, so pods listed one after another differ;
    three lightness steps tell apart pods whose hues come round again."""
    hue = (index * 137.508) % 360
    lightness = (42, 55, 35)[(index // 3) % 3]
    return f"hsl({hue:.0f},68%,{lightness}%)"


def _dark(index: int) -> bool:
    return (index // 3) % 3 != 1


def gib(size: int) -> str:
    for unit, suffix in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if size >= unit:
            return f"{size / unit:.1f} {suffix}"
    return f"{size} B"


def wrap(text: str, width: float) -> list[str]:
    """Words in lines of at most ``width`` pixels (by the mean character width)."""
    most = max(10, int(width / CHAR_W))
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > most:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


class _Canvas:
    """SVG elements in order, and the height drawn so far."""

    def __init__(self, nodemap: NodeMap):
        self.parts: list[str] = []
        self.colour = {key: i for i, key in enumerate(nodemap.pods)}

    def add(self, text: str) -> None:
        self.parts.append(text)

    def text(self, x: float, y: float, content: str, cls: str = "", extra: str = "") -> None:
        """``content`` already escaped (it may hold tspans)."""
        klass = f' class="{cls}"' if cls else ""
        self.add(f'<text x="{x:.1f}" y="{y:.1f}"{klass}{extra}>{content}</text>')

    def holder_colour(self, holders: tuple[Holder, ...]) -> tuple[str, bool]:
        index = self.colour.get(holders[0].pod_key, 0) if holders else 0
        return pod_colour(index), _dark(index)


def render_svg(nodemap: NodeMap, now: float | None = None) -> str:
    """The whole map as one ``<svg>`` element (a document of its own, or inline in HTML)."""
    canvas = _Canvas(nodemap)
    y = _header(canvas, nodemap, now)
    y = _grid(canvas, nodemap.numa, y, nodemap)
    for box in nodemap.spanning:
        y = _wide_box(canvas, box, y, nodemap,
                      f"Local to NUMA nodes {box.numa} together")
    if nodemap.apart is not None:
        y = _wide_box(canvas, nodemap.apart, y, nodemap, "No NUMA node known (devices without "
                      "topology, CPUs or NUMA ids sysfs does not know)")
    y = _straddlers(canvas, nodemap, y)
    y = _shapes(canvas, nodemap, y)
    y = _pods(canvas, nodemap, y)
    width = _width(nodemap)
    body = "".join(canvas.parts)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="nodemap" width="{width}" '
            f'height="{y + MARGIN:.0f}" viewBox="0 0 {width} {y + MARGIN:.0f}" role="img" '
            f'aria-label="NUMA map of node {escape(nodemap.node_name)}">'
            f"<style>{STYLE}</style>{_DEFS}"
            f'<rect width="100%" height="100%" fill="#f9fafb"/>{body}</svg>')


def _columns(count: int) -> int:
    return max(1, min(count, 4))


def _width(nodemap: NodeMap) -> int:
    columns = _columns(len(nodemap.numa))
    return max(2 * MARGIN + columns * BOX_W + (columns - 1) * BOX_GAP, 2 * MARGIN + 2 * BOX_W)


# ---- header and legend ---------------------------------------------------------------------

_CPU_MODE = {CpuMode.STATIC: "CPU manager static", CpuMode.NONE: "CPU manager none (no "
             "exclusive CPUs: every CPU is the shared pool)",
             CpuMode.DRA: "CPU manager none; exclusive CPUs from DRA",
             CpuMode.UNKNOWN: "CPU manager unknown (no GetAllocatableResources: reserved and free "
             "CPUs not known)"}
_MEMORY_MODE = {"static": "memory manager Static", "none": "memory manager None (no memory "
                "bars)", "unknown": "memory manager unknown"}


def _header(canvas: _Canvas, nodemap: NodeMap, now: float | None) -> float:
    y = MARGIN + 16
    canvas.text(MARGIN, y, f"NUMA map of node {escape(nodemap.node_name or '(unnamed)')}",
                "title")
    y += LINE + 4
    cpu_mode = _CPU_MODE[nodemap.cpu_mode]
    if nodemap.cpu_drivers:  # who allocates them through DRA, also beside a static manager
        cpu_mode += f" (DRA CPU driver {', '.join(nodemap.cpu_drivers)})"
    parts = [f"kubelet podresources API {escape(nodemap.api_version)}",
             cpu_mode, _MEMORY_MODE.get(nodemap.memory_mode, "")]
    canvas.text(MARGIN, y, escape(" \u00b7 ".join(p for p in parts if p)), "dim")
    y += LINE
    if nodemap.refreshed_at is not None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(nodemap.refreshed_at))
        age = max(0, round((now if now is not None else time.time()) - nodemap.refreshed_at))
        state = ("" if nodemap.kubelet_up else
                 ' <tspan class="bad">kubelet unreachable: the last good snapshot</tspan>')
        canvas.text(MARGIN, y, f'snapshot of {stamp} (<tspan id="age" data-refreshed='
                               f'"{nodemap.refreshed_at:.3f}">{age} s ago</tspan>){state}')
        y += LINE
    if nodemap.issues:
        listed = ", ".join(f"{kind}={count}" for kind, count in nodemap.issues.items())
        canvas.text(MARGIN, y, escape(f"data issues: {listed}"), "warn")
        y += LINE
    return _legend(canvas, y + 6)


def _legend(canvas: _Canvas, y: float) -> float:
    x = float(MARGIN)
    items = [
        ('<rect width="16" height="12" fill="hsl(0,68%,42%)" class="cpu"/>',
         "held (colour per pod)"),
        ('<rect width="16" height="12" class="cpu free"/>', "free"),
        ('<rect width="16" height="12" class="cpu reserved"/>', "reserved"),
        ('<rect width="16" height="12" class="cpu shared"/>', "shared pool"),
        ('<rect width="16" height="12" fill="#ddd" class="straddle"/>',
         "container spans NUMA nodes"),
        ('<rect width="12" height="12" fill="#bbb" class="chip unavailable"/>',
         "device unhealthy/unregistered"),
        ('<rect width="12" height="12" class="chip tainted"/>', "DRA device tainted"),
        ('<rect width="16" height="12" class="bar-group"/>', "memory spanning NUMA nodes (est.)"),
    ]
    for swatch, label in items:
        width = 22 + len(label) * CHAR_W + 14
        if x + width > MARGIN + 2 * BOX_W:
            x = MARGIN
            y += LINE + 2
        canvas.add(f'<g transform="translate({x:.1f},{y - 10:.1f})">{swatch}</g>')
        canvas.text(x + 22, y, escape(label))
        x += width
    return y + LINE + 4


# ---- NUMA boxes ---------------------------------------------------------------------------

def _grid(canvas: _Canvas, boxes: tuple[NumaBox, ...], y: float, nodemap: NodeMap) -> float:
    columns = _columns(len(boxes))
    for start in range(0, len(boxes), columns):
        row = boxes[start:start + columns]
        heights = []
        for column, box in enumerate(row):
            x = MARGIN + column * (BOX_W + BOX_GAP)
            heights.append(_box(canvas, box, x, y, BOX_W, f"NUMA node {box.numa}", nodemap))
        y += max(heights) + BOX_GAP
    return y


def _wide_box(canvas: _Canvas, box: NumaBox, y: float, nodemap: NodeMap, title: str) -> float:
    width = _width(nodemap) - 2 * MARGIN
    return y + _box(canvas, box, MARGIN, y, width, title, nodemap, spanning=True) + BOX_GAP


def _box(canvas: _Canvas, box: NumaBox, x: float, y: float, width: float, title: str,
         nodemap: NodeMap, spanning: bool = False) -> float:
    """One box; returns its height."""
    frame = len(canvas.parts)
    canvas.add("")  # the frame, once the height is known
    inner = width - 2 * BOX_PAD
    cy = y + BOX_PAD + 12
    cpus = box.cpus
    summary = [escape(title)]
    counted = sum(d.count for d in box.dra_cpus)
    if cpus:
        held = sum(1 for c in cpus if c.state == CpuState.HELD)
        free = sum(1 for c in cpus if c.state == CpuState.FREE)
        summary.append(f"{len(cpus)} CPUs: {held} held, {free} free"
                       + (f", {counted} held via DRA" if counted else ""))
    elif counted:
        summary.append(f"{counted} CPUs held via DRA")
    elif not spanning:
        summary.append("no CPUs")
    if box.memory_sysfs:
        summary.append(f"{gib(box.memory_sysfs)} (sysfs)")
    canvas.text(x + BOX_PAD, cy, " \u00b7 ".join(summary), "head")
    cy += LINE
    if box.in_memory_group:
        canvas.text(x + BOX_PAD, cy, "part of a memory group: no single-NUMA memory request is "
                                     "served here", "warn")
        cy += LINE
    if box.fits:
        cy = _fits(canvas, box, x + BOX_PAD, cy, inner)
    cy = _cores(canvas, box, x + BOX_PAD, cy + 2, inner)
    if box.dra_cpus:
        cy = _dra_cpus(canvas, box.dra_cpus, box.numa, x + BOX_PAD, cy, inner)
    for bar in box.memory:
        cy = _memory_bar(canvas, bar, box.numa, x + BOX_PAD, cy, inner)
    for group in box.groups:
        names = ", ".join(h.name for h in group.holders)
        line = f"{group.memory_type} {gib(group.size)} over NUMA nodes {box.numa}: {names}"
        for part in wrap(line, inner):
            canvas.text(x + BOX_PAD, cy + 10, escape(part, 400))
            cy += LINE
        canvas.add(f'<rect class="bar-group memory-group" x="{x + BOX_PAD}" y="{cy:.1f}" '
                   f'width="{inner:.0f}" height="{BAR_H}" data-numa="{escape(box.numa)}" '
                   f'data-memory-type="{escape(group.memory_type)}" data-size="{group.size}"/>')
        cy += BAR_H + 6
    cy = _chips(canvas, box.chips, x + BOX_PAD, cy, inner)
    height = cy - y + BOX_PAD - 4
    cls = "box span-box" if spanning else "box"
    canvas.parts[frame] = (f'<g class="numa" data-numa="{escape(box.numa)}">'
                           f'<rect class="{cls}" x="{x}" y="{y}" width="{width}" '
                           f'height="{height:.0f}" rx="6"/>')
    canvas.add("</g>")
    return height


def _fits(canvas: _Canvas, box: NumaBox, x: float, y: float, width: float) -> float:
    parts = [f'<tspan class="{"good" if ok else "bad"}" data-shape="{escape(name)}" '
             f'data-fits="{str(ok).lower()}">{escape(name, 40)} {CHECK if ok else CROSS}'
             "</tspan>" for name, ok in box.fits]
    line: list[str] = []
    used = len("fits here alone: ")
    for part, (name, _) in zip(parts, box.fits):
        length = min(len(name), 40) + 3
        if line and (used + length) * CHAR_W > width:
            canvas.text(x, y, "fits here alone: " + " ".join(line), "dim")
            y += LINE
            line, used = [], len("fits here alone: ")
        line.append(part)
        used += length
    if line:
        canvas.text(x, y, "fits here alone: " + " ".join(line), "dim")
        y += LINE
    return y


def _cores(canvas: _Canvas, box: NumaBox, x: float, y: float, width: float) -> float:
    cx, row_h = x, 0.0
    for core in box.cores:
        core_w = len(core.cpus) * CELL_W + 2 * CORE_PAD
        if cx > x and cx + core_w > x + width:
            cx, y = x, y + row_h + CORE_GAP
        canvas.add(f'<rect class="core" x="{cx}" y="{y:.1f}" width="{core_w}" '
                   f'height="{CELL_H + 2 * CORE_PAD}" rx="3"/>')
        for i, cpu in enumerate(core.cpus):
            _cpu(canvas, cpu, box.numa, cx + CORE_PAD + i * CELL_W, y + CORE_PAD)
        cx += core_w + CORE_GAP
        row_h = CELL_H + 2 * CORE_PAD
    return y + row_h + (8 if box.cores else 0)


def _dra_cpus(canvas: _Canvas, held: tuple[DraCpus, ...], numa: str, x: float, y: float,
              width: float) -> float:
    """CPUs held through DRA claims on devices grouping CPUs: a count per holder, no cells
    (which CPUs they are, nothing the exporter reads says)."""
    for line in wrap("Held via DRA, CPU ids unknown (the count is the container's CPU "
                     "request):", width):
        canvas.text(x, y + 10, escape(line, 400), "small dim")
        y += 14
    for item in held:
        colour, _ = canvas.holder_colour((item.holder,))
        title = escape(f"{item.count} CPUs of NUMA {numa} held by {item.holder.name} through "
                       "DRA; which CPUs is not known", 600)
        canvas.add(f'<g class="dra-cpus" data-numa="{escape(numa)}" '
                   f'data-holder="{escape(item.holder.name)}" data-count="{item.count}">'
                   f'<rect x="{x}" y="{y + 1:.1f}" width="{CELL_W - 1}" height="{CELL_H - 6}" '
                   f'rx="2" fill="{colour}" class="cpu"/><title>{title}</title></g>')
        canvas.text(x + CELL_W + 4, y + 10, escape(f"{item.count} CPUs: {item.holder.name}", 300),
                    "small")
        y += 14
    return y + 4


def _holder_text(holders: tuple[Holder, ...]) -> str:
    return " and ".join(h.name + ("" if h.container else " (pod level)") for h in holders)


def _cpu(canvas: _Canvas, cpu: Cpu, numa: str, x: float, y: float) -> None:
    classes = ["cpu", str(cpu.state)]
    fill = ""
    dark = False
    if cpu.state == CpuState.HELD:
        colour, dark = canvas.holder_colour(cpu.holders)
        fill = f' fill="{colour}"'
    title = f"CPU {cpu.cpu}: {cpu.state}"
    if cpu.holders:
        title = f"CPU {cpu.cpu}: {_holder_text(cpu.holders)}"
    if cpu.driver:
        title += f" (through DRA, driver {cpu.driver})"
    if len(cpu.holders) > 1:
        classes.append("conflict")
        title += " (assigned twice: inconsistent kubelet data)"
    if cpu.straddles:
        classes.append("straddle")
        title += " (container spans NUMA nodes)"
    holder = escape(cpu.holders[0].name) if cpu.holders else ""
    canvas.add(f'<rect class="{" ".join(classes)}" x="{x}" y="{y:.1f}" width="{CELL_W - 1}" '
               f'height="{CELL_H}" rx="2"{fill} data-cpu="{cpu.cpu}" data-state="{cpu.state}" '
               f'data-numa="{escape(numa)}" data-holder="{holder}"'
               + (f' data-driver="{escape(cpu.driver)}"' if cpu.driver else "")
               + f"><title>{escape(title, 600)}</title></rect>")
    canvas.text(x + (CELL_W - 1) / 2, y + CELL_H - 5, str(cpu.cpu),
                "cpu-id on-dark" if dark else "cpu-id")


def _memory_bar(canvas: _Canvas, bar: MemoryBar, numa: str, x: float, y: float,
                width: float) -> float:
    words = [f"{escape(bar.memory_type)}: {gib(bar.allocated)} used"]
    if bar.group_share:
        words.append(f"+ {gib(bar.group_share)} spanning (est.)")
    if bar.allocatable is not None:
        words[-1] += ","
        words.append(f"{gib(bar.free or 0)} free of {gib(bar.allocatable)}")
    else:
        words[-1] += ", none allocatable"
    canvas.text(x, y + 10, " ".join(words), "small")
    y += 14
    total = max(bar.allocatable or 0, bar.allocated + bar.group_share, 1)
    used_w = width * min(bar.allocated, total) / total
    group_w = width * min(bar.group_share, total - min(bar.allocated, total)) / total
    canvas.add(f'<g class="memory" data-numa="{escape(numa)}" '
               f'data-memory-type="{escape(bar.memory_type)}" '
               f'data-allocatable="{"" if bar.allocatable is None else bar.allocatable}" '
               f'data-allocated="{bar.allocated}" data-group-share="{bar.group_share}">'
               f'<rect class="bar-free" x="{x}" y="{y:.1f}" width="{width:.1f}" height="{BAR_H}"/>'
               f'<rect class="bar-used" x="{x}" y="{y:.1f}" width="{used_w:.1f}" height="{BAR_H}"/>'
               f'<rect class="bar-group" x="{x + used_w:.1f}" y="{y:.1f}" width="{group_w:.1f}" '
               f'height="{BAR_H}"/><rect class="bar-frame" x="{x}" y="{y:.1f}" '
               f'width="{width:.1f}" height="{BAR_H}"/><title>{" ".join(words)}'
               "</title></g>")
    return y + BAR_H + 6


def _chips(canvas: _Canvas, chips: tuple[Chip, ...], x: float, y: float, width: float) -> float:
    """Chips grouped by resource (or DRA driver), one labelled run each."""
    runs: dict[tuple[bool, str], list[Chip]] = {}
    for chip in chips:
        runs.setdefault((chip.dra, chip.resource), []).append(chip)
    for (dra, resource), run in runs.items():
        held = sum(1 for c in run if c.state in (ChipState.HELD, ChipState.UNAVAILABLE))
        label = f"{'DRA ' if dra else ''}{resource}: {len(run)}, {held} held"
        unavailable = sum(1 for c in run if c.state == ChipState.UNAVAILABLE)
        if unavailable:
            label += f", {unavailable} unhealthy or unregistered"
        canvas.text(x, y + 10, escape(label, 120))
        y += 14
        cx = x
        for chip in run:
            if cx + CHIP > x + width:
                cx, y = x, y + CHIP + CHIP_GAP
            _chip(canvas, chip, cx, y)
            cx += CHIP + CHIP_GAP
        y += CHIP + 8
    return y


def _chip(canvas: _Canvas, chip: Chip, x: float, y: float) -> None:
    classes = ["chip", str(chip.state)] + (["dra"] if chip.dra else [])
    fill = ""
    if chip.holders:
        colour, _ = canvas.holder_colour(chip.holders)
        fill = f' fill="{colour}"'
    if chip.straddles:
        classes.append("straddle")
    kind = "DRA device" if chip.dra else "device"
    title = f"{kind} {chip.resource} {chip.device} (NUMA {chip.numa}): "
    title += _holder_text(chip.holders) if chip.holders else str(chip.state)
    if chip.state == ChipState.UNAVAILABLE:
        title += " (assigned, but not allocatable: unhealthy or its plugin not registered)"
    if chip.shares:
        title += f" ({chip.shares} shares)"
    holder = escape(chip.holders[0].name) if chip.holders else ""
    canvas.add(f'<rect class="{" ".join(classes)}" x="{x:.1f}" y="{y:.1f}" width="{CHIP}" '
               f'height="{CHIP}" rx="2"{fill} data-kind="{"dra" if chip.dra else "device"}" '
               f'data-resource="{escape(chip.resource)}" data-device="{escape(chip.device)}" '
               f'data-numa="{escape(chip.numa)}" data-state="{chip.state}" '
               f'data-holder="{holder}"><title>{escape(title, 600)}</title></rect>')


# ---- lists below the boxes ----------------------------------------------------------------

def _section(canvas: _Canvas, title: str, y: float) -> float:
    canvas.text(MARGIN, y + 14, escape(title), "head")
    return y + 14 + LINE


def _straddlers(canvas: _Canvas, nodemap: NodeMap, y: float) -> float:
    if not nodemap.straddlers:
        return y
    y = _section(canvas, f"Containers spanning NUMA nodes: {len(nodemap.straddlers)} "
                         "(outlined above)", y)
    for straddler in nodemap.straddlers:
        colour, _ = canvas.holder_colour((straddler.holder,))
        canvas.add(f'<rect class="straddle" x="{MARGIN}" y="{y - 10:.1f}" width="16" '
                   f'height="12" fill="{colour}"/>')
        canvas.text(MARGIN + 22, y, escape(f"{straddler.holder.name}: needs "
                                           f"{straddler.numa_nodes} NUMA nodes", 300),
                    extra=f' data-straddler="{escape(straddler.holder.name)}"')
        y += LINE
    return y


def _shapes(canvas: _Canvas, nodemap: NodeMap, y: float) -> float:
    if not nodemap.shapes:
        return y
    y = _section(canvas, "Would the kubelet admit one more pod of each configured shape?", y)
    width = _width(nodemap) - 2 * MARGIN - 22
    for shape in nodemap.shapes:
        mark = CHECK if shape.admitted else CROSS
        capacity = ("any number" if shape.capacity == float("inf")
                    else f"{int(shape.capacity)} more")
        verdict = "admitted" if shape.admitted else f"rejected: {shape.reason}"
        head = (f'<tspan class="{"good" if shape.admitted else "bad"}">{mark}</tspan> '
                f'<tspan font-weight="bold">{escape(shape.name, 80)}</tspan> '
                f"{escape(verdict)} \u00b7 capacity {capacity} \u00b7 blocking resource "
                f"{escape(shape.blocking)}")
        canvas.text(MARGIN, y, head, extra=f' data-shape="{escape(shape.name)}" '
                                           f'data-admitted="{str(shape.admitted).lower()}"')
        y += LINE
        for line in wrap(shape.sentence, width):
            canvas.text(MARGIN + 22, y, escape(line, 400), "dim")
            y += LINE
    return y


POD_LEGEND = 60  # pods named in the legend; the others only in their cells' titles


def _pods(canvas: _Canvas, nodemap: NodeMap, y: float) -> float:
    if not nodemap.pods:
        return y
    y = _section(canvas, f"Pods holding exclusive resources: {len(nodemap.pods)}", y)
    column_w = 280
    columns = max(1, int((_width(nodemap) - 2 * MARGIN) // column_w))
    shown = nodemap.pods[:POD_LEGEND]
    for i, key in enumerate(shown):
        x = MARGIN + (i % columns) * column_w
        row_y = y + (i // columns) * LINE
        canvas.add(f'<rect x="{x}" y="{row_y - 10:.1f}" width="12" height="12" rx="2" '
                   f'fill="{pod_colour(i)}"/>')
        canvas.text(x + 18, row_y, escape("/".join(key), 42),
                    extra=f' data-pod="{escape("/".join(key))}"')
    y += ((len(shown) + columns - 1) // columns) * LINE
    if len(nodemap.pods) > len(shown):
        canvas.text(MARGIN, y, f"and {len(nodemap.pods) - len(shown)} more (hover over a CPU "
                               "or device for its holder)", "dim")
        y += LINE
    return y

