"""The jar cache: a completed folder is used as it is, without Maven or a network."""

from infra import jars


def test_artifact_names_are_read_from_jar_file_names():
    assert jars.artifact_of("kafka-clients-3.9.0.jar") == "kafka-clients"
    assert jars.artifact_of("scala-parallel-collections_2.13-1.2.0.jar") == "scala-parallel-collections_2.13"
    assert jars.artifact_of("zstd-jni-1.5.6-10.jar") == "zstd-jni"


def test_a_completed_folder_needs_no_maven(tmp_path, monkeypatch):
    jar_set = jars.JarSet("example-1", ("g:a:1",))
    folder = jar_set.folder(tmp_path)
    folder.mkdir()
    (folder / jars.MANIFEST).write_text("a-1.jar\nb-2.jar\n")
    monkeypatch.setenv("PATH", "")  # no mvn to be found
    assert jars.ensure(jar_set, tmp_path) == [folder / "a-1.jar", folder / "b-2.jar"]


def test_without_maven_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "")
    try:
        jars.ensure(jars.JarSet("example-2", ("g:a:1",)), tmp_path)
    except jars.JarResolutionError as exc:
        assert "mvn" in str(exc) and "example-2" in str(exc)
    else:
        raise AssertionError("expected a JarResolutionError")


def test_spark_connectors_match_pyspark_and_skip_what_it_ships():
    import pyspark

    jar_set = jars.spark_connector_jars()
    assert f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}" in jar_set.coordinates
    assert f"org.apache.spark:spark-avro_2.13:{pyspark.__version__}" in jar_set.coordinates
    assert "scala-library" in jar_set.provided
