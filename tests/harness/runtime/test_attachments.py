"""Attached files as an agent gets them: named safely, said in its prompt, its images in its
first message within the model's limits, written whole into its folder and kept out of git,
and carried in its spec to a host elsewhere unchanged."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from harness.boundary.git import Tree
from harness.boundary.git_work import commit_all
from harness.config.roles import Role
from harness.runtime.attachments import (
    MODEL_IMAGE_MAX_BYTES,
    LeftOut,
    attachment,
    attachment_note,
    first_message,
    keep_out_of_git,
    prompt_input,
    safe_name,
    shown_images,
    write_attachments,
)
from harness.runtime.spec import AgentSpec
from tests.support import git, make_repository

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 20


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("app.log", "app.log"),
        ("../../etc/passwd", "passwd"),
        ("C:\\logs\\run 1.txt", "run_1.txt"),
        (".env", "env"),
        ("..", "file"),
        ("ünï cödé.csv", "ünï_cödé.csv"),
        ("x" * 300 + ".log", "x" * 100 + ".log"),
    ],
)
def test_names_stay_in_their_folder(given: str, named: str) -> None:
    assert safe_name(given) == named


def test_names_are_made_apart() -> None:
    first = attachment("log.txt", "text/plain", b"1")
    second = attachment("log.txt", "text/plain", b"2", [first.name])
    third = attachment("log.txt", "text/plain", b"3", [first.name, second.name])
    assert [first.name, second.name, third.name] == ["log.txt", "log-2.txt", "log-3.txt"]


def test_the_prompt_says_where_each_file_is_and_what_was_left_out() -> None:
    image = attachment("s.png", "image/png", PNG)
    huge = attachment("huge.png", "image/png", b"\x89PNG" + b"\0" * MODEL_IMAGE_MAX_BYTES)
    log = attachment("app.log", "text/plain", b"x" * 12_300)
    note = attachment_note([image, huge, log], [LeftOut("big.zip", "over the limit")])
    assert note == (
        "Files attached: .attachments/s.png (28 B, shown to you above), "
        ".attachments/huge.png (5.0 MB, too large to show you as an image), "
        ".attachments/app.log (12 KB)\n"
        "Left out (you do not have them): big.zip (over the limit)"
    )
    assert attachment_note([]) == ""


def test_images_go_first_in_the_first_message_with_the_text() -> None:
    image = attachment("s.png", "image/png", PNG)
    log = attachment("app.log", "text/plain", b"log")
    message = first_message("look", [image, log])
    assert message["message"]["content"] == [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(PNG).decode(),
            },
        },
        {"type": "text", "text": "look"},
    ]
    assert prompt_input("look", [log]) == "look"  # no image: the text alone


def test_images_past_the_requests_limit_are_not_shown() -> None:
    big = b"\x89PNG" + b"\0" * 3_000_000  # 4 MB as base64: five fit in the request
    images = [attachment(f"{n}.png", "image/png", big) for n in range(6)]
    assert [i.name for i in shown_images(images)] == ["0.png", "1.png", "2.png", "3.png", "4.png"]


@pytest.mark.anyio
async def test_written_files_are_exact_and_never_committed(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "repo")
    log = attachment("app.log", "text/plain", b"caf\xc3\xa9\r\nline 2")
    write_attachments(repo, [log, attachment("s.png", "image/png", PNG)])
    assert (repo / ".attachments" / "app.log").read_bytes() == b"caf\xc3\xa9\r\nline 2"
    (repo / "work.txt").write_text("work\n", encoding="utf-8")
    # The agent took the .gitignore away: it is back before the harness commits.
    (repo / ".attachments" / ".gitignore").unlink()
    keep_out_of_git(repo)
    tree = Tree(repo, repo / ".git", repo / ".git")
    done = await commit_all(tree, "work", author="harness developer", email="h@example.com")
    assert done.commit
    committed = git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
    assert committed == ["README.md", "work.txt"]
    assert git(repo, "status", "--porcelain") == ""


def test_a_link_an_agent_left_in_place_of_the_folder_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / ".attachments").symlink_to(outside)
    write_attachments(folder, [attachment("authorized_keys", "text/plain", b"key")])
    assert list(outside.iterdir()) == []
    assert (folder / ".attachments" / "authorized_keys").read_bytes() == b"key"


def test_links_an_agent_left_inside_the_folder_are_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "authorized_keys").write_bytes(b"theirs")
    (outside / "config").write_bytes(b"theirs")
    folder = tmp_path / "work"
    (folder / ".attachments").mkdir(parents=True)
    (folder / ".attachments" / "authorized_keys").symlink_to(outside / "authorized_keys")
    (folder / ".attachments" / ".gitignore").symlink_to(outside / "config")
    write_attachments(folder, [attachment("authorized_keys", "text/plain", b"key")])
    assert (outside / "authorized_keys").read_bytes() == b"theirs"
    assert (outside / "config").read_bytes() == b"theirs"
    assert (folder / ".attachments" / "authorized_keys").read_bytes() == b"key"
    assert not (folder / ".attachments" / ".gitignore").is_symlink()


def test_keeping_out_of_git_writes_nothing_through_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / ".attachments").symlink_to(outside)
    keep_out_of_git(folder)  # a link is no folder of attachments: nothing to keep out
    assert list(outside.iterdir()) == []
    (folder / ".attachments").unlink()
    (folder / ".attachments").mkdir()
    (outside / "config").write_bytes(b"theirs")
    (folder / ".attachments" / ".gitignore").symlink_to(outside / "config")
    keep_out_of_git(folder)
    assert (outside / "config").read_bytes() == b"theirs"
    assert (folder / ".attachments" / ".gitignore").read_text(encoding="utf-8").endswith("*\n")


def test_a_spec_carries_its_attachments_to_another_host() -> None:
    role = Role("developer", "Developer", "worker", "You write code.", "roles/developer.md")
    spec = AgentSpec(
        agent_id="a1b2c3",
        role=role,
        prompt="look",
        cwd="/w",
        attachments=(attachment("s.png", "image/png", PNG),),
    )
    again = AgentSpec.from_json(spec.to_json())
    assert again == spec
    assert again.attachments[0].content() == PNG
