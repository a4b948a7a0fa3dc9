"""The JSON Schema of the schedules file (`crond schema`), for editors."""

from __future__ import annotations

from typing import Any

from crond.config.model import JOB_NAME, Config


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the schedules file, for editors (yaml-language-server)."""
    schema = Config.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "crond schedules file"
    schema["patternProperties"] = {"^x-": {}}  # the file's own keys, for anchors
    jobs = schema["properties"]["jobs"]
    jobs["propertyNames"] = {"pattern": f"^{JOB_NAME.pattern}$"}
    jobs["minProperties"] = 1
    job = schema["$defs"]["Job"]
    # "Exactly one" is checked by crond; an editor only flags "both", since `defaults`
    # may supply either half.
    job["allOf"] = [
        {"not": {"required": ["cron", "every"]}},
        {"not": {"required": ["command", "python"]}},
    ]
    return schema
