"""Provider metadata for Airflow's ProvidersManager (entry point ``apache_airflow_provider``).

A plain dict; imports nothing, so listing providers stays cheap.
"""

from __future__ import annotations

from typing import Any


def _field(label: str, description: str, example: str) -> dict[str, Any]:
    return {"label": label, "description": description, "schema": {"type": ["string", "null"], "examples": [example]}}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-delta-maintenance",
        "name": "Delta Lake log maintenance",
        "description": "Ratified-version sensor, ordered publishing of coordinated commits, Spark checkpoints and "
        "log compaction, and retention-gated metadata cleanup for Delta Lake tables.",
        "versions": ["0.1.0"],
        "integrations": [
            {
                "integration-name": "Delta Lake maintenance",
                "external-doc-url": "https://github.com/delta-io/delta/blob/master/PROTOCOL.md",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "Delta Lake maintenance",
                "python-modules": [
                    "airflow_delta_maintenance.operators.publish",
                    "airflow_delta_maintenance.operators.checkpoint",
                    "airflow_delta_maintenance.operators.log_compaction",
                    "airflow_delta_maintenance.operators.log_cleanup",
                    "airflow_delta_maintenance.operators.fleet_discovery",
                ],
            }
        ],
        "sensors": [{"integration-name": "Delta Lake maintenance", "python-modules": ["airflow_delta_maintenance.sensors.ratified_version"]}],
        "triggers": [{"integration-name": "Delta Lake maintenance", "python-modules": ["airflow_delta_maintenance.triggers.ratified_version"]}],
        "notifications": ["airflow_delta_maintenance.notifications.health.DeltaHealthNotifier"],
        "hooks": [
            {
                "integration-name": "Delta Lake maintenance",
                "python-modules": ["airflow_delta_maintenance.hooks.storage", "airflow_delta_maintenance.hooks.coordinator"],
            }
        ],
        "connection-types": [
            {
                "hook-class-name": "airflow_delta_maintenance.hooks.storage.DeltaStorageHook",
                "hook-name": "Delta Lake storage",
                "connection-type": "delta_storage",
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "port", "extra"],
                    "relabeling": {"login": "Access key ID", "password": "Secret access key"},
                    "placeholders": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "us-east-1", "storage_options": '{"anon": false}'},
                },
                # Airflow 3 renders extra fields from these; the example goes in the description
                # (shown under the field) and in "examples" (offered while typing)
                "conn-fields": {
                    "endpoint_url": _field("Endpoint URL", "S3-compatible endpoint, e.g. http://127.0.0.1:9000; empty for AWS", "http://127.0.0.1:9000"),
                    "region_name": _field("Region", "e.g. us-east-1", "us-east-1"),
                    "role_arn": _field(
                        "Role ARN to assume",
                        "assumed with STS, its keys refreshed before they expire, e.g. arn:aws:iam::123456789012:role/delta-maintenance",
                        "arn:aws:iam::123456789012:role/delta-maintenance",
                    ),
                    "aws_conn_id": _field(
                        "AWS connection to reuse",
                        "an Airflow aws connection whose keys, session token, region, endpoint and role are used "
                        "unless set here, e.g. aws_default",
                        "aws_default",
                    ),
                    "test_location": _field(
                        "Location listed by Test",
                        "what the Test button lists (a table's _delta_log, or any prefix), e.g. s3://lake/tables/orders; "
                        "empty: the bucket list",
                        "s3://lake/tables/orders",
                    ),
                    "storage_options": _field("Extra fsspec storage options (JSON)", 'merged last, e.g. {"anon": false}', '{"anon": false}'),
                },
            },
            {
                "hook-class-name": "airflow_delta_maintenance.hooks.coordinator.DeltaCoordinatorHook",
                "hook-name": "Delta commit coordinator",
                "connection-type": "delta_coordinator",
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "port", "extra"],
                    "relabeling": {"host": "Coordinator spec", "login": "AWS access key ID (DynamoDB)", "password": "Token / secret"},
                    "placeholders": {
                        "host": "local:///data/coordinator.db | dynamodb://table?region=us-east-1 | unity-catalog://host:8080/cat.sch.tbl"
                    },
                },
                "conn-fields": {
                    "aws_conn_id": _field(
                        "AWS connection to reuse (DynamoDB)",
                        "an Airflow aws connection for DynamoDB credentials (keys, session token, role), e.g. aws_default",
                        "aws_default",
                    ),
                },
            },
        ],
    }
