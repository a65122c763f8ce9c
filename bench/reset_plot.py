"""The reset curve as an SVG image (no plotting library): kill -> resumed
against the job's workers, both axes logarithmic, ours beside published
points. The reset part (bench_elastic.py) calls write_reset_plot after its runs."""
import math
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 760, 470
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 40, 150  # margins; the legend sits below the axes
X_MIN, X_MAX = 1, 1 << 17                    # workers
Y_MIN, Y_MAX = 0.01, 1000.0                  # seconds


def _x(workers):
    span = math.log10(X_MAX) - math.log10(X_MIN)
    return LEFT + (math.log10(workers) - math.log10(X_MIN)) / span * (WIDTH - LEFT - RIGHT)


def _y(seconds):
    span = math.log10(Y_MAX) - math.log10(Y_MIN)
    return TOP + (math.log10(Y_MAX) - math.log10(seconds)) / span * (HEIGHT - TOP - BOTTOM)


def _marker(shape, x, y, color):
    if shape == "square":
        return f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{color}"/>'
    if shape == "diamond":
        return (f'<polygon points="{x:.1f},{y - 6:.1f} {x + 6:.1f},{y:.1f} {x:.1f},{y + 6:.1f} '
                f'{x - 6:.1f},{y:.1f}" fill="{color}"/>')
    if shape == "triangle":
        return (f'<polygon points="{x:.1f},{y - 6:.1f} {x + 6:.1f},{y + 5:.1f} '
                f'{x - 6:.1f},{y + 5:.1f}" fill="{color}"/>')
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{color}"/>'


def write_reset_plot(path, series, title):
    """series: (label, color, shape, [(workers, seconds), ...], joined) in
    legend order; `joined` draws a line through the points."""
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2:.0f}" y="22" text-anchor="middle" font-size="14">'
           f'{escape(title)}</text>']
    bottom = HEIGHT - BOTTOM
    # Grid and tick labels: every power of 4 workers, every decade of seconds.
    workers = 1
    while workers <= X_MAX:
        x = _x(workers)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{bottom}" stroke="#ddd"/>')
        label = f"{workers:,}"
        out.append(f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">{label}</text>')
        workers *= 4
    seconds = Y_MIN
    while seconds <= Y_MAX * 1.001:
        y = _y(seconds)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
                   'stroke="#ddd"/>')
        label = f"{seconds:g} s"
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
        seconds *= 10
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" '
               f'height="{bottom - TOP}" fill="none" stroke="#333"/>')
    out.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{bottom + 34}" '
               'text-anchor="middle">workers (ranks, GPUs)</text>')
    out.append(f'<text transform="translate(16,{(TOP + bottom) / 2:.0f}) rotate(-90)" '
               'text-anchor="middle">kill to resumed (s)</text>')
    for label, color, shape, points, joined in series:
        coords = [(_x(w), _y(s)) for w, s in points]
        if joined and len(coords) > 1:
            line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            out.append(f'<polyline points="{line}" fill="none" stroke="{color}" '
                       'stroke-width="2"/>')
        out.extend(_marker(shape, x, y, color) for x, y in coords)
    # The legend, one line per series, below the axes.
    for i, (label, color, shape, _, _) in enumerate(series):
        y = bottom + 56 + 16 * i
        out.append(_marker(shape, LEFT + 6, y - 4, color))
        out.append(f'<text x="{LEFT + 18}" y="{y}">{escape(label)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
