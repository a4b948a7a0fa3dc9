"""The schedules file: from its bytes to validated, frozen values, or every mistake in it,
located.

- `loader`: the one way in (`load_file`, `loads`): read, parse, merge defaults,
  validate, and wrap each job (`loaded`); `defaults`: what each job takes from the file
  around it; `names`: the job and notifier names a file gives and uses;
- `model`: the pydantic models, one field a line, with their checks;
- `loaded`: what the rest of crond gets: LoadedConfig, LoadedJob;
- `yamlsource`: the YAML reader (every node located; aliases, depth and tags bounded),
  with `yamlanchors` (anchors and what their aliases may cost), `yamlscalars` (how a
  scalar is typed, which tags are allowed) and `yamlerrors`
  (YAML's own errors in crond's words); `places`: what it reads a file into, the data
  and where each part of it stands;
- `problems`: located problems and crond's wording of pydantic's errors; `wording`:
  how a value is shown in a message (escaped, shortened, a secret by its kind);
- `durations`: `90s`, `1h30m`.
"""
