"""The daily load: 02:00 UTC, SLA 06:00 UTC (docs/adr/0002)."""

from datetime import UTC, datetime, timedelta

from airflow import DAG
from airflow.operators.python import PythonOperator
from tidewater.alerts import page_on_call
from tidewater.load import load_batch

default_args = {"retries": 3, "retry_delay": timedelta(minutes=5), "sla": timedelta(hours=4)}

with DAG(
    "load_readings_daily",
    schedule="0 2 * * *",
    start_date=datetime(2023, 7, 1, tzinfo=UTC),
    default_args=default_args,
    sla_miss_callback=page_on_call,
    catchup=False,
) as dag:
    PythonOperator(task_id="load", python_callable=load_batch, op_kwargs={"path": "{{ params.path }}", "batch_id": "{{ run_id }}"})
