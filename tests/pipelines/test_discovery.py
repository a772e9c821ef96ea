"""Discovery: git-aware listing, ignore files, default skips, limits, symlinks, bad roots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipelines.discovery import DiscoveryError, confine_path, discover, resolve_project_root
from resources.settings import DEFAULT_EXTENSIONS
from tests.conftest import git_init, write_files


def run(root: Path, max_bytes: int = 1_000_000):
    return discover(root, extensions=DEFAULT_EXTENSIONS, max_file_bytes=max_bytes)


FILES = {
    "src/app.py": "def main():\n    pass\n",
    "src/util.ts": "export const f = () => 1;\n",
    "src/ignored_by_git.py": "x = 1\n",
    "src/private/secret.py": "x = 1\n",
    "node_modules/lib/index.js": "module.exports = 1;\n",
    ".venv/lib/site.py": "x = 1\n",
    "dist/bundle.js": "var a=1;\n",
    "target/debug/build.rs": "fn main() {}\n",
    "web/app.min.js": "var a=1;\n",
    "package-lock.json": "{}\n",
    "README.md": "# readme\n",
    "docs/notes.txt": "notes\n",
    ".gitignore": "src/ignored_by_git.py\n",
    ".codememignore": "src/private/\n",
}


@pytest.mark.parametrize("use_git", [True, False], ids=["git", "walk"])
def test_discovery_respects_ignores_and_default_skips(project: Path, use_git: bool) -> None:
    write_files(project, FILES)
    if use_git:
        git_init(project)
    result = run(project)
    assert result.git_aware is use_git
    assert [f.path for f in result.files] == ["src/app.py", "src/util.ts"]
    reasons = {s.path: s.reason for s in result.skipped}
    assert reasons["src/private/secret.py"] == "matched .codememignore"
    assert "src/ignored_by_git.py" not in {f.path for f in result.files}
    if not use_git:  # git never lists ignored or vendored files; the walk prunes them
        assert "node_modules/lib/index.js" not in reasons
    assert reasons.get("web/app.min.js") == "minified file"


def test_nested_ignore_files_apply_to_their_own_folder_as_git_applies_them(project: Path) -> None:
    """The walk (no git) lists what git lists: a .gitignore applies to its folder and below, not to
    a sibling's; a deeper one can re-include what an ancestor's excluded."""
    write_files(project, {
        ".gitignore": "*.gen.py\nbuild/\n",
        "a/.gitignore": "secret.py\n!keep.gen.py\n",
        "a/secret.py": "x = 1\n", "a/deeper/secret.py": "x = 1\n", "a/keep.gen.py": "x = 1\n", "a/drop.gen.py": "x = 1\n",
        "b/secret.py": "x = 1\n", "b/c/.gitignore": "/only_here.py\n", "b/c/only_here.py": "x = 1\n", "b/c/d/only_here.py": "x = 1\n",
        "b/build/out.py": "x = 1\n", "main.py": "x = 1\n", "z.gen.py": "x = 1\n",
    })
    walked = [f.path for f in run(project).files]
    git_init(project)
    listed = run(project)
    assert listed.git_aware and sorted(walked) == sorted(f.path for f in listed.files)
    assert sorted(walked) == ["a/keep.gen.py", "b/c/d/only_here.py", "b/secret.py", "main.py"]


def test_git_listing_reports_vendored_trees_committed_to_git(project: Path) -> None:
    write_files(project, {"vendor/lib.go": "package lib\n", "main.go": "package main\n"})
    git_init(project)
    result = run(project)
    assert [f.path for f in result.files] == ["main.go"]
    assert result.skipped[0].reason == "vendored or generated directory 'vendor/'"


def test_size_limit_and_languages(project: Path) -> None:
    write_files(project, {"big.py": "x = 1\n" * 1000, "small.go": "package a\n", "a.rs": "fn a() {}\n", "b.cs": "class B {}\n", "C.java": "class C {}\n", "d.jsx": "", "e.tsx": "", "f.c": "", "g.h": "", "h.cpp": "", "i.hpp": ""})
    result = run(project, max_bytes=100)
    assert {f.path: f.language for f in result.files} == {
        "small.go": "go", "a.rs": "rust", "b.cs": "csharp", "C.java": "java", "d.jsx": "javascript", "e.tsx": "tsx",
        "f.c": "c", "g.h": "cpp", "h.cpp": "cpp", "i.hpp": "cpp",
    }
    assert result.skipped[0].path == "big.py"
    assert "6,000 bytes" in result.skipped[0].reason


def test_symlinks_outside_root_and_loops_are_skipped(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text("SECRET = 1\n")
    write_files(project, {"inside.py": "x = 1\n"})
    os.symlink(outside, project / "escape.py")
    os.symlink(project / "loop_b.py", project / "loop_a.py")
    os.symlink(project / "loop_a.py", project / "loop_b.py")
    os.symlink(project, project / "self_dir")  # a directory loop: never followed
    os.symlink(project / "inside.py", project / "alias.py")  # inside the root: indexed, with its target's size
    os.symlink(project / "removed.py", project / "dangling.py")
    os.mkfifo(project / "pipe.py")
    result = run(project)
    assert [(f.path, f.size) for f in result.files] == [("alias.py", 6), ("inside.py", 6)]
    reasons = {s.path: s.reason for s in result.skipped}
    assert reasons["escape.py"] == "symlink points outside the project root"
    assert reasons["loop_a.py"] == "symlink loop"
    assert reasons["dangling.py"] == "broken symlink"
    assert reasons["pipe.py"] == "not a regular file"


def test_empty_project_and_bad_roots(project: Path, tmp_path: Path) -> None:
    assert run(project).files == []
    with pytest.raises(DiscoveryError, match="does not exist"):
        resolve_project_root(tmp_path / "missing")
    (tmp_path / "file.py").write_text("x = 1\n")
    with pytest.raises(DiscoveryError, match="not a directory"):
        resolve_project_root(tmp_path / "file.py")


def test_confine_path_refuses_escapes(project: Path, tmp_path: Path) -> None:
    write_files(project, {"a/b.py": ""})
    assert confine_path(project, "a/b.py") == (project / "a/b.py").resolve()
    with pytest.raises(DiscoveryError, match="outside the project root"):
        confine_path(project, "../outside")
    os.symlink(tmp_path, project / "link")
    with pytest.raises(DiscoveryError, match="outside the project root"):
        confine_path(project, "link/x.py")


def test_one_listing_lists_a_tree_once_per_command(project: Path) -> None:
    """``codemem index`` lists the tree once (its checks for nothing to do and the run): inside
    ``one_listing`` a second discovery of the same tree returns the first one's files, as
    independent lists; another size limit filters the paths listed first again (a file added
    since is the next command's); the documents' listing is the same one; outside the block every
    call lists."""
    from pipelines.design.ingest import discover_documents
    from resources.settings import Settings
    from pipelines.discovery import one_listing

    write_files(project, {"a.py": "x = 1\n"})
    with one_listing():
        first = run(project)
        first.files.clear()  # a caller's own copy
        (project / "b.py").write_text("y = 2\n")
        again = run(project)
        assert [f.path for f in again.files] == ["a.py"]  # the tree as the command found it
        assert [f.path for f in run(project, max_bytes=3).files] == []  # other arguments: listed now
        assert [f.path for f in run(project, max_bytes=1_000).files] == ["a.py"]
        (project / "README.md").write_text("# Notes\n")
        assert discover_documents(Settings(project_root=project)) == []
    assert [f.path for f in run(project).files] == ["a.py", "b.py"]
    assert [rel for rel, _ in discover_documents(Settings(project_root=project))] == ["README.md"]
