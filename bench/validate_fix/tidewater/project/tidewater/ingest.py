"""Convert a vendor file to Parquet in the raw zone, with UTC timestamps and pseudonymised operators."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from tidewater.pii import pseudonymise


def to_raw_zone(source: Path, vendor: str, lake: Path) -> Path:
    frame = pl.scan_csv(source).with_columns(
        pl.col("local_ts").str.to_datetime().dt.replace_time_zone(pl.col("tz").first()).dt.convert_time_zone("UTC").alias("event_ts"),
        pl.col("operator_email").map_elements(pseudonymise, return_dtype=pl.String).alias("operator_key"),
    ).drop("local_ts", "operator_email", "operator_name")
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    target = lake / f"dt={day}" / f"vendor={vendor}" / f"{source.stem}.parquet"
    frame.sink_parquet(target, compression="zstd")
    return target
