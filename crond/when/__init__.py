"""When jobs fire: pure arithmetic over instants, never the clock.

- `cronexpr`: the cron grammar (five fields, names, macros) and its messages;
- `zones`: IANA zones by name, the host's zone, the tz database in use (the only module
  here that reads files);
- `timeline`: a zone's stretches of constant offset and the transitions between them;
- `timing`: a job's fires, `next_after(instant) -> Fire | None`, under the DST rules
  R1-R8 of docs/schedules.md;
- `notes`: those rules in words: the notes on fires, the DST warnings of `validate`;
- `plan`: which slot a job starts, skips or has missed at a wake (R9 grace, overlap,
  catch-up), and the heap of every job's next fire;
- `preview`: the fires `crond next` shows.
"""
