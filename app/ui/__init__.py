"""The regulator's dashboard under /ui/: server-rendered pages (Jinja2) over the same services as the JSON API,
with htmx vendored under static/vendor/ and charts drawn as inline SVG on the server (no CDN; a strict
Content-Security-Policy, no inline script)."""
