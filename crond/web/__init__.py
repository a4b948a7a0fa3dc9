"""`crond web FILE`: the dashboard (docs/web.md), a process of its own beside the daemon.

It reads the state store as `crond status` does and steers the daemon through its control
socket as the commands do, so nothing it does can delay the schedule. Starlette serves
it through uvicorn; the pages are Jinja2 templates, autoescaped; every asset is served
from this package. Imported only by `crond web`: the extra `crond[web]` brings its parts.
"""
