"""The pure parts of the image builder: which Debian mirror, what a recipe digest depends on."""

from __future__ import annotations

from shadowtwin.testing import images


def test_the_mirror_comes_from_deb822_sources_skipping_security(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n")
    assert images.debian_mirror(tmp_path) == "http://mirror.example/debian"


def test_the_mirror_comes_from_a_one_line_sources_list(tmp_path):
    (tmp_path / "sources.list").write_text("# comment\ndeb [arch=amd64] http://old.example/debian bookworm main\n")
    assert images.debian_mirror(tmp_path) == "http://old.example/debian"


def test_without_sources_the_mirror_is_debians_own(tmp_path):
    assert images.debian_mirror(tmp_path) == "http://deb.debian.org/debian"


def test_a_recipe_changes_with_a_files_content_or_name_or_an_argument(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM base\n")
    first = images.digest({"Dockerfile": dockerfile}, "JRE=x")
    assert images.digest({"Dockerfile": dockerfile}, "JRE=x") == first
    assert images.digest({"Dockerfile": dockerfile}, "JRE=y") != first
    assert images.digest({"other/Dockerfile": dockerfile}, "JRE=x") != first
    dockerfile.write_text("FROM base\nRUN true\n")
    assert images.digest({"Dockerfile": dockerfile}, "JRE=x") != first


def test_the_build_context_holds_exactly_the_files_given(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "STAGING", tmp_path / "staging")
    source = tmp_path / "a.jar"
    source.write_bytes(b"jar")
    (tmp_path / "staging" / "kafka" / "stale").mkdir(parents=True)
    context = images.stage("kafka", {"jars/a.jar": source})
    assert sorted(str(p.relative_to(context)) for p in context.rglob("*")) == ["jars", "jars/a.jar"]
    assert (context / "jars/a.jar").read_bytes() == b"jar"


def test_an_unknown_image_is_one_line_and_status_2(capsys):
    assert images.main(["kafak"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kafak" in err and "kafka" in err
