"""Validate a batch, quarantine bad rows, MERGE the rest, record the load (docs/adr/0003, 0005)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandera.polars as pa
import polars as pl

from tidewater.schemas import READINGS
from tidewater.warehouse import execute, write_frame

MAX_INVALID_SHARE = 0.05


def load_batch(path: Path, batch_id: str) -> None:
    frame = pl.read_parquet(path)
    try:
        valid, invalid = READINGS.validate(frame, lazy=True), frame.clear()
    except pa.errors.SchemaErrors as errors:
        invalid = errors.failure_cases
        valid = frame.join(invalid.select("index"), on="index", how="anti")
    write_frame(invalid, "quarantine.readings")
    if len(invalid) > MAX_INVALID_SHARE * len(frame):
        raise ValueError(f"{len(invalid)} of {len(frame)} rows invalid in {path.name}")
    write_frame(valid, "staging.readings")
    execute("""
        MERGE INTO readings r USING staging.readings s ON r.gauge_id = s.gauge_id AND r.event_ts = s.event_ts
        WHEN MATCHED THEN UPDATE SET level_m = s.level_m
        WHEN NOT MATCHED THEN INSERT (gauge_id, event_ts, level_m) VALUES (s.gauge_id, s.event_ts, s.level_m)
    """)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    execute("INSERT INTO load_audit VALUES (%s, %s, %s, %s, %s)", (batch_id, path.name, len(frame), len(valid), digest))
