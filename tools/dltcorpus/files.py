"""A status for every file of the repository that are not run: notebooks that are no pipeline
(data generators, event-log or dashboard queries, ML training), notebooks out of scope (and
why: an MLflow model, Unity Catalog names, an outside service), and everything else by kind
(documentation, images, Terraform, bundle settings). Notebooks run by a case get their status
from the run.

A notebook is a Databricks source export (first line ``# Databricks notebook source`` or
``-- Databricks notebook source``) or a Jupyter ``.ipynb``. A notebook this list does not know
(a newer snapshot of the repository) is reported as unclassified, never silently skipped.
"""

from __future__ import annotations

from pathlib import Path

NOT_PIPELINE = "not a pipeline notebook"
OUT_OF_SCOPE = "out of scope"
OTHER = "not a notebook"
UNCLASSIFIED = "unclassified"

GENERATOR = "data generator; the runner writes data of the same shape itself"
EVENT_LOG = "event log queries, run against a pipeline's event log after it ran"
MLFLOW = "loads an MLflow model (mlflow.pyfunc.spark_udf of a run id) to score the loans"

# path -> (kind, why)
NOTEBOOKS: dict[str, tuple[str, str]] = {
    "python/DLT Event Log Queries.py": (NOT_PIPELINE, EVENT_LOG),
    "python/Loan Risk Part 2 - ML Scoring.py": (OUT_OF_SCOPE, MLFLOW),
    "sql/Loan Risk Part 2 - ML Scoring.py": (
        OUT_OF_SCOPE, "registers an MLflow model (run id) as the SQL function loanRiskScoring"),
    "sql/Loan Risk Part 3 - ML Scoring.sql": (
        OUT_OF_SCOPE, "scores with loanRiskScoring, the MLflow model Part 2 registers"),
    "ml models/loan risk ml model.py": (NOT_PIPELINE, "trains the GBT model with Spark ML and "
                                                      "logs it to MLflow"),
    "change-data-capture-example/PipelineSetting.json.sql": (
        NOT_PIPELINE, "the CDC pipeline's settings (JSON); the runner uses its configuration "
                      "and target"),
    "change-data-capture-example/notebooks/1-CDC_DataGenerator.py": (NOT_PIPELINE, GENERATOR),
    "change-data-capture-example/notebooks/3. Retail_DLT_CDC_Monitoring.py": (
        NOT_PIPELINE, EVENT_LOG),
    "apply-changes-from-snapshot-demo/src/notebooks/generate_snapshot.py": (
        NOT_PIPELINE, GENERATOR),
    "applyInPandasWithState-integral-calculus/00_Runbook_for_Demo.py": (
        NOT_PIPELINE, "runbook: creates the source table and appends three time windows"),
    "applyInPandasWithState-integral-calculus/resources/config.py": (
        NOT_PIPELINE, "the runbook's settings (dbutils.fs.mkdirs)"),
    "customer360-fivetran-dlt-demo/Customer 360.sql": (
        OUT_OF_SCOPE, "reads the tables Fivetran syncs from Salesforce and MySQL "
                      "(retail_demo_salesforce.contact, mysql_azure_banking_db.transactions)"),
    "customer360-fivetran-dlt-demo/DLT Pipeline Monitoring.sql": (NOT_PIPELINE, EVENT_LOG),
    "customer360-fivetran-dlt-demo/Sample Query Examples for Dashboard.sql": (
        NOT_PIPELINE, "dashboard queries"),
    "divvy-bike-demo/dbsql-divvybike-dashboard-sql.sql": (NOT_PIPELINE, "dashboard queries"),
    "divvy-bike-demo/dlt-sql-streaming-divvybikes.sql": (
        OUT_OF_SCOPE, "its input is what the ingest notebooks fetch from the Divvy bikes "
                      "(GBFS) and OpenWeather APIs"),
    "divvy-bike-demo/python-divvybike-api-ingest-stationinformation.py": (
        NOT_PIPELINE, "API ingest job: calls the Divvy bikes API (outside service)"),
    "divvy-bike-demo/python-divvybike-api-ingest-stationstatus.py": (
        NOT_PIPELINE, "API ingest job: calls the Divvy bikes API (outside service)"),
    "divvy-bike-demo/python-weatherinfo-api-ingest.py": (
        NOT_PIPELINE, "API ingest job: calls the OpenWeather API (outside service)"),
    "dlt-serverless-benchmarks/enzyme/00_Data_Generator.py": (NOT_PIPELINE, GENERATOR),
    "dlt-serverless-benchmarks/enzyme/01_DLT_Aggregation_Notebook.py": (
        OUT_OF_SCOPE, "reads the Unity Catalog table main.data.customers (a three-part name "
                      "written in the code)"),
    "dlt-serverless-benchmarks/ingestion/00_Data_Generator.py": (NOT_PIPELINE, GENERATOR),
    "dms-dlt-cdc-demo/resources/dlt/dms-mysql-cdc-demo.py": (
        OUT_OF_SCOPE, "CDC files from AWS DMS replicating MySQL on RDS (deployed by its "
                      "Terraform)"),
    "dms-dlt-cdc-demo/resources/utils/dms-mysql-cdc-analysis.py": (
        NOT_PIPELINE, "queries on the pipeline's tables"),
    "financial-services-examples/Personalization/00 - Customer Transaction & Behavioral Data "
    "Producer.py": (NOT_PIPELINE, "data producer (Debezium-shaped records to Kafka)"),
    "financial-services-examples/Personalization/01 - Python Read Kafka Source.py": (
        OUT_OF_SCOPE, "Kafka brokers from Databricks secrets (dbutils.secrets) over TLS and a "
                      "schema read from banking.checking_account, which the producer creates"),
    "financial-services-examples/Personalization/02 - DLT APPLY CHANGES.sql": (
        OUT_OF_SCOPE, "part of the pipeline of 01 - Python Read Kafka Source (reads its "
                      "bronze tables)"),
    "financial-services-examples/Personalization/03 - DLT Continuous Ingestion of Customer "
    "Buying Patterns.py": (OUT_OF_SCOPE, "part of the pipeline of 01 - Python Read Kafka Source"),
    "kafka-dlt-streaminganalytics/K-GenerateEvents.py": (NOT_PIPELINE, GENERATOR),
    "kafka-dlt-streaminganalytics/K-StreamingDataAnalytics.sql": (
        NOT_PIPELINE, "queries on the pipeline's tables"),
    "kimball_modelling_demo/src/1 Setup.sql": (
        OUT_OF_SCOPE, "Unity Catalog schema and SQL functions (dbdemos.tpch_kimball.*)"),
    "kimball_modelling_demo/src/2 Dimensions.sql": (
        OUT_OF_SCOPE, "reads samples.tpch.* (three-part Unity Catalog names) and PRIMARY KEY "
                      "constraints"),
    "kimball_modelling_demo/src/3 Facts.sql": (
        OUT_OF_SCOPE, "reads samples.tpch.* and calls dbdemos.tpch_kimball.* functions "
                      "(three-part Unity Catalog names)"),
    "mapInPandas-dlt-ingestion/00_intro_to_mapInPandas.py": (
        NOT_PIPELINE, "tutorial on mapInPandas (no datasets)"),
    "mapInPandas-dlt-ingestion/01_StructuredStreaming_Queries.py": (
        NOT_PIPELINE, "Structured Streaming queries untarring files from S3 (boto3)"),
    "mapInPandas-dlt-ingestion/02_DLT_Pipeline.py": (
        OUT_OF_SCOPE, "downloads tar files from AWS S3 with boto3 inside mapInPandas"),
    "mapInPandas-dlt-ingestion/resources/create_mock_tar_files.py": (
        NOT_PIPELINE, "data generator uploading tar files to S3"),
    "motion-demo/M-DataPipeline DLT.py": (OUT_OF_SCOPE, "reads an AWS Kinesis stream"),
    "motion-demo/M-Heatmap.py": (NOT_PIPELINE, "plotly charts of the pipeline's table"),
    "motion-demo/M-Histo.py": (NOT_PIPELINE, "charts of the pipeline's table"),
    "motion-demo/M-Magn SSS.py": (NOT_PIPELINE, "a streaming query displayed in the notebook"),
    "motion-demo/M-Plot.py": (NOT_PIPELINE, "charts of the pipeline's table"),
    "motion-demo/DeltaSharing_DAIS2023.ipynb": (NOT_PIPELINE, "Delta Sharing client notebook"),
    "twitter-dlt-huggingface-demo/Twitter-DataFlow.sql": (
        OUT_OF_SCOPE, "its input is tweets Twitter-Stream-S3 lands from the Twitter API"),
    "twitter-dlt-huggingface-demo/Twitter-SentimentAnalysis.py": (
        NOT_PIPELINE, "sentiment analysis of the silver table with a Hugging Face model"),
    "twitter-dlt-huggingface-demo/Twitter-Stream-S3.py": (
        NOT_PIPELINE, "Twitter API stream (tweepy) written to S3 (outside services)"),
}

# by file name or suffix -> why (files that are no notebooks)
BY_NAME = {"README.md": "documentation", ".gitignore": "repository housekeeping",
           ".DS_Store": "repository housekeeping", ".gitkeep": "repository housekeeping",
           "requirements.txt": "AWS Lambda dependencies",
           "databricks.yml": "Databricks asset bundle settings",
           "bundle_config_schema.json": "Databricks asset bundle schema"}
BY_SUFFIX = {".md": "documentation", ".png": "image", ".jpg": "image", ".jpeg": "image",
             ".gif": "image", ".tf": "Terraform (AWS and Databricks resources)",
             ".yml": "Databricks asset bundle settings", ".yaml": "settings",
             ".html": "web page", ".excalidraw": "diagram", ".json": "settings",
             ".pyi": "editor settings"}
BY_FOLDER = {"dms-dlt-cdc-demo/resources/lambda/": "AWS Lambda function code",
             "dms-dlt-cdc-demo/resources/utils/dlt_runner.py":
                 "script calling the Databricks pipelines REST API",
             "kimball_modelling_demo/.vscode/": "editor settings"}


def repository_files(repo: Path) -> list[str]:
    """Every file of the snapshot (``.git`` left out), as sorted relative paths."""
    return sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*")
                  if p.is_file() and ".git" not in p.relative_to(repo).parts)


def is_notebook(path: Path) -> bool:
    if path.suffix == ".ipynb":
        return True
    if path.suffix not in (".py", ".sql", ".scala", ".r"):
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        first = f.readline().strip()
    return first in ("# Databricks notebook source", "-- Databricks notebook source",
                     "// Databricks notebook source")


def classify(repo: Path, rel: str) -> tuple[str, str]:
    """(kind, why) of a file no case runs."""
    if rel in NOTEBOOKS:
        return NOTEBOOKS[rel]
    for folder, why in BY_FOLDER.items():
        if rel.startswith(folder):
            return OTHER, why
    name = rel.rsplit("/", 1)[-1]
    if is_notebook(repo / rel):
        return UNCLASSIFIED, "a notebook the corpus does not know (newer snapshot?)"
    if name in BY_NAME:
        return OTHER, BY_NAME[name]
    suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
    return OTHER, BY_SUFFIX.get(suffix, "other file")
