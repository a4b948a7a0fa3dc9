"""When jobs fire: pure arithmetic over instants, never the clock nor any I/O.

- `cronexpr`: the cron grammar (five fields, names, macros) and its messages;
- `zones`: IANA zones and their transitions (the tzdata in use);
- `timing`: a job's fires, `next_after(instant) -> Fire | None`, under the DST rules
  R1-R8 of docs/schedules.md;
- `plan`: which slot a job starts, skips or has missed at a wake (R9 grace, overlap,
  catch-up), and the heap of every job's next fire;
- `preview`: the fires `crond next` shows.
"""
