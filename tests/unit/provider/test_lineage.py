"""OpenLineage names as the Amazon provider gives them: one dataset per table, whatever the spelling."""

from __future__ import annotations

import pytest

from airflow_delta_maintenance.operators.log_compaction import DeltaLogCompactionOperator


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://lake/tables/orders", ("s3://lake", "tables/orders")),
        ("s3a://lake/tables/orders/", ("s3://lake", "tables/orders")),
        ("s3n://lake/tables/orders", ("s3://lake", "tables/orders")),
        ("file:///data/tables/orders/", ("file", "/data/tables/orders")),
        ("/data/tables/orders", ("file", "/data/tables/orders")),
    ],
)
def test_dataset_names(uri: str, expected: tuple[str, str]) -> None:
    lineage = DeltaLogCompactionOperator(task_id="k", table_uri=uri).get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [expected] == [(d.namespace, d.name) for d in lineage.outputs]
