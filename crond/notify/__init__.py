"""Telling people: notifiers, pings and metrics (docs/alerting.md).

What the daemon tells, when, and how delivery keeps its promises: none of it may delay a
start or the heartbeat, lose a notification to a restart, or leak a secret. The heavy
libraries (httpx, prometheus-client, apprise) are imported only by a daemon whose file
uses them.
"""
