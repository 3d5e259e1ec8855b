"""Text tables: times with their unit, numbers or a dash, and columns aligned (report.py and the sections)."""


def fmt_time(s) -> str:
    if s is None:
        return "-"
    if s < 0:                                   # a difference of two times (bench/door.py)
        return "-" + fmt_time(-s)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt(v, spec=".2f") -> str:
    return "-" if v is None else format(v, spec)


def table(headers, rows, left: int) -> str:
    """The first ``left`` columns left-aligned, the others (numbers) right-aligned."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])
