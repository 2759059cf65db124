"""Settings of the shared session that name JVM classes: a class renamed by a Spark upgrade
would otherwise fail every query at its start."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_the_checkpoint_file_manager_class_is_spark_s_and_in_force(spark) -> None:  # type: ignore[no-untyped-def]
    name = spark.conf.get("spark.sql.streaming.checkpointFileManagerClass")
    assert name.endswith("FileSystemBasedCheckpointFileManager")
    assert spark._jvm.java.lang.Class.forName(name).getName() == name
