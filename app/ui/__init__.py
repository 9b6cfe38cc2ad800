"""The regulator's dashboard under /ui/: server-rendered pages (Jinja2) over the same services as the JSON API,
with htmx and uPlot vendored under static/vendor/ (no CDN; a strict Content-Security-Policy, no inline script)."""
