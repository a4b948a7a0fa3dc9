"""When jobs fire: pure arithmetic over instants, never the clock. What is done at a
fire (R9 grace, overlap, pauses, limits) is the scheduling core's: crond/schedule/.

- `cronparse`: the cron grammar (five fields, names, macros) and its messages, into a
  `cronexpr.CronExpr`: the fields' values and the wall times they match; `cronforms`:
  the richer fields (`L`, `W`, `#`, `?`, `H`) and their words;
- `zones`: IANA zones by name, the host's zone, the tz database in use (the only module
  here that reads files);
- `timeline`: a zone's stretches of constant offset and the transitions between them;
- `timing`: a job's fires, `next_after(instant) -> Fire | None`, under the DST rules
  R1-R8 of docs/schedules.md;
- `notes`: those rules in words: the notes on fires, the DST warnings of `validate`;
- `preview`: the fires `crond next` shows.
"""
