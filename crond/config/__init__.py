"""The schedules file: from its bytes to validated, frozen values, or every mistake in it,
located.

- `loader`: the one way in (`load_file`, `loads`): read, parse, merge defaults,
  validate, and wrap each job (`loaded`);
- `model`: the pydantic models, one field a line, with their checks;
- `loaded`: what the rest of crond gets: LoadedConfig, LoadedJob;
- `yamlsource`: the YAML reader (every node located; aliases, depth and tags bounded);
- `problems`: located problems and crond's wording of pydantic's errors;
- `durations`: `90s`, `1h30m`.
"""
