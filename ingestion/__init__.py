"""Lab-data ingestion core (no Prefect, no MLflow): inbox -> validated, partitioned Parquet dataset; archive; quarantine.

Which study a file belongs to (by its columns, exact names):

- press measurement table: `series, step, force_setpoint_N, force_N, sensor, displacement_um`
- drive recording: `t_s, torque_Nm, velocity_rad_s` (+ optional `position_rad`)

A file with every column of exactly one study belongs to it; with every column of both it is
ambiguous (quarantined). Otherwise it belongs to the study whose columns it has the larger
share of, if that share is at least half (so a press table lacking one column is reported as
"press table missing column ..."); anything else is "neither" (quarantined). Extra columns
are dropped; drive parts always carry `position_rad` (null when the file has none), so
all parts of a study share one Parquet schema.

Campaign, from the file name: `<campaign>__<anything>.csv|.parquet`, the part before the first
`__`, which must match `[a-z0-9-]{1,64}` (lower case, digits, `-`). Example:
`line-3__2026-05-01_run2.csv` -> campaign `line-3`. A name with `__` whose campaign part breaks
the rule (`Line_1__run.csv`, `line.3__x.csv`, `__x.csv`) is quarantined with the reason (file,
campaign part, rule), never filed under `default`; a name without `__` goes to `default`.

Layout under the data root:

```
datasets/study=<press|drive>/campaign=<name>/part-<sha256>.parquet   validated rows
archive/<sha256>-<safe name>                                          ingested originals
withdrawn/<sha256>-<safe name>                                        originals taken back out
quarantine/<safe name> + <safe name>.error.txt                        rejects + reason
ledger.jsonl                                                          one record per outcome
campaigns.toml                                                        the lab's studies per
                                                                      campaign (never written)
.staging/                                                             copies being ingested
.ingest.lock                                                          one run at a time (the
                                                                      inbox folder is locked too)
```

Identity is the SHA-256 of the file's bytes: a file whose content is already in the ledger is
a duplicate (archived, reported, not appended) whatever its name. Each part holds the validated
rows plus `source_sha256`; the part is named by the content hash, so rewriting it is
idempotent.

Which files, and when: only `.csv`/`.parquet` files directly in the inbox (anything else is
left in place and reported; `name.csv.part` is an upload in progress, renamed by the uploader
when complete). A file is taken when stable: not modified for the settle window, then the same
size, mtime and SHA-256 after waiting it again, and held open for writing by no process we can
see (`writers`: Linux `/proc`; other users' processes only as root). A file that grew after it
was taken (same name, the ingested bytes are its start) is ingested whole on the next run and
replaces the partial part (`replaces` in its ledger record). It is copied to
`<data root>/.staging/<sha256>-<safe name>`, hashed while copied; the staged copy is what is
read, stored, archived or quarantined (too big to stage: the original is quarantined). The inbox
file is removed at the end if it is still the file that was taken; if it changed meanwhile it is
set aside in quarantine (its old content is ingested already). Folders on the import path are
refused (`ingestion.staging.check_locations`).

Campaign integrity (`campaign_shape`): every press file of a campaign has the campaign's
sensor and step sets (the campaign is studied as one table); a file that differs is
quarantined with the difference named. `greylab ingest withdraw FILE|HASH` (`withdraw`) takes
an ingested file back out: ledger record `withdrawn`, part removed, original to `withdrawn/`.
Readers and jobs count the files `ledger.current_ingested` gives.

Crash safety: part (atomic temp + fsync + rename) -> ledger record (fsynced append, with the
inbox file's identity) -> archive the staged copy -> remove the inbox file. A staged copy left
by a run killed after its ledger record is archived by the next run. A re-run completes a half-done job: a part without ledger record is reused and
recorded; a ledger record whose original is still in the inbox is finished by archiving it.
Temporary files of killed writes start with a dot, so dataset readers (pyarrow) skip them;
the next run removes them.

Modules: `rules` (study, campaign, validation), `layout` (where files go), `results` (outcomes
and the report), `names`, `inbox` (scan, hash, identity), `moves` (no-overwrite moves), `ledger`
(JSON Lines ledger and the lock), `staging` (allowed folders, staged copies), `job` (one file's
crash-safe steps), `run` (`ingest_inbox`), `readers` (the dataset back), `references`
(`campaign:NAME[@HASH]` for flows), `campaign_shape`, `writers`, `withdraw`, `campaigns` (the
campaign file `campaigns.toml`: read and shape-checked for `--trigger-studies`; ingestion
itself never reads it). The Prefect tasks and
the MLflow recorder are `tasks.ingest.tasks` and `tasks.ingest.records`; atomic writes are
`schemas.storage`.
"""
