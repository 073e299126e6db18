"""Provider metadata for Airflow's ProvidersManager (entry point ``apache_airflow_provider``).

A plain dict; imports nothing, so listing providers stays cheap.
"""

from __future__ import annotations

from typing import Any


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
                    "airflow_delta_maintenance.operators.compaction",
                    "airflow_delta_maintenance.operators.cleanup",
                ],
            }
        ],
        "sensors": [{"integration-name": "Delta Lake maintenance", "python-modules": ["airflow_delta_maintenance.sensors.ratified_version"]}],
        "triggers": [{"integration-name": "Delta Lake maintenance", "python-modules": ["airflow_delta_maintenance.triggers.ratified_version"]}],
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
                "conn-fields": {
                    "endpoint_url": {"label": "Endpoint URL", "description": "S3-compatible endpoint", "schema": {"type": ["string", "null"]}},
                    "region_name": {"label": "Region", "schema": {"type": ["string", "null"]}},
                    "role_arn": {"label": "Role ARN to assume", "schema": {"type": ["string", "null"]}},
                    "storage_options": {
                        "label": "Extra fsspec storage options (JSON)",
                        "schema": {"type": ["string", "null"]},
                    },
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
            },
        ],
    }
